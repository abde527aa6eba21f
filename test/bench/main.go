// Command gtbench measures the real gpu-telemetry binary on the simulated
// driver and prints `make bench`'s table: CPU per GPU-sample, peak RSS, NVML
// calls per GPU-sample, cadence, and the latency from an Xid to its crash
// snapshot. It merges in the Go benchmarks' results (go test -bench output).
//
//	gtbench -bin build/gpu-telemetry -sim build/sim -scenario simnvml/scenarios/healthy-8gpu.scn [-gobench file]
package main

import (
	"bufio"
	"encoding/csv"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

func main() { os.Exit(run()) }

type opts struct {
	bin, sim, scenario, gobench, dir string
	seconds, warmup                  int
	interval                         time.Duration
	xids                             int
}

func run() int {
	var o opts
	flag.StringVar(&o.bin, "bin", "build/gpu-telemetry", "gpu-telemetry binary")
	flag.StringVar(&o.sim, "sim", "build/sim", "directory holding the simulated libnvidia-ml.so.1")
	flag.StringVar(&o.scenario, "scenario", "test/simnvml/scenarios/healthy-8gpu.scn", "scenario for the steady-state run")
	flag.StringVar(&o.gobench, "gobench", "", "go test -bench output to include")
	flag.StringVar(&o.dir, "dir", "", "directory for the logger's files (default: a temp dir under /var/tmp, a real disk)")
	flag.IntVar(&o.seconds, "seconds", 60, "measured seconds of the steady-state run")
	flag.IntVar(&o.warmup, "warmup", 5, "seconds before measuring")
	flag.DurationVar(&o.interval, "interval", 100*time.Millisecond, "poll interval")
	flag.IntVar(&o.xids, "xids", 10, "Xids for the latency run")
	flag.Parse()

	var rows [][3]string // name, value, note
	if o.gobench != "" {
		rows = append(rows, goBench(o.gobench)...)
	}
	steady, err := steadyRun(o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gtbench: steady-state run:", err)
		return 1
	}
	rows = append(rows, steady...)
	atopR, err := atopRows(o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gtbench: --atop call-count runs:", err)
		return 1
	}
	rows = append(rows, atopR...)
	// The same on tmpfs: the logger's own cost without the file system's
	// (ext4 write(2) and the periodic fdatasync are a large part of it).
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() && o.dir == "" {
		t := o
		t.dir, t.seconds = "/dev/shm", max(o.seconds/2, 10)
		if r, err := steadyRun(t); err == nil {
			rows = append(rows, [3]string{"... the same with the CSVs on tmpfs", r[0][1], "no disk: the logger's own cost (" + r[0][2][strings.Index(r[0][2], ";")+2:] + ")"})
		}
	}
	lat, err := xidRun(o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gtbench: Xid latency run:", err)
		return 1
	}
	rows = append(rows, lat...)

	host, _ := os.Hostname()
	fmt.Printf("\ngpu-telemetry benchmarks, %s, %s, %d CPUs, %s, %s\n\n", time.Now().Format("2006-01-02"), host, runtime.NumCPU(), cpuModel(), runtime.Version())
	fmt.Println("| measure | value | target / note |")
	fmt.Println("|---|---|---|")
	for _, r := range rows {
		fmt.Printf("| %s | %s | %s |\n", r[0], r[1], r[2])
	}
	return 0
}

func cpuModel() string {
	b, _ := os.ReadFile("/proc/cpuinfo")
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}

// goBench turns go test -bench lines into table rows.
func goBench(path string) [][3]string {
	f, err := os.Open(path)
	if err != nil {
		return [][3]string{{"go benchmarks", "missing", err.Error()}}
	}
	defer f.Close()
	notes := map[string]string{
		"BenchmarkSampleSimulatedGPU": "read one GPU through the simulated driver: one cgo call",
		"BenchmarkSampleFake":         "the sampler's own cost over a fake device (Go executor)",
		"BenchmarkObserve":            "all anomaly detectors on one sample",
		"BenchmarkAppendRow":          "format one CSV row",
		"BenchmarkWriteRow":           "format, write(2) and keep one row",
		"BenchmarkCrashStage1":        "render and atomically write a crash snapshot's first version",
		"BenchmarkCrashRender":        "render a crash snapshot (no disk)",
		"BenchmarkCrashSuppressed":    "a crash request inside the cooldown (an Xid flood)",
	}
	var out [][3]string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 4 || !strings.HasPrefix(fs[0], "Benchmark") {
			continue
		}
		name := fs[0]
		if i := strings.LastIndexByte(name, '-'); i > 0 {
			name = name[:i]
		}
		var parts []string
		for i := 2; i+1 < len(fs); i += 2 {
			parts = append(parts, fs[i]+" "+fs[i+1])
		}
		out = append(out, [3]string{name, strings.Join(parts, ", "), notes[name]})
	}
	return out
}

