package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// callStat is one NVML function's line of the simulated driver's count
// file: calls, and with a cost profile the wall and CPU time inside them (ns).
type callStat struct{ n, wall, cpu int64 }

// nextCalls waits (at most 5 s) for the simulated driver's next rewrite of
// its count file at path (it rewrites it every second) and reads it, so that
// counts read at two rewrites cover whole seconds.
func nextCalls(path string) map[string]callStat {
	st, _ := os.Stat(path)
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
		if st2, err := os.Stat(path); err == nil && (st == nil || !st2.ModTime().Equal(st.ModTime())) {
			break
		}
	}
	return readCalls(path)
}

// readCalls reads the simulated driver's count file: a line per NVML
// function, "name count [wall_ns cpu_ns]".
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

// sumDevice adds up the calls on a device (nvmlDevice*), leaving out the
// handle look-ups made once at start.
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
	// snap reads the count file at its next rewrite and the rows at once.
	snap := func() (map[string]int64, int) {
		return counts(nextCalls(calls)), countRows(dir)
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
