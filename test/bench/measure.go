package main

import (
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/sink"
)

// taskCPU sums the CPU time of every thread of pid (schedstat: exact, in ns).
func taskCPU(pid int) time.Duration {
	total, _ := taskCPUOf(pid, "")
	return total
}

// fsyncThread is the name of the logger's fdatasync thread (sink/fsync.c),
// floorSyncThread the write floor's (test/bench/floor).
const (
	fsyncThread     = "gt-fsync"
	floorSyncThread = "floor-fsync"
)

// taskCPUOf returns the CPU time of every thread of pid, and of those named
// comm.
func taskCPUOf(pid int, comm string) (total, named time.Duration) {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*", pid))
	for _, t := range tasks {
		b, err := os.ReadFile(filepath.Join(t, "schedstat"))
		if err != nil {
			continue
		}
		f := strings.Fields(string(b))
		if len(f) == 0 {
			continue
		}
		n, _ := strconv.ParseInt(f[0], 10, 64)
		total += time.Duration(n)
		if c, _ := os.ReadFile(filepath.Join(t, "comm")); comm != "" && strings.TrimSpace(string(c)) == comm {
			named += time.Duration(n)
		}
	}
	return total, named
}

// peakRSS is pid's peak resident set (VmHWM), as /proc writes it.
func peakRSS(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "?"
}

// logDir makes a log directory for one run under o.dir (default /var/tmp,
// a real disk), and returns it with the function that removes it.
func logDir(o opts, name string) (string, func(), error) {
	base := o.dir
	if base == "" {
		base = "/var/tmp"
	}
	d, err := os.MkdirTemp(base, "gtbench-"+name+"-")
	return d, func() { os.RemoveAll(d) }, err
}

// start starts the logger on the simulated driver, logging into dir, with
// no kernel log and no control socket, plus extraEnv and args.
func start(o opts, dir string, extraEnv []string, args ...string) (*exec.Cmd, error) {
	cmd := exec.Command(o.bin, append([]string{"--interval", o.interval.String(), "--log-dir", dir,
		"--lock-file", filepath.Join(dir, "lock"), "--kmsg", "none", "--socket", "none"}, args...)...)
	cmd.Env = append(os.Environ(), "LD_LIBRARY_PATH="+o.sim)
	cmd.Env = append(cmd.Env, extraEnv...)
	stderr, err := os.Create(filepath.Join(dir, "stderr.log"))
	if err != nil {
		return nil, err
	}
	cmd.Stderr = stderr
	return cmd, cmd.Start()
}

// spec is one measured run of the logger.
type spec struct {
	name     string
	scenario string
	seconds  int
	dir      string   // base directory for the logs ("" = o.dir or /var/tmp)
	env      []string // SIMNVML_COST, ...
	args     []string
	calls    bool // the simulated driver counts calls (and time inside it)
	perf     bool // profile the logger with perf over the window
	// writeFloor: the write floor runs alongside too, keeping the whole
	// durability requirement for as many files as the logger has GPUs, in
	// the logger's directory (its file system): one write(2) per row a
	// tick, one fdatasync per file a second (test/bench/floor -rows).
	writeFloor int
	// during runs in the measured window (the load of the run, to
	// loopback only), told how long the window is; measure waits for it.
	during func(window time.Duration)
}

// result is what one run measured over its window (after the warm-up).
type result struct {
	gpus           int
	window         time.Duration
	cpu, floorCPU  time.Duration // the logger's and the floor program's, same window
	writeFloorCPU  time.Duration // the write floor (spec.writeFloor), same window
	writeSyncCPU   time.Duration // ... of which its fdatasync thread
	fsyncCPU       time.Duration // the logger's fdatasync thread, same window
	rows           int
	rss            string
	calls          map[string]callStat // deltas over the window
	status         map[string]string   // the status line at the end of the window
	p50, p99, pmax float64             // period deviation, ms
	devs           []float64           // every period's deviation, ms
	prof           *profile            // with spec.perf: the window's profile (nil: profErr says why)
	profErr        error
	mean           float64 // mean period, ms
	periods        int
	iv             time.Duration
}