// taskCPU sums the CPU time of every thread of pid (schedstat: exact, in ns).
func taskCPU(pid int) time.Duration {
	var total int64
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue
		}
		if f := strings.Fields(string(b)); len(f) > 0 {
			n, _ := strconv.ParseInt(f[0], 10, 64)
			total += n
		}
	}
	return time.Duration(total)
}

func peakRSS(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "?"
}

func readCalls(path string) map[string]int64 {
	out := map[string]int64{}
	b, err := os.ReadFile(path)
	if err != nil {
		return out
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) == 2 {
			n, _ := strconv.ParseInt(f[1], 10, 64)
			out[f[0]] = n
		}
	}
	return out
}

func sumDevice(m map[string]int64) int64 {
	var n int64
	for k, v := range m {
		if strings.HasPrefix(k, "nvmlDevice") && !strings.HasPrefix(k, "nvmlDeviceGetHandle") {
			n += v
		}
	}
	return n
}

func logDir(o opts, name string) (string, func(), error) {
	base := o.dir
	if base == "" {
		base = "/var/tmp"
	}
	d, err := os.MkdirTemp(base, "gtbench-"+name+"-")
	return d, func() { os.RemoveAll(d) }, err
}

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

// steadyRun runs the logger on the scenario and measures the window after
// the warm-up.
func steadyRun(o opts) ([][3]string, error) {
	dir, clean, err := logDir(o, "steady")
	if err != nil {
		return nil, err
	}
	defer clean()
	// No call counting here: the simulated driver's counting thread would
	// be billed to the logger. Calls are counted in a run of their own.
	cmd, err := start(o, dir, []string{"SIMNVML_SCENARIO=" + o.scenario})
	if err != nil {
		return nil, err
	}
	pid := cmd.Process.Pid
	time.Sleep(time.Duration(o.warmup) * time.Second)
	t0, c0, rows0 := time.Now(), taskCPU(pid), countRows(dir)
	time.Sleep(time.Duration(o.seconds) * time.Second)
	t1, c1, rows1 := time.Now(), taskCPU(pid), countRows(dir)
	rss := peakRSS(pid)
	cmd.Process.Signal(syscall.SIGTERM)
	cmd.Wait()

	samples := rows1 - rows0
	if samples <= 0 {
		return nil, fmt.Errorf("no rows written (see %s/stderr.log)", dir)
	}
	cpu := c1 - c0
	perSample := cpu / time.Duration(samples)
	perCall := 0.0
	if o.dir != "/dev/shm" {
		if perCall, err = callsPerSample(o); err != nil {
			return nil, err
		}
	}
	gpus := len(csvFiles(dir))
	p50, p99, pmax, mean, n, err := cadence(dir, o.interval)
	if err != nil {
		return nil, err
	}
	return [][3]string{
		{"whole process: CPU per GPU-sample", fmt.Sprintf("%.1f us", float64(perSample)/1e3),
			fmt.Sprintf("target <= 40 us; %d GPUs at %v for %.0f s: %.1f ms CPU for %d rows", gpus, o.interval, t1.Sub(t0).Seconds(), float64(cpu)/1e6, samples)},
		{"whole process: CPU per tick", fmt.Sprintf("%.0f us", float64(cpu)/1e3/(t1.Sub(t0).Seconds()/o.interval.Seconds())), "all GPUs of one tick together"},
		{"whole process: peak RSS", rss, "target <= 30 MB"},
		{"NVML calls per GPU-sample", fmt.Sprintf("%.2f", perCall), "target < 17 (the seed, 2 fans); counted by the simulated driver"},
		{"cadence: period deviation p50 / p99 / max", fmt.Sprintf("%.1f / %.1f / %.1f ms", p50, p99, pmax),
			fmt.Sprintf("target p99 <= 3 ms; %d periods from row timestamps (ms resolution)", n)},
		{"cadence: mean period (drift)", fmt.Sprintf("%.4f ms (%+.4f ms)", mean, mean-float64(o.interval)/1e6), "no drift: ticks at start + k x interval"},
	}, nil
}

