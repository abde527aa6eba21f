package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/testutil"
	"github.com/gpu-telemetry/gpu-telemetry/live"
)

// status runs `gpu-telemetry status` with args and returns its exit status
// and output.
func status(t *testing.T, args ...string) (int, string) {
	t.Helper()
	code, out, stderr := runTool(t, nil, append([]string{"status"}, args...)...)
	return code, out + stderr
}

// statusDoc is the part of the status document the tests read.
type statusDoc struct {
	SchemaVersion int `json:"schema_version"`
	Host          struct {
		Counters []struct {
			Name  string `json:"name"`
			Value uint64 `json:"value"`
		} `json:"counters"`
	} `json:"host"`
	GPUs []struct {
		Index    int      `json:"index"`
		State    string   `json:"state"`
		Function string   `json:"function"`
		HungS    *float64 `json:"hung_s"`
		TempC    *uint32  `json:"temperature_c"`
	} `json:"gpus"`
}

// counter returns the host counter named name, and whether the document
// has it.
func (d *statusDoc) counter(name string) (uint64, bool) {
	for _, c := range d.Host.Counters {
		if c.Name == name {
			return c.Value, true
		}
	}
	return 0, false
}

func statusJSON(t *testing.T, sock string) (int, statusDoc) {
	t.Helper()
	code, d, _ := statusAs[statusDoc](t, sock)
	return code, d
}

// statusAs runs status --json and decodes its document into a T; out is
// the document.
func statusAs[T any](t *testing.T, sock string) (code int, d T, out string) {
	t.Helper()
	code, out = status(t, "--socket", sock, "--json")
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		t.Fatalf("status --json (exit %d): %v\n%s", code, err, out)
	}
	return code, d, out
}

func TestStatusFromTheDaemon(t *testing.T) {
	t.Parallel()
	p := start(t, opts{})
	sock := p.socketPath()
	p.waitForRows(0, 6, 10*time.Second)
	fi, err := os.Stat(sock)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("control socket %v: %v", fi, err)
	}
	code, out := status(t, "--socket", sock)
	if code != 0 || !strings.Contains(out, "GPU 0  ") || !strings.Contains(out, "  ok\n") || !strings.HasSuffix(out, "OK\n") {
		t.Errorf("status exit %d:\n%s", code, out)
	}
	code, d := statusJSON(t, sock)
	// Counts are in host.counters only (schema_version 2).
	if rows, _ := d.counter("rows_written"); code != 0 || d.SchemaVersion != live.SchemaVersion || len(d.GPUs) == 0 || d.GPUs[0].TempC == nil || rows == 0 {
		t.Errorf("status --json exit %d: %+v", code, d)
	}
	// A second instance on the same socket is refused (its own lock file).
	second := start(t, opts{args: []string{"--socket", sock}})
	if c := second.wait(15 * time.Second); c != 1 || !strings.Contains(second.stderr.String(), "in use") {
		t.Errorf("second instance on a live socket: exit %d\n%s", c, second.stderr.String())
	}
	if code, _ := status(t, "--socket", sock); code != 0 {
		t.Errorf("first instance stopped answering after the refused one: %d", code)
	}
	p.stop()
	if _, err := os.Lstat(sock); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket left after shutdown: %v", err)
	}
}

// TestControlRequestsAreCounted: the control socket's answered and failed
// requests reach the counters (status line, summary.log, the status
// document), like every other count of lost work: a client that sends a
// request the socket does not know gets an error and is counted.
func TestControlRequestsAreCounted(t *testing.T) {
	t.Parallel()
	p := start(t, opts{})
	sock := p.socketPath()
	p.waitForRows(0, 2, 10*time.Second)
	c, err := net.DialTimeout("unix", sock, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(2 * time.Second))
	c.Write([]byte("no-such-request\n"))
	b, _ := io.ReadAll(c)
	c.Close()
	if !bytes.HasPrefix(b, []byte(`{"error":`)) {
		t.Fatalf("an unknown request was answered %q, want an error", b)
	}
	// A status answer counts the requests answered before it was built
	// (one answer serves every request for 50 ms): ask until one counts
	// an earlier answer.
	var d statusDoc
	p.waitFor("a status answer counting an earlier one", 5*time.Second, func() bool {
		var ok bool
		d, ok = rawStatus(sock)
		n, _ := d.counter("control_requests")
		return ok && n >= 1
	})
	if n, ok := d.counter("control_requests_failed"); !ok || n != 1 {
		t.Errorf("status document: control_requests_failed = %d (present: %v), want 1", n, ok)
	}
	p.stop()
	testutil.Contains(t, "the final status line", p.stderr.String(), " control_requests_failed=1 ", " control_clients_refused=0 ")
	testutil.Contains(t, "summary.log", readFile(t, filepath.Join(p.dir, "summary.log")), " control_requests_failed=1 ")
}

