package sampler

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ProbeEstimate is what a report means at the configured interval.
type ProbeEstimate struct {
	CallsPerSample, CallsPerSampleTop float64       // per GPU-sample: normal rate, pacer's top level
	CallsPerSecond                    float64       // all GPUs, normal rate: the logger's load on the driver and firmware
	SampleAlone                       time.Duration // NVML time of one GPU-sample, the slowest GPU alone
	Tick, TickTop                     time.Duration // NVML time per tick, all GPUs at once: normal rate, top level
}

// Estimate derives the expected cost per GPU-sample and per tick. A
// GPU-sample makes each kind PerSample times at its "alone" median. A tick
// reads every GPU at once: with no driver lock it lasts as long as the
// slowest GPU-sample plus the field batches of the others (the logger
// serializes GetFieldValues itself); with a lock held by every call it lasts
// as long as all GPU-samples one after another. How much the driver
// serializes (0..1) is read from the medians: together/alone is about 1
// without a lock and about the number of GPUs with one.
func (r ProbeReport) Estimate() ProbeEstimate {
	var e ProbeEstimate
	for _, k := range r.Kinds {
		if refused(k) {
			continue
		}
		e.CallsPerSample += k.PerSample
		e.CallsPerSampleTop += k.PerSampleTop
	}
	n := len(r.GPUs)
	if r.Opts.Interval > 0 {
		e.CallsPerSecond = e.CallsPerSample * float64(n) / r.Opts.Interval.Seconds()
	}
	if n == 0 {
		return e
	}
	ser := r.Serialization()
	tick := func(top bool) (alone, tick time.Duration) {
		var sum, worst, fields float64
		for i := range r.GPUs {
			a, f := r.sample(i, top)
			sum, worst, fields = sum+a, max(worst, a), max(fields, f)
		}
		return time.Duration(worst), time.Duration(ser*sum + (1-ser)*(worst+float64(n-1)*fields))
	}
	e.SampleAlone, e.Tick = tick(false)
	_, e.TickTop = tick(true)
	return e
}

// sample is the NVML time (ns) of one GPU-sample of GPU i alone, at the
// normal rate or the pacer's top level, and of its field batch.
func (r ProbeReport) sample(i int, top bool) (all, fields float64) {
	for _, k := range r.Kinds {
		if refused(k) {
			continue
		}
		t := k.PerSample * float64(k.Alone[i].P50)
		if top {
			t = k.PerSampleTop * float64(k.Alone[i].P50)
		}
		all += t
		if strings.HasPrefix(k.Name, FnFieldValues.String()) {
			fields = max(fields, t)
		}
	}
	return all, fields
}

// Serialization is how much the driver serializes calls across GPUs, 0
// (independent) to 1 (one call at a time), from the median over the call
// kinds of together/alone (the field batch excluded: the logger serializes it
// itself).
func (r ProbeReport) Serialization() float64 {
	n := len(r.GPUs)
	if n < 2 {
		return 0
	}
	var ratios []float64
	for _, k := range r.Kinds {
		if refused(k) || strings.HasPrefix(k.Name, FnFieldValues.String()) {
			continue
		}
		a, t := medianOf(k.Alone), medianOf(k.Together)
		if a > 0 && t > 0 {
			ratios = append(ratios, float64(t)/float64(a))
		}
	}
	if len(ratios) == 0 {
		return 0
	}
	slices.Sort(ratios)
	return min(max((ratios[len(ratios)/2]-1)/float64(n-1), 0), 1)
}

// refused: the driver refused the kind on every GPU (never timed).
func refused(k ProbeKind) bool {
	return !slices.ContainsFunc(k.Alone, func(s ProbeStat) bool { return s.N > 0 })
}

func ms(d time.Duration) string { return fmt.Sprintf("%.3f ms", float64(d)/1e6) }