// callsPerSample runs the logger with the simulated driver counting calls,
// and divides the device calls made between two refreshes of the count file
// by the rows written in between.
func callsPerSample(o opts) (float64, error) {
	calls, rows, err := callCounts(o, 20*time.Second)
	if err != nil {
		return 0, err
	}
	return float64(sumDevice(calls)) / float64(rows), nil
}

// callCounts runs the logger (with args) with the simulated driver counting
// calls, and returns the calls per function made during window (between two
// refreshes of the count file) and the rows written in between.
func callCounts(o opts, window time.Duration, args ...string) (map[string]int64, int, error) {
	dir, clean, err := logDir(o, "calls")
	if err != nil {
		return nil, 0, err
	}
	defer clean()
	calls := filepath.Join(dir, "calls.txt")
	cmd, err := start(o, dir, []string{"SIMNVML_SCENARIO=" + o.scenario, "SIMNVML_CALLS=" + calls}, args...)
	if err != nil {
		return nil, 0, err
	}
	defer func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() }()
	// snap waits for the next rewrite of the count file, then reads it and
	// the rows at once (the sim rewrites it every second).
	snap := func() (map[string]int64, int) {
		st, _ := os.Stat(calls)
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			time.Sleep(2 * time.Millisecond)
			if st2, err := os.Stat(calls); err == nil && (st == nil || !st2.ModTime().Equal(st.ModTime())) {
				return readCalls(calls), countRows(dir)
			}
		}
		return readCalls(calls), countRows(dir)
	}
	time.Sleep(time.Duration(o.warmup) * time.Second)
	c0, r0 := snap()
	time.Sleep(window)
	c1, r1 := snap()
	if r1 <= r0 {
		return nil, 0, fmt.Errorf("no rows in the call-count run")
	}
	for k, v := range c0 {
		c1[k] -= v
	}
	return c1, r1 - r0, nil
}

func csvFiles(dir string) []string {
	m, _ := filepath.Glob(filepath.Join(dir, "gpu*-deep-*.csv"))
	return m
}

func countRows(dir string) int {
	n := 0
	for _, f := range csvFiles(dir) {
		b, _ := os.ReadFile(f)
		n += max(strings.Count(string(b), "\n")-1, 0)
	}
	return n
}