func TestStatusUnknown(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--socket", filepath.Join(t.TempDir(), "none.sock")}, {"--bogus"}, {"--socket"}} {
		if code, out := status(t, args...); code != 3 || strings.Count(out, "\n") > 12 {
			t.Errorf("status %v: exit %d, want 3\n%s", args, code, out)
		}
	}
}

// TestHungGPUShownWhileEveryoneAnswers: the hung GPU is reported hung within
// one deadline of its call getting stuck, status exits 2 and the scrapes and
// status requests are answered while it stays stuck.
func TestHungGPUShownWhileEveryoneAnswers(t *testing.T) {
	t.Parallel()
	p := start(t, opts{scenario: "@hang", args: []string{"--metrics-listen", "127.0.0.1:0"}})
	addr := p.metricsAddr()
	sock := p.socketPath()
	// hang.scn: GPU 1 stuck from 3 s to 23 s; the deadline is 1 s.
	p.waitForRows(0, 6, 10*time.Second)
	// Polled over the socket directly (cheap): when GPU 1 is first shown
	// hung, the previous poll, gap seconds earlier, did not show it. By then
	// the call had been stuck for hung_s - gap, which must be within one
	// deadline (1 s) plus a tick and a scheduling margin.
	var shownAt float64
	prev := time.Now()
	p.waitFor("GPU 1 shown hung", 15*time.Second, func() bool {
		d, ok := rawStatus(sock)
		now := time.Now()
		gap := now.Sub(prev).Seconds()
		prev = now
		if ok && len(d.GPUs) > 1 && d.GPUs[1].State == "hung" && d.GPUs[1].HungS != nil {
			shownAt = *d.GPUs[1].HungS - gap
			return true
		}
		return false
	})
	if shownAt > 1.0+0.1+0.5 {
		t.Errorf("GPU 1 was stuck for %.2fs at a poll that did not show it hung (deadline 1s)", shownAt)
	}
	code, d := statusJSON(t, sock)
	if code != 2 || d.GPUs[1].Function == "" || d.GPUs[1].HungS == nil || d.GPUs[0].State != "ok" {
		t.Errorf("during the hang: exit %d, %+v", code, d.GPUs)
	}
	for range 5 {
		body := scrapeMetrics(t, addr)
		if !strings.Contains(body, `gpu_telemetry_gpu_state{gpu="1",state="hung"`) {
			t.Errorf("scrape during the hang lacks the hung state")
		}
		if strings.Contains(body, `gpu_telemetry_temperature_celsius{gpu="1"`) {
			t.Errorf("scrape during the hang exports a stale temperature for GPU 1")
		}
		time.Sleep(200 * time.Millisecond)
	}
	testutil.CheckMetrics(t, []byte(scrapeMetrics(t, addr)))
}

func scrapeMetrics(t *testing.T, addr string) string {
	t.Helper()
	c := http.Client{Timeout: 5 * time.Second}
	r, err := c.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	defer r.Body.Close()
	b, err := io.ReadAll(r.Body)
	if err != nil || r.StatusCode != 200 {
		t.Fatalf("scrape: %d %v", r.StatusCode, err)
	}
	return string(b)
}

// TestAlertRules checks deploy/prometheus's alert rules with promtool and
// runs their unit tests.
func TestAlertRules(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(repo, "deploy", "prometheus")
	for _, args := range [][]string{{"check", "rules", "gpu-telemetry.rules.yml"}, {"test", "rules", "gpu-telemetry.rules.test.yml"}} {
		if out, err := testutil.Promtool(t, dir, nil, args...); err != nil {
			t.Errorf("promtool %v: %v\n%s", args, err, out)
		}
	}
}

func TestMetricsEndpoint(t *testing.T) {
	t.Parallel()
	p := start(t, opts{args: []string{"--metrics-listen", "127.0.0.1:0"}})
	addr := p.metricsAddr()
	p.waitForRows(0, 6, 10*time.Second)
	body := scrapeMetrics(t, addr)
	for _, want := range []string{"gpu_telemetry_build_info{", `gpu_telemetry_gpu_info{driver="`, `gpu_telemetry_temperature_celsius{gpu="0",uuid="GPU-`,
		"gpu_telemetry_rows_written_total ", "gpu_telemetry_side_drops_total 0", `gpu_telemetry_gpu_state{gpu="0",state="answering",uuid="GPU-`} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	testutil.CheckMetrics(t, []byte(body))
	// Off by default: nothing listens without the flag.
	q := start(t, opts{})
	q.waitForRows(0, 3, 10*time.Second)
	if strings.Contains(q.stderr.String(), "metrics listening") {
		t.Errorf("metrics endpoint on without --metrics-listen")
	}
}

