// Command gtbench measures the real gpu-telemetry binary on the simulated
// driver and prints `make bench`'s table: CPU per GPU-sample next to a CPU
// floor measured at the same time (a bare Go program waking at the same
// interval: these machines change speed by up to 2x within a day, the ratio
// does not) and next to the write floor (the same program keeping the
// durability requirement: a row per GPU a tick, an fdatasync per file a
// second, on the logger's disk), split into the fdatasync thread (schedstat), the rows' write(2)
// in the kernel (a perf profile) and the rest, with the same run without
// fdatasync and on tmpfs interleaved with it round by round (cpu.go), peak
// RSS, NVML calls per
// GPU-sample, cadence, the same at 8 and 16 GPUs under the simulated driver's
// realistic and pessimistic NVML cost profiles (NVML time per GPU-sample and
// per tick, how late the last GPU of a tick is read, CPU outside the driver,
// driver calls per second), and the latency from an Xid (NVML event, and
// kernel log) to its crash snapshot. It merges in the Go benchmarks' results
// (go test -bench output).
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
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpu-telemetry/gpu-telemetry/sink"
)

func main() { os.Exit(run()) }

type opts struct {
	bin, sim, scenario, gobench, dir string
	seconds, warmup                  int
	rounds, roundSeconds             int // the CPU rounds (test/bench/cpu.go)
	interval                         time.Duration
	xids                             int
	costSeconds                      int    // per cost-profile run; 0 skips them
	kmsgXids                         bool   // also time Xids arriving through the kernel log
	floor                            string // the floor program
	before                           string // a second binary for the live runs' before/after (-before)
	viaKmsg                          bool   // this Xid run: kernel log only
}

func run() int {
	var o opts
	flag.StringVar(&o.bin, "bin", "build/gpu-telemetry", "gpu-telemetry binary")
	flag.StringVar(&o.sim, "sim", "build/sim", "directory holding the simulated libnvidia-ml.so.1")
	flag.StringVar(&o.scenario, "scenario", "test/simnvml/scenarios/healthy-8gpu.scn", "scenario for the steady-state run")
	flag.StringVar(&o.gobench, "gobench", "", "go test -bench output to include")
	flag.StringVar(&o.dir, "dir", "", "directory for the logger's files (default: a temp dir under /var/tmp, a real disk)")
	flag.IntVar(&o.seconds, "seconds", 60, "measured seconds of the long runs (the --atop and live interface runs take at most 20 and 30)")
	flag.IntVar(&o.rounds, "rounds", 3, "rounds of the CPU runs (CSVs on disk, without fdatasync, on tmpfs, interleaved)")
	flag.IntVar(&o.roundSeconds, "round-seconds", 15, "measured seconds of each CPU run")
	flag.IntVar(&o.warmup, "warmup", 5, "seconds before measuring")
	flag.DurationVar(&o.interval, "interval", 100*time.Millisecond, "poll interval")
	flag.IntVar(&o.xids, "xids", 10, "Xids for the latency run")
	flag.IntVar(&o.costSeconds, "cost-seconds", 20, "measured seconds of each cost-profile run (8 and 16 GPUs, realistic and pessimistic); 0 skips them")
	flag.BoolVar(&o.kmsgXids, "kmsg-xids", true, "also time Xids that arrive through the kernel log")
	flag.StringVar(&o.before, "before", "", "a second gpu-telemetry binary (the one before a change) run side by side with -bin in the live interface runs, same requests, same window")
	only := flag.String("only", "", "run only this part: xid (the Xid latency runs), live (the live interface rows), flood (the cadence under a wrong-password flood), steady (the 8-GPU CPU rounds) or calls (the NVML calls per GPU-sample: RTX PRO 6000, B200, H100)")
	flag.Parse()
	if *only == "xid" {
		return xidOnly(o)
	}

	var rows [][3]string // name, value, note
	if o.gobench != "" {
		rows = append(rows, goBench(o.gobench)...)
	}
	floor, err := buildFloor()
	if err != nil {
		fmt.Fprintln(os.Stderr, "gtbench: building the floor program:", err)
		return 1
	}
	defer os.RemoveAll(filepath.Dir(floor))
	o.floor = floor
	// -only live, calls or steady: one part's rows, alone.
	onlyParts := map[string]struct {
		what string
		run  func(opts) ([][3]string, error)
	}{
		"live":   {"live interface runs", liveRows},
		"flood":  {"wrong-password flood runs", floodRows},
		"calls":  {"call-count runs", callsOnly},
		"steady": {"CPU rounds", cpuRows},
	}
	if p, ok := onlyParts[*only]; ok {
		got, err := p.run(o)
		if err != nil {
			fmt.Fprintf(os.Stderr, "gtbench: %s: %v\n", p.what, err)
			return 1
		}
		printTable(got)
		return 0
	}
	// The runs of a full bench, in the order of the table: what an error
	// calls each, whether it runs, and the run.
	viaKmsg := func(o opts) ([][3]string, error) {
		o.viaKmsg = true
		return xidRun(o)
	}
	for _, r := range []struct {
		what string
		on   bool
		run  func(opts) ([][3]string, error)
	}{
		{"steady-state run", true, steadyRun},
		{"--atop call-count runs", true, atopRows},
		{"live interface runs", true, liveRows},
		{"wrong-password flood runs", true, floodRows},
		{"cost profile runs", o.costSeconds > 0, costRuns},
		{"Xid latency run", true, xidRun},
		{"Xid latency run (kernel log)", o.kmsgXids, viaKmsg},
	} {
		if !r.on {
			continue
		}
		got, err := r.run(o)
		if err != nil {
			fmt.Fprintf(os.Stderr, "gtbench: %s: %v\n", r.what, err)
			return 1
		}
		rows = append(rows, got...)
	}
	printTable(rows)
	return 0
}

