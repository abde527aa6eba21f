package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Basic auth of the flood run: the user prometheus, password bench-right,
// bcrypt at cost 10 (htpasswd -B's and the toolkit's documented default).
const floodWebConfig = "basic_auth_users:\n  prometheus: $2a$10$YBuUWzz0uam.N68TAdX97eHxakQgXLBZiL6BE0krY6PyAXa26mWJ6\n"

// floodClients send wrong passwords at once, as in issue 41's probe, each
// one every floodEvery (320 a second in all: some 20 times what bcrypt at
// cost 10 checks on one core, so the binary before is saturated, while the
// HTTP handling of the answers stays small).
const (
	floodClients = 16
	floodEvery   = 50 * time.Millisecond
)

// floodRows is the cadence under a wrong-password flood: the logger with
// --metrics-listen and basic auth (bcrypt, cost 10), quiet, then with
// floodClients clients on loopback sending wrong passwords (each one new)
// for the window while Prometheus scrapes once a second with the right
// one; with -before, the binary before a change under the same flood.
func floodRows(o opts) ([][3]string, error) {
	window := min(o.seconds, 15)
	cfgDir, err := os.MkdirTemp("", "gtbench-web-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(cfgDir)
	cfg := filepath.Join(cfgDir, "web.yml")
	if err := os.WriteFile(cfg, []byte(floodWebConfig), 0o600); err != nil {
		return nil, err
	}
	run := func(name, bin string, flood bool) (*result, *floodCount, error) {
		addr, err := freeLoopback()
		if err != nil {
			return nil, nil, err
		}
		oo := o
		oo.bin = bin
		fc := &floodCount{}
		sp := spec{name: name, scenario: o.scenario, seconds: window,
			args: []string{"--metrics-listen", addr, "--web.config.file", cfg}}
		if flood {
			sp.during = func(w time.Duration) { fc.flood(addr, w) }
		}
		r, err := measure(oo, sp)
		return r, fc, err
	}
	quiet, _, err := run("flood-quiet", o.bin, false)
	if err != nil {
		return nil, err
	}
	row := func(label string, r *result, fc *floodCount) [3]string {
		scr := "none answered"
		if len(fc.scrapes) > 0 {
			scr = fmt.Sprintf("max %.1f ms", float64(slices.Max(fc.scrapes))/1e6)
		}
		return [3]string{label, fmt.Sprintf("%.1f ms (quiet: %.1f ms)", r.p99, quiet.p99),
			fmt.Sprintf("target: no worse than quiet; period deviation p99 of 8 GPUs at %v while %d clients on loopback send wrong passwords, each one every %v, for %v (basic auth, bcrypt cost 10): %d answered 401 (a bcrypt comparison each), %d answered 429 (none), %d not answered (a connection closed or timed out); the logger's CPU %.2f s in the window (quiet: %.2f s); Prometheus scraping once a second with the right password: %d of %d answered 200, %s; tick_overruns %s, busy_skips %s",
				o.interval, floodClients, floodEvery, r.window.Round(time.Second), fc.n401.Load(), fc.n429.Load(), fc.failed.Load(),
				r.cpu.Seconds(), quiet.cpu.Seconds(), len(fc.scrapes), fc.asked, scr, r.status["tick_overruns"], r.status["busy_skips"])}
	}
	r, fc, err := run("flood", o.bin, true)
	if err != nil {
		return nil, err
	}
	rows := [][3]string{row("live: cadence p99 under a wrong-password flood", r, fc)}
	if o.before != "" {
		r, fc, err := run("flood-before", o.before, true)
		if err != nil {
			return nil, err
		}
		rows = append(rows, row("... the same, binary before (-before)", r, fc))
	}
	return rows, nil
}

// floodCount is what a flood got back, and the scrapes beside it.
type floodCount struct {
	n401, n429, failed atomic.Int64
	asked              int
	scrapes            []time.Duration // the scrapes answered 200
}

// flood sends wrong passwords from floodClients clients (keep-alive, each
// password new so the toolkit's cache never answers, one every floodEvery
// or as fast as answered) to addr for w, and scrapes with the right
// password once a second meanwhile, as before the flood began.
func (fc *floodCount) flood(addr string, w time.Duration) {
	url := "http://" + addr + "/metrics"
	c := http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableCompression: true}}
	defer c.CloseIdleConnections()
	scrape := func() bool {
		req, _ := http.NewRequest("GET", url, nil)
		req.SetBasicAuth("prometheus", "bench-right")
		r, err := c.Do(req)
		if err != nil {
			return false
		}
		io.Copy(io.Discard, r.Body)
		r.Body.Close()
		return r.StatusCode == http.StatusOK
	}
	scrape() // Prometheus was scraping before the flood began
	deadline := time.Now().Add(w)
	var wg sync.WaitGroup
	var seq atomic.Int64
	for range floodClients {
		wg.Go(func() {
			c := http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableCompression: true}}
			defer c.CloseIdleConnections()
			for t := time.Now(); t.Before(deadline); t = time.Now() {
				req, _ := http.NewRequest("GET", url, nil)
				req.SetBasicAuth("prometheus", fmt.Sprint("wrong-", seq.Add(1)))
				r, err := c.Do(req)
				time.Sleep(time.Until(t.Add(floodEvery)))
				if err != nil {
					fc.failed.Add(1)
					continue
				}
				io.Copy(io.Discard, r.Body)
				r.Body.Close()
				switch r.StatusCode {
				case http.StatusUnauthorized:
					fc.n401.Add(1)
				case http.StatusTooManyRequests:
					fc.n429.Add(1)
				default:
					fc.failed.Add(1)
				}
			}
		})
	}
	for t := time.Now(); t.Before(deadline); t = time.Now() {
		fc.asked++
		if scrape() {
			fc.scrapes = append(fc.scrapes, time.Since(t))
		}
		time.Sleep(time.Until(t.Add(time.Second)))
	}
	wg.Wait()
}
