package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/live/control"
)

// liveRows measures the live interfaces: the logger's CPU per
// GPU-sample with one status request and one scrape a second against a
// logger without them running side by side in the same window (this machine
// is shared: two runs one after the other see different loads), with the
// CPU floor alongside, and how long each of those 8-GPU scrapes took; and
// the status answer's and a scrape's latency while a GPU is hung in the
// driver, next to the latency of a ping (the same socket round trip without
// a document) measured in the same window. With -before, a second binary
// (the one before a change) runs next to the first in the same windows and
// gets the same requests: before and after, same load.
func liveRows(o opts) ([][3]string, error) {
	window := time.Duration(min(o.seconds, 30)) * time.Second
	r, err := liveCPU(o, window)
	if err != nil {
		return nil, err
	}
	lats, err := hungStatusLatency(o)
	if err != nil {
		return nil, err
	}
	with, base := r.with[0].perSample(), r.base.perSample()
	extra := func(w *result) float64 {
		return (float64(w.cpu)/float64(w.rows) - float64(r.base.cpu)/float64(r.base.rows)) * float64(w.rows) / window.Seconds() / 1e3
	}
	rows := [][3]string{
		{"live: CPU per GPU-sample, 1 scrape/s + 1 status/s", fmt.Sprintf("%.1f us (without: %.1f us)", with, base),
			fmt.Sprintf("target < +5 %%: %+.1f %% (about %.0f us CPU a second for one scrape and one status answer; the floor program answering two requests a second on a unix socket pays %.0f us a second for them); the loggers run side by side in one %v window; %s; without: %.1f x the floor",
				(with/base-1)*100, extra(r.with[0]), float64(r.floorServer)/1e3/window.Seconds(), window, r.with[0].floorNote(), float64(r.base.cpu)/1e3/r.base.ticks()/r.base.floorTick())},
	}
	if len(r.with) > 1 {
		b := r.with[1].perSample()
		rows = append(rows, [3]string{"... the same, binary before (-before)", fmt.Sprintf("%.1f us", b),
			fmt.Sprintf("%+.1f %% over the logger without listeners (about %.0f us CPU a second for the two requests); side by side with the rows above, same window and requests; %s", (b/base-1)*100, extra(r.with[1]), r.with[1].floorNote())})
	}
	for i, sc := range r.scrapes {
		label := "live: a scrape of 8 GPUs p50 / max"
		if i > 0 {
			label = "... the same, binary before (-before)"
		}
		rows = append(rows, [3]string{label, fmt.Sprintf("%.2f / %.2f ms", sc.lat[0], sc.lat[2]),
			fmt.Sprintf("target well under a scrape timeout (10 s by default); %d scrapes (one a second, gzip offered as Prometheus does) of healthy-8gpu.scn in the CPU window above, %d bytes", sc.n, sc.bytes)})
	}
	for i, lat := range lats {
		sfx := ""
		if i > 0 {
			sfx = ", binary before (-before)"
		}
		rows = append(rows,
			[3]string{"live: status answer p50 / p99 with a GPU hung" + sfx, fmt.Sprintf("%.2f / %.2f ms", lat.status[0], lat.status[1]),
				fmt.Sprintf("target p99 < 10 ms; %d requests over the control socket (connect, ask, read the whole answer) while GPU 1 of hang.scn is stuck in the driver; a ping over the same socket in the same window (no document): %.2f / %.2f ms",
					lat.n, lat.ping[0], lat.ping[1])},
			[3]string{"live: scrape p50 / p99 with a GPU hung" + sfx, fmt.Sprintf("%.2f / %.2f ms", lat.scrape[0], lat.scrape[1]),
				fmt.Sprintf("a scrape never waits on NVML; %d scrapes of hang.scn (2 GPUs) in the same window", lat.n)})
	}
	return rows, nil
}

// liveResult is the side-by-side run: the logger with clients (and the
// binary before, with -before) and without, what the same number of
// requests cost the floor program (its CPU answering them minus the bare
// floor's, same window), and each listening logger's scrape times.
type liveResult struct {
	with        []*result
	base        *result
	floorServer time.Duration
	scrapes     []scrapeTimes
}

// scrapeTimes are one logger's scrapes: p50, p99 and max in ms, how many,
// and the size of the last.
type scrapeTimes struct {
	lat   [3]float64
	n     int
	bytes int64
}

