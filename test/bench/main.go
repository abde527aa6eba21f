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
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"
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

// cpuModel is the CPU's model name from /proc/cpuinfo.
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
		"BenchmarkRecordHealth":       "a healthy sample's health bookkeeping (no change: nothing written, no new view)",
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