// TestMetricsPortTakenCarriesOn: a --metrics-listen address already in use
// is logged once and counted as listen_failures, and the logger records on:
// rows keep coming, and its poll loop keeps syncing them (sync_batches
// grows; the CSVs have no timer of their own).
func TestMetricsPortTakenCarriesOn(t *testing.T) {
	t.Parallel()
	held := testutil.TakenAddr(t)
	p := start(t, opts{args: []string{"--metrics-listen", held, "--fsync-interval", "200ms"}})
	p.waitForRows(0, 10, 20*time.Second)
	counter := func(name string) (uint64, bool) {
		d, ok := rawStatus(p.socketPath())
		if !ok {
			return 0, false
		}
		return d.counter(name)
	}
	if n, ok := counter("listen_failures"); !ok || n != 1 {
		t.Errorf("listen_failures %d (reported %v), want 1", n, ok)
	}
	syncs, _ := counter("sync_batches")
	rows := rowCount(p.csvFile(0))
	p.waitFor("more rows and sync rounds", 20*time.Second, func() bool {
		n, _ := counter("sync_batches")
		return rowCount(p.csvFile(0)) >= rows+10 && n > syncs
	})
	p.stop()
	if n := strings.Count(p.stderr.String(), "cannot listen"); n != 1 {
		t.Errorf("%d lines about the taken port, want 1:\n%s", n, p.stderr)
	}
	if !regexp.MustCompile(`final status.* listen_failures=1 `).MatchString(p.stderr.String()) {
		t.Errorf("the final status line does not count the taken port:\n%s", p.stderr)
	}
}