func (r *result) perSample() float64 { return float64(r.cpu) / 1e3 / float64(r.rows) }
func (r *result) ticks() float64     { return r.window.Seconds() / r.iv.Seconds() }
func (r *result) floorTick() float64 {
	return float64(r.floorCPU) / 1e3 / r.ticks()
}

// floorNote sets a CPU figure per tick against the floor measured in the
// same window.
func (r *result) floorNote() string {
	s := fmt.Sprintf("%.0f us per tick = %.1f x the floor (a bare Go ticker: %.0f us per tick, measured alongside)", r.perTick(), r.ratio(), r.floorTick())
	if r.writeFloorCPU > 0 {
		s += fmt.Sprintf(" = %.2f x the write floor (one write(2) per row, one fdatasync per file a second: %.0f us per tick, measured alongside)", r.writeRatio(), r.writeFloorTick())
	}
	return s
}

// rowBytes is the length of a row of healthy-8gpu.scn (143 characters and
// the newline): what the write floor appends per file a tick.
const rowBytes = 144

// scenarioGPUs returns the GPU count a scenario declares (its "gpus N" line).
func scenarioGPUs(path string) int {
	b, _ := os.ReadFile(path)
	if m := regexp.MustCompile(`(?m)^gpus (\d+)`).FindSubmatch(b); m != nil {
		n, _ := strconv.Atoi(string(m[1]))
		return n
	}
	return 0
}

// buildFloor builds the floor program (test/bench/floor) into a temp dir.
func buildFloor() (string, error) {
	d, err := os.MkdirTemp("", "gtbench-floor-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(d, "floor")
	cmd := exec.Command("go", "build", "-o", bin, "./test/bench/floor")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	return bin, cmd.Run()
}

// measure runs the logger (and the floor next to it) and measures the
// window after the warm-up.
func measure(o opts, sp spec) (*result, error) {
	oo := o
	if sp.dir != "" {
		oo.dir = sp.dir
	}
	dir, clean, err := logDir(oo, sp.name)
	if err != nil {
		return nil, err
	}
	defer clean()
	env := append([]string{"SIMNVML_SCENARIO=" + sp.scenario}, sp.env...)
	calls := filepath.Join(dir, "calls.txt")
	if sp.calls {
		env = append(env, "SIMNVML_CALLS="+calls)
	}
	fl := exec.Command(o.floor, "-interval", o.interval.String())
	if err := fl.Start(); err != nil {
		return nil, err
	}
	defer func() { fl.Process.Kill(); fl.Wait() }()
	var wf *exec.Cmd
	if sp.writeFloor > 0 {
		rowsDir := filepath.Join(dir, "floor-rows")
		if err := os.Mkdir(rowsDir, 0o755); err != nil {
			return nil, err
		}
		wf = exec.Command(o.floor, "-interval", o.interval.String(), "-rows", rowsDir, "-files", strconv.Itoa(sp.writeFloor),
			"-row-bytes", strconv.Itoa(rowBytes), "-sync-interval", "1s")
		if err := wf.Start(); err != nil {
			return nil, err
		}
		defer func() { wf.Process.Kill(); wf.Wait() }()
	}
	wfCPU := func() (total, sync time.Duration) {
		if wf == nil {
			return 0, 0
		}
		return taskCPUOf(wf.Process.Pid, floorSyncThread)
	}
	cmd, err := start(o, dir, env, sp.args...)
	if err != nil {
		return nil, err
	}
	defer func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() }()
	pid := cmd.Process.Pid
	time.Sleep(time.Duration(o.warmup) * time.Second)
	// With call counting, the window starts and ends at a rewrite of the
	// count file (every second), so calls and rows cover the same time.
	sync := func() map[string]callStat {
		if !sp.calls {
			return nil
		}
		return nextCalls(calls)
	}
	k0 := sync()
	var profWait func() (*profile, error)
	if sp.perf {
		profWait = perfRecord(pid, time.Duration(sp.seconds)*time.Second, dir)
	}
	c0, s0 := taskCPUOf(pid, fsyncThread)
	w0, ws0 := wfCPU()
	t0, f0, rows0 := time.Now(), taskCPU(fl.Process.Pid), countRows(dir)
	load := make(chan struct{})
	go func() {
		defer close(load)
		if sp.during != nil {
			sp.during(time.Duration(sp.seconds) * time.Second)
		}
	}()
	time.Sleep(time.Duration(sp.seconds) * time.Second)
	<-load
	k1 := sync()
	c1, s1 := taskCPUOf(pid, fsyncThread)
	w1, ws1 := wfCPU()
	t1, f1, rows1 := time.Now(), taskCPU(fl.Process.Pid), countRows(dir)
	r := &result{window: t1.Sub(t0), cpu: c1 - c0, floorCPU: f1 - f0, writeFloorCPU: w1 - w0, writeSyncCPU: ws1 - ws0, fsyncCPU: s1 - s0, rows: rows1 - rows0, rss: peakRSS(pid), iv: o.interval}
	if profWait != nil {
		r.prof, r.profErr = profWait()
	}
	// The status line (SIGUSR1) has the pacer's figures and the skip counters.
	stderr := filepath.Join(dir, "stderr.log")
	before, _ := os.ReadFile(stderr)
	cmd.Process.Signal(syscall.SIGUSR1)
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if b, _ := os.ReadFile(stderr); len(b) > len(before) && strings.Contains(string(b[len(before):]), "msg=status") {
			r.status = statusFields(string(b[len(before):]))
			break
		}
	}
	if r.rows <= 0 {
		return nil, fmt.Errorf("%s: no rows written (see %s/stderr.log)", sp.name, dir)
	}
	if sp.calls {
		r.calls = map[string]callStat{}
		for k, v := range k1 {
			w := k0[k]
			r.calls[k] = callStat{v.n - w.n, v.wall - w.wall, v.cpu - w.cpu}
		}
	}
	r.gpus = len(csvFiles(dir))
	r.devs, r.mean, err = cadence(dir, o.interval)
	if err == nil {
		q := func(p float64) float64 { return r.devs[min(int(p*float64(len(r.devs))), len(r.devs)-1)] }
		r.p50, r.p99, r.pmax, r.periods = q(0.5), q(0.99), r.devs[len(r.devs)-1], len(r.devs)
	}
	return r, err
}

