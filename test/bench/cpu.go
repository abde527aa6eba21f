package main

import (
	"fmt"
	"os"
	"slices"
	"strings"
)

// cpuVariant is one way of running the logger in the CPU rounds.
type cpuVariant struct {
	name  string // short, for the log directory
	label string // the table row
	note  string
	dir   string // base directory for the CSVs ("" = o.dir or /var/tmp, a real disk)
	args  []string
}

// cpuVariants are the runs that split the kernel's share of the durability
// requirements (one write(2) per row, one fdatasync per file per second)
// from the logger's: CSVs on disk as deployed, the same without fdatasync in
// the window, and the same on tmpfs (no disk, no journal).
func cpuVariants(o opts) []cpuVariant {
	v := []cpuVariant{
		{name: "disk", label: "whole process: CPU per GPU-sample, CSVs on disk"},
		{name: "nosync", label: "... the same with --fsync-interval 1h", args: []string{"--fsync-interval", "1h"},
			note: "no fdatasync in the window (the fdatasync thread sleeps); one write(2) per row kept"},
	}
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() && o.dir == "" {
		v = append(v, cpuVariant{name: "tmpfs", label: "... the same with the CSVs on tmpfs", dir: "/dev/shm",
			note: "write(2) to tmpfs (no journal, no disk); fdatasync a no-op"})
	}
	return v
}

// cpuRounds holds the interleaved runs: runs[v][r] is variant v in round r,
// each with the floor program measured alongside in its own window; prof is
// a perf profile of the disk variant in a window of its own.
type cpuRounds struct {
	variants []cpuVariant
	runs     [][]*result
	seconds  int
	prof     *profile
	profRun  *result
	profErr  error
}

// runCPURounds runs every variant o.rounds times, one after the other in an
// order that rotates each round (so that no variant always runs first or
// last in a round while the machine changes speed), then the disk variant
// once more under perf.
func runCPURounds(o opts) (*cpuRounds, error) {
	vs := cpuVariants(o)
	c := &cpuRounds{variants: vs, runs: make([][]*result, len(vs)), seconds: o.roundSeconds}
	gpus := scenarioGPUs(o.scenario)
	for r := range o.rounds {
		for k := range vs {
			i := (k + r) % len(vs)
			v := vs[i]
			res, err := measure(o, spec{name: v.name, scenario: o.scenario, seconds: o.roundSeconds, dir: v.dir, args: v.args, writeFloor: gpus})
			if err != nil {
				return nil, err
			}
			c.runs[i] = append(c.runs[i], res)
		}
	}
	c.profRun, c.profErr = measure(o, spec{name: "perf", scenario: o.scenario, seconds: o.roundSeconds, perf: true})
	if c.profErr == nil {
		c.prof, c.profErr = c.profRun.prof, c.profRun.profErr
	}
	return c, nil
}

// spread is the median, minimum and maximum of a figure over the rounds.
type spread struct{ med, lo, hi float64 }

func spreadOf(v []float64) spread {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s) == 0 {
		return spread{}
	}
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return spread{med, s[0], s[len(s)-1]}
}

// fmt prints the spread with the unit, as "12.3 us (11.0-14.1)".
func (s spread) fmt(prec int, unit string) string {
	return fmt.Sprintf("%.*f%s (%.*f-%.*f)", prec, s.med, unit, prec, s.lo, prec, s.hi)
}

// over maps every run to a figure and returns its spread.
func over(runs []*result, f func(*result) float64) spread {
	v := make([]float64, len(runs))
	for i, r := range runs {
		v[i] = f(r)
	}
	return spreadOf(v)
}

func (r *result) perTick() float64 { return float64(r.cpu) / 1e3 / r.ticks() }

// ratio is the logger's CPU per tick over the bare floor's, same window.
func (r *result) ratio() float64 { return r.perTick() / r.floorTick() }

// writeFloorTick is the write floor's CPU per tick (the whole durability
// requirement kept by a minimal Go program), same window.
func (r *result) writeFloorTick() float64 { return float64(r.writeFloorCPU) / 1e3 / r.ticks() }

// writeRatio is the logger's CPU per tick over the write floor's, same
// window: the figure to hold.
func (r *result) writeRatio() float64 { return r.perTick() / r.writeFloorTick() }

// writeFloorPerSample is the write floor's CPU per tick shared over the GPUs.
func (r *result) writeFloorPerSample() float64 { return r.writeFloorTick() / float64(max(r.gpus, 1)) }

// writeSyncPerSample is the write floor's fdatasync thread per GPU-sample.
func (r *result) writeSyncPerSample() float64 {
	return float64(r.writeSyncCPU) / 1e3 / r.ticks() / float64(max(r.gpus, 1))
}