// TestRequestStormKeepsCadence: 200 status requests a second (and a scrape
// a second) on the control socket leave the CSV cadence intact; every
// answer is a whole, valid status document (the server reuses its answer
// buffers); silent clients are dropped while the storm and the sampling go
// on.
func TestRequestStormKeepsCadence(t *testing.T) {
	// Not parallel: it measures the cadence, which the other e2e tests
	// running at the same time on a small machine would disturb.
	p := start(t, opts{args: []string{"--metrics-listen", "127.0.0.1:0"}})
	addr := p.metricsAddr()
	sock := p.socketPath()
	p.waitForRows(0, 6, 10*time.Second)
	var storming atomic.Bool
	var ok, failed, corrupt atomic.Uint64
	var firstCorrupt atomic.Pointer[string]
	var wg sync.WaitGroup
	stop := make(chan struct{})
	// every runs fn every period, with whether the storm is on, until stop.
	every := func(period time.Duration, fn func(storming bool)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tk := time.NewTicker(period)
			defer tk.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tk.C:
				}
				fn(storming.Load())
			}
		}()
	}
	for range 4 {
		every(20*time.Millisecond, func(on bool) { // 4 x 50/s = 200/s
			if !on {
				return
			}
			switch b, res := askStatus(sock); res {
			case answered:
				ok.Add(1)
			case refused:
				failed.Add(1)
			case malformed:
				corrupt.Add(1)
				s := string(b)
				firstCorrupt.CompareAndSwap(nil, &s)
			}
		})
	}
	scraped := false
	every(100*time.Millisecond, func(on bool) { // and one scrape in each storm second
		if !on || scraped {
			scraped = on
			return
		}
		scraped = true
		c := http.Client{Timeout: 2 * time.Second}
		if r, err := c.Get("http://" + addr + "/metrics"); err == nil {
			io.Copy(io.Discard, r.Body)
			r.Body.Close()
		}
	})
	// First 3 s: silent clients, more than the connection limit, hold every
	// connection while the storm goes on; the server must drop them (2 s
	// read timeout) and answer the storm again, and the logger keep its
	// cadence meanwhile.
	storming.Store(true)
	silentStart := time.Now()
	for range 20 {
		c, err := net.Dial("unix", sock)
		if err == nil {
			defer c.Close()
		}
	}
	time.Sleep(time.Until(silentStart.Add(2500 * time.Millisecond)))
	okBefore := ok.Load()
	time.Sleep(time.Until(silentStart.Add(3 * time.Second)))
	silentEnd := time.Now()
	afterSilent := ok.Load() - okBefore
	// Then quiet and storm seconds alternate for 20 s: the cadence the
	// machine gives the logger without the storm, to compare with, is
	// measured under the same load from the other tests and programs on the
	// machine (it changes from one 10 s to the next; alternate seconds see
	// it alike).
	const slices = 20
	bounds := make([]time.Time, slices+1)
	bounds[0] = time.Now()
	for k := range slices {
		storming.Store(k%2 == 1)
		time.Sleep(time.Until(bounds[0].Add(time.Duration(k+1) * time.Second)))
		bounds[k+1] = time.Now()
	}
	storming.Store(false)
	close(stop)
	wg.Wait()
	p.stop()
	t.Logf("storm: %d answered, %d busy or failed, %d malformed; %d answered in the last 0.5 s of the silent clients' 3 s", ok.Load(), failed.Load(), corrupt.Load(), afterSilent)
	if n := corrupt.Load(); n > 0 {
		t.Errorf("%d status answers were not one valid status document; the first:\n%s", n, *firstCorrupt.Load())
	}
	// 2600 sent in the 13 storm seconds.
	if ok.Load() < 500 {
		t.Errorf("only %d status requests answered in 13 s", ok.Load())
	}
	if afterSilent == 0 {
		t.Errorf("no status request answered 2.5 s after 20 silent clients connected: they were not dropped")
	}
	tb := readCSV(t, p.csvFile(0))
	perSlice := make([]int, slices)
	var silentSecs [3]int
	for _, row := range tb.rows {
		ts := parseTime(t, row[0])
		for k := range slices {
			if !ts.Before(bounds[k]) && ts.Before(bounds[k+1]) {
				perSlice[k]++
			}
		}
		if !ts.Before(silentStart) && ts.Before(silentEnd) {
			silentSecs[min(2, int(ts.Sub(silentStart)/time.Second))]++
		}
	}
	total, before := 0, 0
	for k, n := range perSlice {
		if k%2 == 1 {
			total += n
		} else {
			before += n
		}
	}
	t.Logf("rows: %v in the storm with the silent clients, %d in the 10 quiet seconds, %d in the 10 storm seconds, per second (quiet first) %v", silentSecs, before, total, perSlice)
	// 10 rows a second. A loaded machine (make test runs other packages'
	// tests meanwhile) skips late ticks now and then, storm or not: the
	// storm must not cost rows beyond what the quiet seconds lost, and never
	// a run of ticks.
	for s, n := range silentSecs {
		if n < 5 {
			t.Errorf("GPU 0 wrote %d rows in second %d of the storm with silent clients, want 10", n, s)
		}
	}
	for k := 1; k < slices; k += 2 {
		if perSlice[k] < 5 {
			t.Errorf("GPU 0 wrote %d rows in storm second %d, want 10", perSlice[k], k/2)
		}
	}
	if want := min(95, before-5); total < want {
		t.Errorf("GPU 0 wrote %d rows in the 10 storm seconds, %d in the 10 quiet ones between them; want at least %d", total, before, want)
	}
}

// What one storm request got back.
type answer int

const (
	refused   answer = iota // no whole answer (busy, or no answer before the deadline)
	answered                // a whole, valid status document
	malformed               // a whole answer that is not valid JSON or not a status document
)

// statusRequest sends one status request to the control socket sock, with
// a second to connect and two to answer, and returns the whole answer.
func statusRequest(sock string) ([]byte, error) {
	c, err := net.DialTimeout("unix", sock, time.Second)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte("status\n")); err != nil {
		return nil, err
	}
	return io.ReadAll(c)
}

// askStatus sends one raw status request and classifies the answer. It
// checks the answer with json.Valid, not by decoding it: the request storm
// sends 200 a second from this (race-enabled) test binary on the logger's
// machine, and decoding each one cost enough CPU to starve the logger under
// test on a loaded machine. rawStatus decodes.
func askStatus(sock string) ([]byte, answer) {
	b, err := statusRequest(sock)
	switch {
	case err != nil || len(b) == 0:
		return nil, refused
	case !json.Valid(b) || !bytes.HasSuffix(b, []byte("}\n")):
		return b, malformed
	case bytes.HasPrefix(b, []byte(`{"schema_version":`+strconv.Itoa(live.SchemaVersion)+`,`)):
		return nil, answered
	case bytes.HasPrefix(b, []byte(`{"error":"busy`)):
		return nil, refused
	}
	return b, malformed
}

// rawStatus asks the socket directly, without running the status command.
func rawStatus(sock string) (statusDoc, bool) {
	var d statusDoc
	b, err := statusRequest(sock)
	if err != nil || !bytes.HasPrefix(b, []byte(`{"schema_version":`+strconv.Itoa(live.SchemaVersion))) {
		return d, false
	}
	return d, json.Unmarshal(b, &d) == nil
}