// Write renders the report as `gpu-telemetry probe` prints it.
func (r ProbeReport) Write(w io.Writer) error {
	var b strings.Builder
	o := r.Opts
	fmt.Fprintf(&b, "gpu-telemetry probe: driver %s (NVML %s), %d GPU(s), %d calls per kind and GPU, deadline %v per call\n",
		r.Driver, r.NVML, len(r.GPUs), o.Calls, o.Deadline)
	b.WriteString("Only reads; the same calls as the daemon. \"alone\": one GPU at a time; \"together\": every GPU at once\n")
	b.WriteString("(a driver-wide lock shows as a together median about N times the alone one).\n\n")
	for _, g := range r.Silent {
		fmt.Fprintf(&b, "GPU %d: did not answer at start (%s); not probed\n\n", g.GPU, g.Why)
	}
	for i, f := range r.Hung {
		if f != "" {
			fmt.Fprintf(&b, "GPU %d: %s did not return within %v; not asked again (its figures are partial)\n\n", r.GPUs[i], f, o.Deadline)
		}
	}
	fmt.Fprintf(&b, "%-52s %10s %12s %12s %13s %13s\n", "call", "per sample", "alone p50", "alone p99", "together p50", "together p99")
	for _, k := range r.Kinds {
		if refused(k) {
			err := ""
			for _, s := range k.Alone {
				if s.Err != "" {
					err = s.Err
				}
			}
			fmt.Fprintf(&b, "%-52s %10.2f   refused by the driver (%s)\n", k.Name, k.PerSample, err)
			continue
		}
		fmt.Fprintf(&b, "%-52s %10.2f %12s %12s %13s %13s\n", k.Name, k.PerSample,
			ms(medianOf(k.Alone)), ms(worst(k.Alone)), ms(medianOf(k.Together)), ms(worst(k.Together)))
	}
	b.WriteString("(p50: the median of the GPUs' medians; p99: the worst GPU's. \"per sample\": calls per GPU-sample,\n")
	b.WriteString(" every column at its normal rate, averaged over the slow tier's period; fan calls for every fan.)\n\n")

	e := r.Estimate()
	b.WriteString("one GPU-sample, each GPU alone:")
	for i, idx := range r.GPUs {
		t, _ := r.sample(i, false)
		fmt.Fprintf(&b, " gpu%d %.2f ms", idx, t/1e6)
	}
	b.WriteString("\n\n")
	iv := o.Interval
	fmt.Fprintf(&b, "at --interval %v with %d GPU(s):\n", iv, len(r.GPUs))
	fmt.Fprintf(&b, "  driver calls per GPU-sample  %.2f (when stretched: %.2f)\n", e.CallsPerSample, e.CallsPerSampleTop)
	fmt.Fprintf(&b, "  driver calls per second      %.0f (all GPUs)\n", e.CallsPerSecond)
	fmt.Fprintf(&b, "  NVML time per GPU-sample     %s (slowest GPU alone)\n", ms(e.SampleAlone))
	fmt.Fprintf(&b, "  driver serialization         %.2f (0: GPUs read in parallel, 1: one call at a time)\n", r.Serialization())
	fmt.Fprintf(&b, "  NVML time per tick           %s = %.0f %% of the interval (all GPUs); stretched: %s\n",
		ms(e.Tick), 100*float64(e.Tick)/float64(iv), ms(e.TickTop))
	b.WriteString("  verdict: " + r.verdict(e) + "\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// verdict applies the pacer's threshold (stretchHigh) to the estimate,
// saying first which GPUs do not answer: no interval fits those.
func (r ProbeReport) verdict(e ProbeEstimate) string {
	stuck := r.Stuck()
	if len(stuck) == 0 {
		return r.fits(e)
	}
	names := make([]string, len(stuck))
	for i, g := range stuck {
		names[i] = "GPU " + strconv.Itoa(g)
	}
	s := strings.Join(names, ", ") + " not answering (named above)"
	if len(r.GPUs) == 0 {
		return s + "; no GPU was probed: nothing to judge"
	}
	return s + "; on the figures measured: " + r.fits(e)
}

// fits applies the pacer's threshold (stretchHigh) to the estimate.
func (r ProbeReport) fits(e ProbeEstimate) string {
	iv := float64(r.Opts.Interval)
	need := time.Duration(float64(e.Tick)/stretchHigh).Round(10*time.Millisecond) + 10*time.Millisecond
	switch {
	case float64(e.Tick) <= stretchHigh*iv:
		return "fits: every column at its normal rate"
	case float64(e.TickTop) <= stretchHigh*iv:
		return fmt.Sprintf("the logger will read the slow tier and then P-state, utilization and memory less often "+
			"(logged, counted as stretches); temperature, fans, power, clocks and throttle reasons stay at full rate. "+
			"Every column at its normal rate needs --interval %v or more", need)
	case float64(e.TickTop) < iv:
		return fmt.Sprintf("even stretched, a tick takes more than half the interval: slow calls will make ticks skip "+
			"(counted as busy_skips); choose --interval %v or more", need)
	default:
		return fmt.Sprintf("too slow for this interval: even the crash-precursor columns alone take longer than a tick, "+
			"so GPUs will be skipped on many ticks (counted as busy_skips); choose --interval %v or more", need)
	}
}

// medianOf is the median of the timed GPUs' medians.
func medianOf(s []ProbeStat) time.Duration {
	var v []time.Duration
	for _, x := range s {
		if x.N > 0 {
			v = append(v, x.P50)
		}
	}
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	return v[len(v)/2]
}

func worst(s []ProbeStat) time.Duration {
	var m time.Duration
	for _, x := range s {
		m = max(m, x.P99)
	}
	return m
}
