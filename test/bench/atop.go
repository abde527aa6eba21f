package main

import (
	"fmt"
	"strings"
	"time"
)

// isProcessCall reports whether an NVML function belongs to the slow tier's
// once-a-second process reads (made with or without --atop).
func isProcessCall(fn string) bool {
	return strings.Contains(fn, "RunningProcesses") || strings.Contains(fn, "ProcessUtilization")
}

// atopRows shows that --atop adds no NVML call per GPU-sample: two
// call-counting runs of the same scenario, without and with --atop (run
// side by side), compared per GPU-sample, with the process reads (made in
// both) shown apart.
func atopRows(o opts) ([][3]string, error) {
	window := min(20*time.Second, time.Duration(o.seconds)*time.Second)
	type result struct {
		calls map[string]int64
		rows  int
		err   error
	}
	runs := make(chan result, 1)
	go func() {
		c, r, err := callCounts(o, window, "--atop")
		runs <- result{c, r, err}
	}()
	base, baseRows, err := callCounts(o, window)
	with := <-runs
	if err == nil {
		err = with.err
	}
	if err != nil {
		return nil, err
	}
	per := func(calls map[string]int64, rows int, procs bool) float64 {
		var n int64
		for fn, v := range calls {
			if strings.HasPrefix(fn, "nvmlDevice") && !strings.HasPrefix(fn, "nvmlDeviceGetHandle") && isProcessCall(fn) == procs {
				n += v
			}
		}
		return float64(n) / float64(rows)
	}
	gpuBase, gpuWith := per(base, baseRows, false), per(with.calls, with.rows, false)
	procBase, procWith := per(base, baseRows, true), per(with.calls, with.rows, true)
	return [][3]string{
		{"--atop: NVML calls per GPU-sample", fmt.Sprintf("%.2f (without --atop: %.2f)", gpuWith+procWith, gpuBase+procBase),
			fmt.Sprintf("added by --atop: %+.2f per GPU-sample (target 0: atop's figures come from the rows); of these, process reads once a second: %.2f (without: %.2f); %v per run",
				(gpuWith+procWith)-(gpuBase+procBase), procWith, procBase, window)},
	}, nil
}
