// Package atoptest is a client of the atopgpud protocol that reads replies
// the way atop's gpucom.c does (gpud_init, gpud_statresponse, gputype_parse,
// gpustat_parse, gpuparse, pidparse): the prelude checks (version equal to
// the one asked for, length at most 8192), then the '@'/'#' split and the
// fixed field order of each API version. Version 2's order is the one Debian's
// atop 2.13.0 binary scans (see live/atop/format.go); Debian stable packages
// no atop that speaks it, so tests use this client as its stand-in.
package atoptest

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strings"
	"time"
)

// GPU is one GPU as atop sees it: the T reply's fields and one S reply's counters.
type GPU struct {
	BusID, Type string
	Tasks       byte
	// gpuparse: %d %d %lld %lld %lld %lld %lld %lld
	BusyNow, MemBusyNow             int64
	MemTotal, MemUsed, Samples      int64
	BusyCum, MemBusyCum, MemUsedCum int64
	NrProcs                         int
}

// Proc is one process record of an S reply.
type Proc struct {
	GPU   int
	State byte
	// version 1 pidparse: %c %ld %d %d %lld %lld %lld %lld
	//   state PID GPUBusy MemBusy TimeMs MemNow MemCum Sample
	// version 2 pidparse: %c %ld %c %lld %lld %lld %lld %lld
	//   state PID Kind GPUBusy MemBusy MemNow MemCum Sample, where the busy
	//   figures are sums over Sample (atop divides their growth by Sample's)
	//   and TimeMs is not sent
	PID                    int64
	Kind                   byte
	GPUBusy, MemBusy       int64
	TimeMs                 int64
	MemNow, MemCum, Sample int64
}

// giveUp is how long the client waits for a reply. atop gives up after 2 s
// (SO_RCVTIMEO); a test waits longer so that a loaded machine running the
// race detector does not fail it: how fast the server answers is not what
// these tests check (it never waits on NVML).
const giveUp = 60 * time.Second

// Client is one connection, with the GPUs its T request returned.
type Client struct {
	c       net.Conn
	version byte
	GPUs    []GPU // from the T reply
}

// Dial connects and sends the T request, as atop does at start.
func Dial(network, addr string, version byte) (*Client, error) {
	c, err := net.DialTimeout(network, addr, giveUp)
	if err != nil {
		return nil, err
	}
	cl := &Client{c: c, version: version}
	body, err := cl.ask('T')
	if err == nil {
		err = cl.parseTypes(body)
	}
	if err != nil {
		c.Close()
		return nil, err
	}
	return cl, nil
}

// Close closes the connection.
func (cl *Client) Close() { cl.c.Close() }

// ask sends one request and returns the body, with gpucom.c's checks.
func (cl *Client) ask(code byte) (string, error) {
	cl.c.SetDeadline(time.Now().Add(giveUp))
	if _, err := cl.c.Write([]byte{code, cl.version}); err != nil {
		return "", err
	}
	var pre [4]byte
	if _, err := io.ReadFull(cl.c, pre[:]); err != nil {
		return "", fmt.Errorf("receive prelude: %w", err)
	}
	p := binary.BigEndian.Uint32(pre[:])
	if v := byte(p >> 24); v != cl.version {
		return "", fmt.Errorf("wrong API version from atopgpud: %d %d", v, cl.version)
	}
	n := int(p & 0xffffff)
	if n > 8192 {
		return "", fmt.Errorf("unexpected response length atopgpud: %d", n)
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(cl.c, buf); err != nil {
		return "", fmt.Errorf("receive body: %w", err)
	}
	return string(buf), nil
}

// parseTypes is gputype_parse: "N@busid type tasks@..."; inconsistent
// counts fail.
func (cl *Client) parseTypes(body string) error {
	var n int
	if _, err := fmt.Sscanf(body, "%d@", &n); err != nil {
		return fmt.Errorf("no GPU count in %q", body)
	}
	at := strings.IndexByte(body, '@')
	if n == 0 || at < 0 || at == len(body)-1 {
		return fmt.Errorf("no GPUs in %q", body)
	}
	recs := strings.Split(body[at+1:], "@")
	if len(recs) != n {
		return fmt.Errorf("%d GPU records for %d GPUs", len(recs), n)
	}
	cl.GPUs = make([]GPU, n)
	for i, r := range recs {
		f := strings.Split(r, " ")
		if len(f) != 3 || f[2] == "" {
			return fmt.Errorf("GPU record %q: want busid type tasks", r)
		}
		cl.GPUs[i] = GPU{BusID: f[0], Type: f[1], Tasks: f[2][0]}
	}
	return nil
}

// parseProc is pidparse for the client's version; n is how many fields it
// scanned (atop drops the reply below 8).
func (cl *Client) parseProc(rec string) (p Proc, n int) {
	if cl.version == 1 {
		n, _ = fmt.Sscanf(rec, "%c %d %d %d %d %d %d %d", &p.State, &p.PID, &p.GPUBusy, &p.MemBusy,
			&p.TimeMs, &p.MemNow, &p.MemCum, &p.Sample)
		return p, n
	}
	n, _ = fmt.Sscanf(rec, "%c %d %c %d %d %d %d %d", &p.State, &p.PID, &p.Kind, &p.GPUBusy, &p.MemBusy,
		&p.MemNow, &p.MemCum, &p.Sample)
	return p, n
}

// Stats is gpud_statrequest + gpud_statresponse + gpustat_parse.
func (cl *Client) Stats() ([]GPU, []Proc, error) {
	body, err := cl.ask('S')
	if err != nil {
		return nil, nil, err
	}
	at := strings.IndexByte(body, '@')
	if at < 0 {
		return nil, nil, fmt.Errorf("string without GPU delimiter: %q", body)
	}
	gpus := append([]GPU(nil), cl.GPUs...)
	var procs []Proc
	for i, rec := range strings.Split(body[at+1:], "@") {
		if i >= len(gpus) {
			break // gpunum < maxgpu
		}
		parts := strings.Split(rec, "#")
		g := &gpus[i]
		n, _ := fmt.Sscanf(parts[0], "%d %d %d %d %d %d %d %d", &g.BusyNow, &g.MemBusyNow,
			&g.MemTotal, &g.MemUsed, &g.Samples, &g.BusyCum, &g.MemBusyCum, &g.MemUsedCum)
		if n < 8 {
			return nil, nil, fmt.Errorf("GPU %d record %q: %d fields", i, parts[0], n)
		}
		for _, pr := range parts[1:] {
			p, n := cl.parseProc(pr)
			p.GPU = i
			if n < 8 {
				return nil, nil, fmt.Errorf("process record %q: %d fields", pr, n)
			}
			procs = append(procs, p)
			g.NrProcs++
		}
	}
	return gpus, procs, nil
}
