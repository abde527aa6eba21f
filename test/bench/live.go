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
// CPU floor alongside; and the status answer's latency while a GPU is hung in
// the driver, next to the latency of a ping (the same socket round trip
// without a document) measured in the same window.
func liveRows(o opts) ([][3]string, error) {
	window := time.Duration(min(o.seconds, 30)) * time.Second
	r, err := liveCPU(o, window)
	if err != nil {
		return nil, err
	}
	lat, err := hungStatusLatency(o)
	if err != nil {
		return nil, err
	}
	with, base := r.with.perSample(), r.base.perSample()
	extra := (float64(r.with.cpu)/float64(r.with.rows) - float64(r.base.cpu)/float64(r.base.rows)) * float64(r.with.rows) / window.Seconds() / 1e3
	return [][3]string{
		{"live: CPU per GPU-sample, 1 scrape/s + 1 status/s", fmt.Sprintf("%.1f us (without: %.1f us)", with, base),
			fmt.Sprintf("target < +5 %%: %+.1f %% (about %.0f us CPU a second for one scrape and one status answer; the floor program answering two requests a second on a unix socket pays %.0f us a second for them); the two loggers run side by side in one %v window; %s; without: %.1f x the floor",
				(with/base-1)*100, extra, float64(r.floorServer)/1e3/window.Seconds(), window, r.with.floorNote(), float64(r.base.cpu)/1e3/r.base.ticks()/r.base.floorTick())},
		{"live: status answer p50 / p99 with a GPU hung", fmt.Sprintf("%.2f / %.2f ms", lat.status[0], lat.status[1]),
			fmt.Sprintf("target p99 < 10 ms; %d requests over the control socket (connect, ask, read the whole answer) while GPU 1 of hang.scn is stuck in the driver; a ping over the same socket in the same window (no document): %.2f / %.2f ms",
				lat.n, lat.ping[0], lat.ping[1])},
	}, nil
}

// liveResult is the side-by-side run: the logger with clients and without,
// and what the same number of requests cost the floor program (its CPU
// answering them minus the bare floor's, same window).
type liveResult struct {
	with, base  *result
	floorServer time.Duration
}

// liveCPU runs two loggers on the steady-state scenario at the same time,
// one with the control socket and --metrics-listen serving one status
// request and one scrape a second, one without listeners, and the floor
// program next to them; it measures the window after the warm-up.
func liveCPU(o opts, window time.Duration) (*liveResult, error) {
	type run struct {
		dir string
		cmd *exec.Cmd
		res result
	}
	addr, err := freeLoopback()
	if err != nil {
		return nil, err
	}
	var runs [2]run // 0: with clients, 1: without
	for i := range runs {
		dir, clean, err := logDir(o, "live")
		if err != nil {
			return nil, err
		}
		defer clean()
		var args []string
		if i == 0 {
			args = []string{"--socket", filepath.Join(dir, "c.sock"), "--metrics-listen", addr}
		}
		cmd, err := start(o, dir, []string{"SIMNVML_SCENARIO=" + o.scenario}, args...)
		if err != nil {
			return nil, err
		}
		defer func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() }()
		runs[i] = run{dir: dir, cmd: cmd, res: result{iv: o.interval}}
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
	sock := filepath.Join(runs[0].dir, "c.sock")
	time.Sleep(time.Duration(o.warmup) * time.Second)
	type mark struct {
		cpu  [2]time.Duration
		rows [2]int
	}
	snap := func() (m mark, floor, floorSrv time.Duration) {
		for i := range runs {
			m.cpu[i], m.rows[i] = taskCPU(runs[i].cmd.Process.Pid), countRows(runs[i].dir)
		}
		return m, taskCPU(fl.Process.Pid), taskCPU(fs.Process.Pid)
	}
	t0 := time.Now()
	m0, f0, s0 := snap()
	for time.Since(t0) < window {
		if _, err := control.Ask(sock, "status", 5*time.Second); err != nil {
			return nil, fmt.Errorf("status: %w (see %s/stderr.log)", err, runs[0].dir)
		}
		if err := scrape(addr); err != nil {
			return nil, err
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
	for i := range runs {
		r := &runs[i].res
		r.window, r.cpu, r.floorCPU, r.rows = t1.Sub(t0), m1.cpu[i]-m0.cpu[i], f1-f0, m1.rows[i]-m0.rows[i]
		if r.rows <= 0 {
			return nil, fmt.Errorf("no rows written (see %s/stderr.log)", runs[i].dir)
		}
	}
	return &liveResult{with: &runs[0].res, base: &runs[1].res, floorServer: (s1 - s0) - (f1 - f0)}, nil
}

// hungLatency is the status and ping latency (p50, p99 in ms) with a GPU
// hung.
type hungLatency struct {
	status, ping [2]float64
	n            int
}

// hungStatusLatency asks for the status, then pings, every 50 ms for 10 s
// while GPU 1 of hang.scn is stuck (3 s to 23 s).
func hungStatusLatency(o opts) (hungLatency, error) {
	var out hungLatency
	dir, clean, err := logDir(o, "livehang")
	if err != nil {
		return out, err
	}
	defer clean()
	sock := filepath.Join(dir, "c.sock")
	scn := filepath.Join(filepath.Dir(o.scenario), "hang.scn")
	cmd, err := start(o, dir, []string{"SIMNVML_SCENARIO=" + scn}, "--socket", sock)
	if err != nil {
		return out, err
	}
	defer func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() }()
	time.Sleep(5 * time.Second) // stuck since 3 s, past the 1 s deadline
	d, _, err := control.Query(sock, 5*time.Second)
	if err != nil {
		return out, err
	}
	if len(d.GPUs) < 2 || d.GPUs[1].State != "hung" {
		return out, fmt.Errorf("GPU 1 is not hung at 5 s (see %s/stderr.log)", dir)
	}
	var st, ping []time.Duration
	end := time.Now().Add(10 * time.Second)
	for time.Now().Before(end) {
		for _, q := range []struct {
			req string
			lat *[]time.Duration
		}{{"status", &st}, {"ping", &ping}} {
			d, err := roundTrip(sock, q.req)
			if err != nil {
				return out, fmt.Errorf("%s: %w (see %s/stderr.log)", q.req, err, dir)
			}
			*q.lat = append(*q.lat, d)
			time.Sleep(25 * time.Millisecond)
		}
	}
	out.status, out.ping, out.n = quantiles(st), quantiles(ping), len(st)
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

// scrape asks /metrics as Prometheus does (it offers gzip).
func scrape(addr string) error {
	req, err := http.NewRequest("GET", "http://"+addr+"/metrics", nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept-Encoding", "gzip")
	req.Header.Set("Accept", "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1")
	c := http.Client{Timeout: 5 * time.Second}
	r, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("scrape: %w", err)
	}
	defer r.Body.Close()
	if r.StatusCode != http.StatusOK {
		return fmt.Errorf("scrape: %s", r.Status)
	}
	_, err = io.Copy(io.Discard, r.Body)
	return err
}