// fsyncPerSample is the fdatasync thread's CPU per GPU-sample.
func (r *result) fsyncPerSample() float64 { return float64(r.fsyncCPU) / 1e3 / float64(r.rows) }

// floorPerSample is the floor's CPU per tick shared over the run's GPUs.
func (r *result) floorPerSample() float64 { return r.floorTick() / float64(max(r.gpus, 1)) }

// writePerRow is what the write floor spent more than the bare floor
// outside its fdatasync thread, per row: one write(2) of a row on the
// logger's file system, Go's system call wrapper included.
func (r *result) writePerRow() float64 {
	return float64(r.writeFloorCPU-r.writeSyncCPU-r.floorCPU) / 1e3 / r.ticks() / float64(max(r.gpus, 1))
}

// cpuTarget is the CPU per GPU-sample the logger must stay under (8 GPUs at
// 100 ms), outside the kernel's share of the durability requirements.
const cpuTarget = 40.0

// rows are the CPU table rows: the two floors, the whole process on disk
// (per tick against both floors) and its parts (the fdatasync thread from
// schedstat, the rows' write(2) from perf, the rest), what one write(2) per
// row costs the write floor, where the process's CPU goes, and the other
// variants with their difference to the disk run of the same round.
func (c *cpuRounds) rows(o opts) [][3]string {
	disk := c.runs[0]
	n := len(disk)
	win := fmt.Sprintf("median (min-max) of %d runs of %d s, interleaved with the variants below in rotating order, each next to its own floor", n, c.seconds)
	whole := over(disk, (*result).perSample)
	fsync := over(disk, (*result).fsyncPerSample)
	floorTick := over(disk, (*result).floorTick)
	floorSample := over(disk, (*result).floorPerSample)
	wfTick := over(disk, (*result).writeFloorTick)
	gpus := disk[0].gpus
	out := [][3]string{
		{"CPU floor: a bare Go program waking every " + o.interval.String(), fmt.Sprintf("%.0f us per tick (%.0f-%.0f) = %.1f us per GPU-sample at %d GPUs", floorTick.med, floorTick.lo, floorTick.hi, floorSample.med, gpus),
			"test/bench/floor, GOMAXPROCS=1 like the logger, measured alongside every run below: what any Go process pays on this machine to wake at this interval"},
		{"write floor: the same program keeping the durability requirement", fmt.Sprintf("%.0f us per tick (%.0f-%.0f) = %.1f us per GPU-sample", wfTick.med, wfTick.lo, wfTick.hi, over(disk, (*result).writeFloorPerSample).med),
			fmt.Sprintf("test/bench/floor -rows, measured alongside every run below in the logger's directory (same disk): one file per GPU, one write(2) of a %d-byte row per file a tick, one fdatasync per file a second on a thread of its own (%s: %s per GPU-sample); what any Go program keeping the logger's requirement pays here", rowBytes, floorSyncThread, over(disk, (*result).writeSyncPerSample).fmt(1, " us"))},
		{c.variants[0].label, whole.fmt(1, " us"),
			fmt.Sprintf("%d GPUs at %v; per tick %s the write floor (the figure to hold) and %s the bare floor; %s", gpus, o.interval, over(disk, (*result).writeRatio).fmt(2, " x"), over(disk, (*result).ratio).fmt(2, " x"), win)},
		{"... of which the fdatasync thread", fsync.fmt(1, " us"),
			fmt.Sprintf("the kernel's share of the durability bound (one fdatasync per CSV per second) on the thread %s (sink/fsync.c), from its own schedstat", fsyncThread)},
	}
	write, writeCell, writeNote := 0.0, "", ""
	if c.prof != nil {
		write = c.prof.frac(shareWrite) * whole.med
		writeCell = fmt.Sprintf("%.1f us", write)
		writeNote = fmt.Sprintf("perf: %.1f %% of the logger's CPU samples are in the rows' write(2) under sink.(*CSV).Write, kernel and Go's system call wrapper (%d samples at %d Hz in a %d s window of its own), times the whole process's median; the same profile puts %.1f %% on the fdatasync thread (= %.1f us; its schedstat says %.1f us)",
			100*c.prof.frac(shareWrite), c.prof.total, perfHz, c.seconds, 100*c.prof.frac(shareFsync), c.prof.frac(shareFsync)*whole.med, fsync.med)
	} else {
		writeNote = "absent: no perf profile (" + errText(c.profErr) + ")"
	}
	out = append(out, [3]string{"... of which the rows' write(2)", writeCell, "one write(2) per row (ext4: page cache, i_size and mtime in the journal); " + writeNote})
	rest := whole.med - fsync.med - write
	restNote := fmt.Sprintf("target <= %.0f us: %s; the whole process minus the fdatasync thread minus the rows' write(2): the logger's Go and C code, the simulated driver, the Go runtime and its wake-ups; the floor's %.1f us included, %.1f us above it", cpuTarget, met(rest <= cpuTarget), floorSample.med, rest-floorSample.med)
	if c.prof == nil {
		restNote = fmt.Sprintf("target <= %.0f us: %s; the whole process minus the fdatasync thread, the rows' write(2) included (no profile to take it out); the floor's %.1f us included", cpuTarget, met(rest <= cpuTarget), floorSample.med)
	}
	out = append(out, [3]string{"... the rest: the logger's own share", fmt.Sprintf("%.1f us", rest), restNote},
		[3]string{"one write(2) per row in the write floor", over(disk, (*result).writePerRow).fmt(1, " us"),
			"the write floor minus its fdatasync thread minus the bare floor, same windows, per row: what the write requirement costs a minimal Go program here, the Go runtime's reaction included (its sysmon thread, asleep in the bare floor, is woken by the first write of a tick and polls while the writes run; in the logger the tick's first cgo call wakes it anyway)"})
	if c.prof != nil {
		var parts []string
		for s := range numShares {
			parts = append(parts, fmt.Sprintf("%s %.0f %%", perfShares[s], 100*c.prof.frac(s)))
		}
		out = append(out, [3]string{"where the logger's CPU goes (perf)", strings.Join(parts, "; "),
			fmt.Sprintf("the disk run under perf record -e cpu-clock -g: %.1f us per GPU-sample in that window (perf's own cost included), %.2f x its floor", c.profRun.perSample(), c.profRun.ratio())})
	}
	for i, v := range c.variants[1:] {
		runs := c.runs[i+1]
		diff := make([]float64, 0, len(runs))
		for r := range runs {
			if r < len(disk) {
				diff = append(diff, disk[r].perSample()-runs[r].perSample())
			}
		}
		out = append(out, [3]string{v.label, over(runs, (*result).perSample).fmt(1, " us"),
			fmt.Sprintf("%s; per tick %s the write floor (which keeps its fdatasync) and %s the bare floor; the disk run of the same round minus this one: %s; a row's write(2) here (the write floor): %s", v.note, over(runs, (*result).writeRatio).fmt(2, " x"), over(runs, (*result).ratio).fmt(2, " x"), spreadOf(diff).fmt(1, " us"), over(runs, (*result).writePerRow).fmt(1, " us"))})
	}
	return out
}

