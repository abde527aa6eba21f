package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

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

// costRows are the table rows of one cost-profile run: time inside the
// driver, cadence and skips, and CPU outside the driver.
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