// liveCPU runs the loggers on the steady-state scenario at the same time,
// one (and the binary before, with -before) with the control socket and
// --metrics-listen serving one status request and one scrape a second, one
// without listeners, and the floor program next to them; it measures the
// window after the warm-up.
func liveCPU(o opts, window time.Duration) (*liveResult, error) {
	type run struct {
		dir, addr string
		cmd       *exec.Cmd
		res       result
		scrapes   []time.Duration
		bytes     int64
	}
	bins := []string{o.bin}
	if o.before != "" {
		bins = append(bins, o.before)
	}
	runs := make([]run, len(bins)+1) // the listening loggers, then the one without
	for i := range runs {
		dir, clean, err := logDir(o, "live")
		if err != nil {
			return nil, err
		}
		defer clean()
		oo := o
		var args []string
		if i < len(bins) {
			oo.bin = bins[i]
			if runs[i].addr, err = freeLoopback(); err != nil {
				return nil, err
			}
			args = []string{"--socket", filepath.Join(dir, "c.sock"), "--metrics-listen", runs[i].addr}
		}
		cmd, err := start(oo, dir, []string{"SIMNVML_SCENARIO=" + o.scenario}, args...)
		if err != nil {
			return nil, err
		}
		defer func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() }()
		runs[i].dir, runs[i].cmd, runs[i].res = dir, cmd, result{iv: o.interval}
	}
	fl := exec.Command(o.floor, "-interval", o.interval.String())
	if err := fl.Start(); err != nil {
		return nil, err
	}
	defer func() { fl.Process.Kill(); fl.Wait() }()
	// The floor again, answering as many requests as the logger gets.
	flSock := filepath.Join(runs[0].dir, "floor.sock")
	fs := exec.Command(o.floor, "-interval", o.interval.String(), "-socket", flSock)
	if err := fs.Start(); err != nil {
		return nil, err
	}
	defer func() { fs.Process.Kill(); fs.Wait() }()
	time.Sleep(time.Duration(o.warmup) * time.Second)
	type mark struct {
		cpu  []time.Duration
		rows []int
	}
	snap := func() (m mark, floor, floorSrv time.Duration) {
		for i := range runs {
			m.cpu, m.rows = append(m.cpu, taskCPU(runs[i].cmd.Process.Pid)), append(m.rows, countRows(runs[i].dir))
		}
		return m, taskCPU(fl.Process.Pid), taskCPU(fs.Process.Pid)
	}
	t0 := time.Now()
	m0, f0, s0 := snap()
	for k := 0; time.Since(t0) < window; k++ {
		for j := range bins {
			i := (j + k) % len(bins) // who goes first rotates
			r := &runs[i]
			if _, err := control.Ask(filepath.Join(r.dir, "c.sock"), "status", 5*time.Second); err != nil {
				return nil, fmt.Errorf("status: %w (see %s/stderr.log)", err, r.dir)
			}
			d, n, err := scrape(r.addr)
			if err != nil {
				return nil, fmt.Errorf("%w (see %s/stderr.log)", err, r.dir)
			}
			r.scrapes, r.bytes = append(r.scrapes, d), n
		}
		for range 2 {
			if _, err := roundTrip(flSock, "ping"); err != nil {
				return nil, fmt.Errorf("floor server: %w", err)
			}
		}
		time.Sleep(time.Second)
	}
	m1, f1, s1 := snap()
	t1 := time.Now()
	out := &liveResult{floorServer: (s1 - s0) - (f1 - f0)}
	for i := range runs {
		r := &runs[i].res
		r.window, r.cpu, r.floorCPU, r.rows = t1.Sub(t0), m1.cpu[i]-m0.cpu[i], f1-f0, m1.rows[i]-m0.rows[i]
		if r.rows <= 0 {
			return nil, fmt.Errorf("no rows written (see %s/stderr.log)", runs[i].dir)
		}
		if i < len(bins) {
			out.with = append(out.with, r)
			q := quantiles(runs[i].scrapes)
			out.scrapes = append(out.scrapes, scrapeTimes{lat: [3]float64{q[0], q[1], float64(slices.Max(runs[i].scrapes)) / 1e6}, n: len(runs[i].scrapes), bytes: runs[i].bytes})
		} else {
			out.base = r
		}
	}
	return out, nil
}

// hungLatency is the status, ping and scrape latency (p50, p99 in ms)
// with a GPU hung.
type hungLatency struct {
	status, ping, scrape [2]float64
	n                    int
}