func met(ok bool) string {
	if ok {
		return "met"
	}
	return "not met"
}

func errText(err error) string {
	if err == nil {
		return "no error"
	}
	return err.Error()
}

// cadenceRows pool the disk runs' row timestamps: period deviation, mean
// period, and the peak RSS.
func (c *cpuRounds) cadenceRows(o opts) [][3]string {
	var devs []float64
	var sum float64
	rss := ""
	var rssKB int64
	for _, r := range c.runs[0] {
		devs = append(devs, r.devs...)
		sum += r.mean * float64(r.periods)
		var kb int64
		if _, err := fmt.Sscanf(r.rss, "%d kB", &kb); err == nil && kb > rssKB {
			rssKB, rss = kb, r.rss
		}
	}
	if len(devs) == 0 {
		return nil
	}
	slices.Sort(devs)
	q := func(p float64) float64 { return devs[min(int(p*float64(len(devs))), len(devs)-1)] }
	mean := sum / float64(len(devs))
	return [][3]string{
		{"whole process: peak RSS", rss, "target <= 30 MB; the largest of the disk runs"},
		{"cadence: period deviation p50 / p99 / max", fmt.Sprintf("%.1f / %.1f / %.1f ms", q(0.5), q(0.99), devs[len(devs)-1]),
			fmt.Sprintf("target p99 <= 3 ms; %d periods from row timestamps (ms resolution) of the disk runs", len(devs))},
		{"cadence: mean period (drift)", fmt.Sprintf("%.4f ms (%+.4f ms)", mean, mean-float64(o.interval)/1e6), "no drift: ticks at start + k x interval"},
	}
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
	// The target: gpu-telemetry-deep.py, the Python logger we
	// ported, made 17 NVML calls per sample on a GPU with 2 fans (12 for its
	// scalar columns, a speed and a target per fan, one thermal-settings
	// call) for fewer columns than ours.
	rows = append(rows, [3]string{"NVML calls per GPU-sample", fmt.Sprintf("%.2f", perCall), "target < 17 (gpu-telemetry-deep.py, 2 fans); counted by the simulated driver"})
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