// statusFields parses the key=value pairs of the first status line in s.
func statusFields(s string) map[string]string {
	out := map[string]string{}
	for _, l := range strings.Split(s, "\n") {
		if !strings.Contains(l, "msg=status") {
			continue
		}
		for _, f := range strings.Fields(l) {
			if k, v, ok := strings.Cut(f, "="); ok {
				out[k] = v
			}
		}
		break
	}
	return out
}

// csvFiles lists the logger's CSV files in dir.
func csvFiles(dir string) []string {
	m, _ := filepath.Glob(filepath.Join(dir, "gpu*-deep-*.csv"))
	return m
}

// countRows counts the rows of every CSV file in dir.
func countRows(dir string) int {
	n := 0
	for _, f := range csvFiles(dir) {
		b, _ := os.ReadFile(f)
		n += max(strings.Count(string(b), "\n")-2, 0) // after the board line and the header
	}
	return n
}

// cadence computes the deviation of every row-to-row period from the
// interval, over all GPUs' rows (sorted), and the mean period.
func cadence(dir string, iv time.Duration) (dev []float64, mean float64, err error) {
	var sum float64
	for _, f := range csvFiles(dir) {
		fh, err := os.Open(f)
		if err != nil {
			return nil, 0, err
		}
		r := csv.NewReader(fh)
		r.Comment = '#' // the board line
		var prev time.Time
		first := true
		for {
			rec, err := r.Read()
			if err == io.EOF {
				break
			}
			if err != nil {
				fh.Close()
				return nil, 0, fmt.Errorf("%s: %w", f, err)
			}
			if first {
				first = false
				continue
			}
			t, err := time.Parse(sink.TimestampLayout, rec[0])
			if err != nil {
				continue
			}
			if !prev.IsZero() {
				d := float64(t.Sub(prev)) / 1e6
				sum += d
				dev = append(dev, math.Abs(d-float64(iv)/1e6))
			}
			prev = t
		}
		fh.Close()
	}
	if len(dev) == 0 {
		return nil, 0, fmt.Errorf("no periods")
	}
	sort.Float64s(dev)
	return dev, sum / float64(len(dev)), nil
}
