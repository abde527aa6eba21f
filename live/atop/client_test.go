package atop

// A client that reads replies the way atop's gpucom.c does (gpud_init,
// gpud_statresponse, gputype_parse, gpustat_parse, gpuparse, pidparse): the
// prelude checks (version equal to the one asked for, length at most 8192),
// then the '@'/'#' split and the fixed field order. It is the test's stand-in
// for atop 2.13, which no distribution packages yet.

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strings"
	"time"
)

type atopGPU struct {
	BusID, Type string
	Tasks       byte
	// gpuparse: %d %d %lld %lld %lld %lld %lld %lld
	BusyNow, MemBusyNow             int64
	MemTotal, MemUsed, Samples      int64
	BusyCum, MemBusyCum, MemUsedCum int64
	NrProcs                         int
}

type atopProc struct {
	GPU   int
	State byte
	// pidparse: %c %ld %d %d %lld %lld %lld %lld
	PID                    int64
	GPUBusy, MemBusy       int64
	TimeMs                 int64
	MemNow, MemCum, Sample int64
}

type atopClient struct {
	c       net.Conn
	version byte
	gpus    []atopGPU
}

func dialAtop(network, addr string, version byte) (*atopClient, error) {
	c, err := net.DialTimeout(network, addr, 2*time.Second)
	if err != nil {
		return nil, err
	}
	cl := &atopClient{c: c, version: version}
	body, err := cl.ask('T')
	if err != nil {
		c.Close()
		return nil, err
	}
	if err := cl.parseTypes(body); err != nil {
		c.Close()
		return nil, err
	}
	return cl, nil
}

func (cl *atopClient) Close() { cl.c.Close() }

// ask sends one request and returns the body, with gpucom.c's checks.
func (cl *atopClient) ask(code byte) (string, error) {
	cl.c.SetDeadline(time.Now().Add(2 * time.Second)) // atop's SO_RCVTIMEO
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
func (cl *atopClient) parseTypes(body string) error {
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
	cl.gpus = make([]atopGPU, n)
	for i, r := range recs {
		f := strings.Split(r, " ")
		if len(f) != 3 || f[2] == "" {
			return fmt.Errorf("GPU record %q: want busid type tasks", r)
		}
		cl.gpus[i] = atopGPU{BusID: f[0], Type: f[1], Tasks: f[2][0]}
	}
	return nil
}

// stats is gpud_statrequest + gpud_statresponse + gpustat_parse.
func (cl *atopClient) stats() ([]atopGPU, []atopProc, error) {
	body, err := cl.ask('S')
	if err != nil {
		return nil, nil, err
	}
	at := strings.IndexByte(body, '@')
	if at < 0 {
		return nil, nil, fmt.Errorf("string without GPU delimiter: %q", body)
	}
	gpus := append([]atopGPU(nil), cl.gpus...)
	var procs []atopProc
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
			p := atopProc{GPU: i}
			n, _ := fmt.Sscanf(pr, "%c %d %d %d %d %d %d %d", &p.State, &p.PID, &p.GPUBusy, &p.MemBusy,
				&p.TimeMs, &p.MemNow, &p.MemCum, &p.Sample)
			if n < 8 {
				return nil, nil, fmt.Errorf("process record %q: %d fields", pr, n)
			}
			procs = append(procs, p)
			g.NrProcs++
		}
	}
	return gpus, procs, nil
}