// cadence computes the deviation of every row-to-row period from the
// interval, over all GPUs' rows, and the mean period.
func cadence(dir string, iv time.Duration) (p50, p99, pmax, mean float64, n int, err error) {
	var dev []float64
	var sum float64
	for _, f := range csvFiles(dir) {
		fh, err := os.Open(f)
		if err != nil {
			return 0, 0, 0, 0, 0, err
		}
		r := csv.NewReader(fh)
		var prev time.Time
		first := true
		for {
			rec, err := r.Read()
			if err == io.EOF {
				break
			}
			if err != nil {
				fh.Close()
				return 0, 0, 0, 0, 0, fmt.Errorf("%s: %w", f, err)
			}
			if first {
				first = false
				continue
			}
			t, err := time.Parse("2006-01-02T15:04:05.000Z07:00", rec[0])
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
		return 0, 0, 0, 0, 0, fmt.Errorf("no periods")
	}
	sort.Float64s(dev)
	q := func(p float64) float64 { return dev[min(int(p*float64(len(dev))), len(dev)-1)] }
	return q(0.5), q(0.99), dev[len(dev)-1], sum / float64(len(dev)), len(dev), nil
}

// xidRun measures the time from an Xid (the simulated driver's kernel-log
// record of it carries its CLOCK_MONOTONIC time) to the crash snapshot file
// appearing (stage 1: header and rows) and being complete (stage 2, with the
// diagnostics, which are stubbed so the figure is the logger's own).
func xidRun(o opts) ([][3]string, error) {
	dir, clean, err := logDir(o, "xid")
	if err != nil {
		return nil, err
	}
	defer clean()
	stubs := filepath.Join(dir, "stubs")
	os.MkdirAll(stubs, 0o755)
	for _, c := range []string{"dmesg", "lspci", "setpci", "nvidia-smi", "free", "uptime"} {
		os.WriteFile(filepath.Join(stubs, c), []byte("#!/bin/sh\necho stub "+c+"\n"), 0o755)
	}
	var scn strings.Builder
	scn.WriteString("gpus 2\n")
	for i := range o.xids {
		fmt.Fprintf(&scn, "at %d gpu %d xid 62\n", 3+i, i%2)
	}
	scnPath := filepath.Join(dir, "xid.scn")
	os.WriteFile(scnPath, []byte(scn.String()), 0o644)
	kmsg := filepath.Join(dir, "kmsg")
	os.WriteFile(kmsg, nil, 0o644)
	crashes := filepath.Join(dir, "crashes")
	os.MkdirAll(crashes, 0o755)

	in, err := unix.InotifyInit1(unix.IN_CLOEXEC)
	if err != nil {
		return nil, err
	}
	defer unix.Close(in)
	if _, err := unix.InotifyAddWatch(in, crashes, unix.IN_CREATE|unix.IN_MOVED_TO); err != nil {
		return nil, err
	}
	type seen struct{ first, last time.Duration }
	files := map[string]*seen{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 64<<10)
		for {
			n, err := unix.Read(in, buf)
			if err != nil || n <= 0 {
				return
			}
			now := monotonic()
			for off := 0; off+unix.SizeofInotifyEvent <= n; {
				ev := (*unix.InotifyEvent)(unsafePointer(&buf[off]))
				name := strings.TrimRight(string(buf[off+unix.SizeofInotifyEvent:off+unix.SizeofInotifyEvent+int(ev.Len)]), "\x00")
				off += unix.SizeofInotifyEvent + int(ev.Len)
				if !strings.HasPrefix(name, "crash-") || strings.Contains(name, "+") {
					continue
				}
				if s := files[name]; s == nil {
					files[name] = &seen{first: now, last: now}
				} else {
					s.last = now
				}
			}
		}
	}()
	cmd, err := start(o, dir, []string{"SIMNVML_SCENARIO=" + scnPath, "SIMNVML_KMSG=" + kmsg, "PATH=" + stubs + ":" + os.Getenv("PATH")},
		"--crash-cooldown", "1ms", "--follow-ups", "1h")
	if err != nil {
		return nil, err
	}
	time.Sleep(time.Duration(3+o.xids+2) * time.Second)
	cmd.Process.Signal(syscall.SIGTERM)
	cmd.Wait()
	unix.Close(in)

	// Xid times from the kernel-log records, in order.
	var xidAt []time.Duration
	b, _ := os.ReadFile(kmsg)
	for _, l := range strings.Split(string(b), "\n") {
		if !strings.Contains(l, "Xid") {
			continue
		}
		if f := strings.SplitN(l, ",", 4); len(f) == 4 {
			us, _ := strconv.ParseInt(f[2], 10, 64)
			xidAt = append(xidAt, time.Duration(us)*time.Microsecond)
		}
	}
	var snaps []*seen
	for _, s := range files {
		snaps = append(snaps, s)
	}
	sort.Slice(snaps, func(i, j int) bool { return snaps[i].first < snaps[j].first })
	if len(snaps) == 0 || len(xidAt) == 0 {
		return nil, fmt.Errorf("no snapshots (%d) or Xids (%d) seen", len(snaps), len(xidAt))
	}
	var appear, complete []float64
	for i := 0; i < len(snaps) && i < len(xidAt); i++ {
		appear = append(appear, float64(snaps[i].first-xidAt[i])/1e6)
		complete = append(complete, float64(snaps[i].last-xidAt[i])/1e6)
	}
	stat := func(v []float64) string {
		sort.Float64s(v)
		return fmt.Sprintf("%.1f / %.1f ms", v[len(v)/2], v[len(v)-1])
	}
	return [][3]string{
		{"Xid to crash snapshot file (median / max)", stat(appear), fmt.Sprintf("target <= 50 ms; %d Xids; stage 1: header and last 50 rows", len(appear))},
		{"Xid to complete snapshot (median / max)", stat(complete), "stage 2 with the diagnostics (commands stubbed)"},
	}, nil
}

func monotonic() time.Duration {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return time.Duration(ts.Nano())
}