// printTable prints the rows (name, value, note) as a markdown table under
// a line naming the machine.
func printTable(rows [][3]string) {
	host, _ := os.Hostname()
	fmt.Printf("\ngpu-telemetry benchmarks, %s, %s, %d CPUs, %s, %s\n\n", time.Now().Format("2006-01-02"), host, runtime.NumCPU(), cpuModel(), runtime.Version())
	fmt.Println("| measure | value | target / note |")
	fmt.Println("|---|---|---|")
	for _, r := range rows {
		fmt.Printf("| %s | %s | %s |\n", r[0], r[1], r[2])
	}
}

// xidOnly runs and prints only the Xid latency runs (-only xid).
func xidOnly(o opts) int {
	for _, viaKmsg := range []bool{false, true} {
		k := o
		k.viaKmsg = viaKmsg
		rows, err := xidRun(k)
		if err != nil {
			fmt.Fprintln(os.Stderr, "gtbench: Xid latency run:", err)
			return 1
		}
		for _, r := range rows {
			fmt.Printf("| %s | %s | %s |\n", r[0], r[1], r[2])
		}
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
		"BenchmarkSampleFake":         "the sampler's own cost over a fake device (batch.c calling back into fakenvml's Go; not comparable with figures before 2026-12-02)",
		"BenchmarkObserve":            "all anomaly detectors on one sample",
		"BenchmarkAppendRow":          "format one CSV row",
		"BenchmarkWriteRow":           "format, write(2) and keep one row",
		"BenchmarkCrashStage1":        "render and atomically write a crash snapshot's first version",
		"BenchmarkCrashRender":        "render a crash snapshot (no disk)",
		"BenchmarkCrashSuppressed":    "a crash request inside the cooldown (an Xid flood)",
		"BenchmarkPacerRecord":        "the NVML pacer's bookkeeping per GPU-sample",
		"BenchmarkStatusAnswer":       "build the status document of 8 GPUs and encode it (encoding/json)",
		"BenchmarkScrape":             "one /metrics scrape of 8 GPUs (promhttp over the collector)",
		"BenchmarkScrapeNVLink":       "the same with a B200's NVLink series added (18 links x 6 series per GPU, synthetic)",
		"BenchmarkReportWindow70s":    "gpu-telemetry report of a 70 s window of a gzipped day of 8 GPUs (the logger's archive; target under 0.5 s)",
		"BenchmarkReportWindow24h":    "gpu-telemetry report of the whole gzipped day of 8 GPUs (target under 200 MB)",
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

func peakRSS(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "?"
}

func readCalls(path string) map[string]callStat {
	out := map[string]callStat{}
	b, err := os.ReadFile(path)
	if err != nil {
		return out
	}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		var c callStat
		c.n, _ = strconv.ParseInt(f[1], 10, 64)
		if len(f) == 4 { // with a cost profile: wall and CPU ns inside
			c.wall, _ = strconv.ParseInt(f[2], 10, 64)
			c.cpu, _ = strconv.ParseInt(f[3], 10, 64)
		}
		out[f[0]] = c
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

// counts keeps only the call counts.
func counts(m map[string]callStat) map[string]int64 {
	out := make(map[string]int64, len(m))
	for k, v := range m {
		out[k] = v.n
	}
	return out
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

type callStat struct{ n, wall, cpu int64 }

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
		st, _ := os.Stat(calls)
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
			if st2, err := os.Stat(calls); err == nil && (st == nil || !st2.ModTime().Equal(st.ModTime())) {
				break
			}
		}
		return readCalls(calls)
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

// steadyRun is the 8-GPU steady state: the interleaved CPU rounds (the
// whole process, the kernel's share of the durability requirements, the
// rest, next to the floor), the rounds' cadence and peak RSS, and the NVML
// calls per GPU-sample.
func steadyRun(o opts) ([][3]string, error) {
	rows, err := cpuRows(o)
	if err != nil {
		return nil, err
	}
	perCall := 0.0
	if o.dir != "/dev/shm" {
		if perCall, err = callsPerSample(o); err != nil {
			return nil, err
		}
	}
	rows = append(rows, [3]string{"NVML calls per GPU-sample", fmt.Sprintf("%.2f", perCall), "target < 17 (the seed, 2 fans); counted by the simulated driver"})
	if o.dir == "/dev/shm" {
		return rows, nil
	}
	classRows, err := classCalls(o)
	return append(rows, classRows...), err
}

// cpuRows runs the interleaved CPU rounds (-only steady): their rows, then
// the rounds' cadence.
func cpuRows(o opts) ([][3]string, error) {
	c, err := runCPURounds(o)
	if err != nil {
		return nil, err
	}
	return append(c.rows(o), c.cadenceRows(o)...), nil
}

// callsOnly is -only calls: the NVML calls per GPU-sample of the scenario's
// GPUs, then of the same host with B200s and with H100s.
func callsOnly(o opts) ([][3]string, error) {
	per, err := callsPerSample(o)
	if err != nil {
		return nil, err
	}
	rows, err := classCalls(o)
	if err != nil {
		return nil, err
	}
	return append([][3]string{{"NVML calls per GPU-sample", fmt.Sprintf("%.2f", per), "counted by the simulated driver"}}, rows...), nil
}

// classCalls measures the NVML calls per GPU-sample of the same host with
// its GPUs as B200s (18 NVLink5 links: one more field call a second) and as
// H100s (18 NVLink4 links: the pre-Blackwell error counters, one call per
// link and counter, round-robin), with the health calls' shares.
func classCalls(o opts) ([][3]string, error) {
	var out [][3]string
	err := eachScenario(o, `(?m)^(gpus \d+)$`, []string{"b200", "h100"},
		func(class string) string { return "$1\ngpu all class " + class },
		func(class, scn string) error {
			oc := o
			oc.scenario = scn
			calls, rows, err := callCounts(oc, 12*time.Second)
			if err != nil {
				return err
			}
			per := func(fn string) float64 { return float64(calls[fn]) / float64(rows) }
			out = append(out, [3]string{"NVML calls per GPU-sample, the GPUs as " + class, fmt.Sprintf("%.2f", float64(sumDevice(calls))/float64(rows)),
				fmt.Sprintf("of them GetFieldValues %.3f, GetNvLinkErrorCounter %.3f, GetRowRemapperHistogram %.3f (docs/health.md: Cost)",
					per("nvmlDeviceGetFieldValues"), per("nvmlDeviceGetNvLinkErrorCounter"), per("nvmlDeviceGetRowRemapperHistogram"))})
			return nil
		})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// costRuns measures the logger under the simulated driver's NVML cost
// profiles at 8 and 16 GPUs.
func costRuns(o opts) ([][3]string, error) {
	var out [][3]string
	err := eachScenario(o, `(?m)^gpus \d+`, []int{8, 16},
		func(gpus int) string { return fmt.Sprintf("gpus %d", gpus) },
		func(gpus int, scn string) error {
			for _, prof := range []string{"realistic", "pessimistic"} {
				r, err := measure(o, spec{name: prof, scenario: scn, seconds: o.costSeconds, env: []string{"SIMNVML_COST=" + prof}, calls: true, writeFloor: gpus})
				if err != nil {
					return err
				}
				out = append(out, costRows(fmt.Sprintf("%s, %d GPUs", prof, gpus), r)...)
			}
			return nil
		})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// eachScenario writes a copy of o.scenario per variant into a temp dir, with
// what re matches replaced by edit(variant) (regexp.ReplaceAllString: $1 is
// the first group), and calls each with the variant and the copy's path,
// stopping at the first error; the dir is removed after.
func eachScenario[V any](o opts, re string, variants []V, edit func(V) string, each func(v V, scn string) error) error {
	base, err := os.ReadFile(o.scenario)
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "gtbench-scn-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	rx := regexp.MustCompile(re)
	for _, v := range variants {
		scn := filepath.Join(tmp, fmt.Sprintf("%v.scn", v))
		if err := os.WriteFile(scn, []byte(rx.ReplaceAllString(string(base), edit(v))), 0o644); err != nil {
			return err
		}
		if err := each(v, scn); err != nil {
			return err
		}
	}
	return nil
}

func costRows(label string, r *result) [][3]string {
	var n, wall, cpu int64
	for k, v := range r.calls {
		if strings.HasPrefix(k, "nvmlDevice") {
			n += v.n
			wall += v.wall
		}
		cpu += v.cpu
	}
	st := func(k string) string {
		if v, ok := r.status[k]; ok {
			return v
		}
		return "?"
	}
	outside := (float64(r.cpu) - float64(cpu)) / 1e3 / float64(r.rows)
	return [][3]string{
		{label + ": NVML time per GPU-sample / per tick / last GPU late",
			fmt.Sprintf("%.2f ms / %s / %s", float64(wall)/1e6/float64(r.rows), st("nvml_tick"), st("nvml_last_late")),
			"time inside the driver per row (the sim's count); per tick: first sample start to last sample end, median over the last second; last GPU: last sample end minus first"},
		{label + ": cadence mean / p99 / max deviation; skips",
			fmt.Sprintf("%.2f / %.1f / %.1f ms; %s busy skips, %s overruns", r.mean, r.p99, r.pmax, st("busy_skips"), st("tick_overruns")),
			fmt.Sprintf("%d rows in %.0f s; pacer level %s after %s stretches", r.rows, r.window.Seconds(), st("nvml_level"), st("nvml_stretches"))},
		{label + ": CPU per GPU-sample outside the driver; driver calls/s",
			fmt.Sprintf("%.1f us; %.0f calls/s", outside, float64(n)/r.window.Seconds()),
			fmt.Sprintf("process CPU minus the driver threads' CPU in the sim's waits (%.1f us per row); %s", float64(cpu)/1e3/float64(r.rows), r.floorNote())},
	}
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
				return counts(readCalls(calls)), countRows(dir)
			}
		}
		return counts(readCalls(calls)), countRows(dir)
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
		if o.viaKmsg { // the kernel log only: the logger follows the sim's kmsg file
			fmt.Fprintf(&scn, "at %d gpu %d xid 62 to kmsg\n", 3+i, i%2)
		} else {
			fmt.Fprintf(&scn, "at %d gpu %d xid 62\n", 3+i, i%2)
		}
	}
	scnPath := filepath.Join(dir, "xid.scn")
	os.WriteFile(scnPath, []byte(scn.String()), 0o644)
	kmsg := filepath.Join(dir, "kmsg")
	os.WriteFile(kmsg, nil, 0o644)
	crashes := filepath.Join(dir, "crashes")
	os.MkdirAll(crashes, 0o755)

	var kmsgArgs []string
	if o.viaKmsg {
		kmsgArgs = []string{"--kmsg", kmsg}
	}
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
		append([]string{"--crash-cooldown", "1ms", "--follow-ups", "1h"}, kmsgArgs...)...)
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
	via := "NVML event"
	if o.viaKmsg {
		via = "kernel log"
	}
	return [][3]string{
		{"Xid (" + via + ") to crash snapshot file (median / max)", stat(appear), fmt.Sprintf("target <= 50 ms; %d Xids; stage 1: header and last 50 rows", len(appear))},
		{"Xid (" + via + ") to complete snapshot (median / max)", stat(complete), "stage 2 with the diagnostics (commands stubbed)"},
	}, nil
}

func monotonic() time.Duration {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return time.Duration(ts.Nano())
}