// hungStatusLatency asks for the status, then pings, then scrapes, every
// 75 ms for 10 s while GPU 1 of hang.scn is stuck (3 s to 23 s); with
// -before, of both binaries side by side, taking turns.
func hungStatusLatency(o opts) ([]hungLatency, error) {
	bins := []string{o.bin}
	if o.before != "" {
		bins = append(bins, o.before)
	}
	type run struct {
		sock, addr, dir  string
		st, ping, scrape []time.Duration
	}
	runs := make([]run, len(bins))
	scn := filepath.Join(filepath.Dir(o.scenario), "hang.scn")
	for i, bin := range bins {
		dir, clean, err := logDir(o, "livehang")
		if err != nil {
			return nil, err
		}
		defer clean()
		addr, err := freeLoopback()
		if err != nil {
			return nil, err
		}
		oo := o
		oo.bin = bin
		runs[i] = run{sock: filepath.Join(dir, "c.sock"), addr: addr, dir: dir}
		cmd, err := start(oo, dir, []string{"SIMNVML_SCENARIO=" + scn}, "--socket", runs[i].sock, "--metrics-listen", addr)
		if err != nil {
			return nil, err
		}
		defer func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() }()
	}
	time.Sleep(5 * time.Second) // stuck since 3 s, past the 1 s deadline
	for _, r := range runs {
		d, _, err := control.Query(r.sock, 5*time.Second)
		if err != nil {
			return nil, err
		}
		if len(d.GPUs) < 2 || d.GPUs[1].State != "hung" {
			return nil, fmt.Errorf("GPU 1 is not hung at 5 s (see %s/stderr.log)", r.dir)
		}
	}
	end := time.Now().Add(10 * time.Second)
	for k := 0; time.Now().Before(end); k++ {
		for j := range runs {
			r := &runs[(j+k)%len(runs)]
			for _, q := range []struct {
				req string
				lat *[]time.Duration
			}{{"status", &r.st}, {"ping", &r.ping}, {"scrape", &r.scrape}} {
				var d time.Duration
				var err error
				if q.req == "scrape" {
					d, _, err = scrape(r.addr)
				} else {
					d, err = roundTrip(r.sock, q.req)
				}
				if err != nil {
					return nil, fmt.Errorf("%s: %w (see %s/stderr.log)", q.req, err, r.dir)
				}
				*q.lat = append(*q.lat, d)
				time.Sleep(25 * time.Millisecond / time.Duration(len(runs)))
			}
		}
	}
	var out []hungLatency
	for _, r := range runs {
		out = append(out, hungLatency{status: quantiles(r.st), ping: quantiles(r.ping), scrape: quantiles(r.scrape), n: len(r.st)})
	}
	return out, nil
}

// roundTrip times one request on the control socket: connect, send the
// line, read the whole answer (the daemon closes after it).
func roundTrip(sock, req string) (time.Duration, error) {
	t := time.Now()
	c, err := net.DialTimeout("unix", sock, 5*time.Second)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, req+"\n"); err != nil {
		return 0, err
	}
	n, err := io.Copy(io.Discard, c)
	if err != nil {
		return 0, err
	}
	if n == 0 {
		return 0, fmt.Errorf("empty answer")
	}
	return time.Since(t), nil
}

// quantiles returns p50 and p99 in ms.
func quantiles(lat []time.Duration) [2]float64 {
	slices.Sort(lat)
	q := func(f float64) float64 { return float64(lat[int(f*float64(len(lat)-1))]) / 1e6 }
	return [2]float64{q(0.5), q(0.99)}
}

func freeLoopback() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// scrape asks /metrics as Prometheus does (it offers gzip) and returns how
// long the whole answer took and its size.
func scrape(addr string) (time.Duration, int64, error) {
	t := time.Now()
	req, err := http.NewRequest("GET", "http://"+addr+"/metrics", nil)
	if err != nil {
		return 0, 0, err
	}
	req.Header.Set("Accept-Encoding", "gzip")
	req.Header.Set("Accept", "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1")
	c := http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true, DisableCompression: true}}
	r, err := c.Do(req)
	if err != nil {
		return 0, 0, fmt.Errorf("scrape: %w", err)
	}
	defer r.Body.Close()
	if r.StatusCode != http.StatusOK {
		return 0, 0, fmt.Errorf("scrape: %s", r.Status)
	}
	n, err := io.Copy(io.Discard, r.Body)
	return time.Since(t), n, err
}
