package main

import (
	"fmt"
	"io"
	"net"
	"net/http"

	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/live/control"
)

// liveRows measures the live interfaces (issue 9): the logger's CPU per
// GPU-sample with one status request and one scrape a second against the
// same run without them, and the status answer's latency while a GPU is
// hung in the driver.
func liveRows(o opts) ([][3]string, error) {
	window := time.Duration(min(o.seconds, 30)) * time.Second
	base, err := liveCPU(o, window, false)
	if err != nil {
		return nil, err
	}
	with, err := liveCPU(o, window, true)
	if err != nil {
		return nil, err
	}
	p50, p99, n, err := hungStatusLatency(o)
	if err != nil {
		return nil, err
	}
	return [][3]string{
		{"live: CPU per GPU-sample, 1 scrape/s + 1 status/s", fmt.Sprintf("%.1f us (without: %.1f us)", with, base),
			fmt.Sprintf("target < +5 %%: %+.1f %%; control socket and --metrics-listen on, %v per run, runs one after the other", (with/base-1)*100, window)},
		{"live: status answer p50 / p99 with a GPU hung", fmt.Sprintf("%.2f / %.2f ms", p50, p99),
			fmt.Sprintf("target p99 < 10 ms; %d requests over the control socket while GPU 1 of hang.scn is stuck in the driver", n)},
	}, nil
}

// liveCPU runs the logger on the steady-state scenario and returns its CPU
// per GPU-sample in microseconds; with clients, it serves one status
// request and one scrape a second during the window.
func liveCPU(o opts, window time.Duration, clients bool) (float64, error) {
	dir, clean, err := logDir(o, "live")
	if err != nil {
		return 0, err
	}
	defer clean()
	sock := filepath.Join(dir, "c.sock")
	var args []string
	addr := ""
	if clients {
		if addr, err = freeLoopback(); err != nil {
			return 0, err
		}
		args = []string{"--socket", sock, "--metrics-listen", addr}
	}
	cmd, err := start(o, dir, []string{"SIMNVML_SCENARIO=" + o.scenario}, args...)
	if err != nil {
		return 0, err
	}
	defer func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() }()
	pid := cmd.Process.Pid
	time.Sleep(time.Duration(o.warmup) * time.Second)
	t0, c0, rows0 := time.Now(), taskCPU(pid), countRows(dir)
	for time.Since(t0) < window {
		if clients {
			if _, _, err := control.Query(sock, 5*time.Second); err != nil {
				return 0, fmt.Errorf("status: %w (see %s/stderr.log)", err, dir)
			}
			if err := scrape(addr); err != nil {
				return 0, err
			}
		}
		time.Sleep(time.Second)
	}
	c1, rows1 := taskCPU(pid), countRows(dir)
	if rows1 <= rows0 {
		return 0, fmt.Errorf("no rows written (see %s/stderr.log)", dir)
	}
	return float64(c1-c0) / 1e3 / float64(rows1-rows0), nil
}

// hungStatusLatency asks for the status every 50 ms for 10 s while GPU 1 of
// hang.scn is stuck (3 s to 23 s) and returns p50 and p99 in ms.
func hungStatusLatency(o opts) (p50, p99 float64, n int, err error) {
	dir, clean, err := logDir(o, "livehang")
	if err != nil {
		return 0, 0, 0, err
	}
	defer clean()
	sock := filepath.Join(dir, "c.sock")
	scn := filepath.Join(filepath.Dir(o.scenario), "hang.scn")
	cmd, err := start(o, dir, []string{"SIMNVML_SCENARIO=" + scn}, "--socket", sock)
	if err != nil {
		return 0, 0, 0, err
	}
	defer func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() }()
	time.Sleep(5 * time.Second) // stuck since 3 s, past the 1 s deadline
	d, _, err := control.Query(sock, 5*time.Second)
	if err != nil {
		return 0, 0, 0, err
	}
	if len(d.GPUs) < 2 || d.GPUs[1].State != "hung" {
		return 0, 0, 0, fmt.Errorf("GPU 1 is not hung at 5 s (see %s/stderr.log)", dir)
	}
	var lat []time.Duration
	end := time.Now().Add(10 * time.Second)
	for time.Now().Before(end) {
		t := time.Now()
		if _, _, err := control.Query(sock, 5*time.Second); err != nil {
			return 0, 0, 0, err
		}
		lat = append(lat, time.Since(t))
		time.Sleep(50 * time.Millisecond)
	}
	slices.Sort(lat)
	q := func(f float64) float64 { return float64(lat[int(f*float64(len(lat)-1))]) / 1e6 }
	return q(0.5), q(0.99), len(lat), nil
}

func freeLoopback() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func scrape(addr string) error {
	c := http.Client{Timeout: 5 * time.Second}
	r, err := c.Get("http://" + addr + "/metrics")
	if err != nil {
		return fmt.Errorf("scrape: %w", err)
	}
	defer r.Body.Close()
	_, err = io.Copy(io.Discard, r.Body)
	return err
}
