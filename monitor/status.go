package monitor

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/anomaly"
	"github.com/gpu-telemetry/gpu-telemetry/live"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
	"github.com/gpu-telemetry/gpu-telemetry/sink"
)

// Status is the daemon's state as the status line and summary show it: the
// host view (uptime, counters, disk pause, NVML pacer) and the detectors'
// and GPUs' totals.
type Status struct {
	live.Host
	Total     anomaly.Counters // all GPUs; Total.Window is the current window's
	Incidents uint64
	GPUs      []GPUStatus
	Window    time.Duration // how long the current window has lasted
}

// GPUStatus is one GPU's part of the status.
type GPUStatus struct {
	live.GPU                                 // the published view: its index, samples, failures, hung rows, incidents
	PeakTempC, PeakPower reading.Opt[uint32] // PeakPower in mW
	Busy                 bool
}

// collect gathers the status. Safe from any goroutine.
func (m *Monitor) collect() Status {
	st := Status{Host: m.hostView()}
	var all []anomaly.Counters
	for _, gs := range m.gpus {
		c := gs.tr.Counters()
		all = append(all, c)
		_, busy := gs.w.Busy()
		v := gs.slot.Get()
		st.GPUs = append(st.GPUs, GPUStatus{GPU: v, PeakTempC: c.PeakTempC, PeakPower: c.PeakPowerMW, Busy: busy})
		st.Incidents += v.Incidents
	}
	st.Total = anomaly.Sum(all)
	st.Window = m.cfg.mono() - time.Duration(m.loop.windowStart.Load())
	return st
}

// status logs one status line (SIGUSR1, and at exit).
func (m *Monitor) status(msg string) {
	m.log.LogAttrs(context.Background(), slog.LevelInfo, msg, m.collect().Attrs()...)
}

func fmtUptime(d time.Duration) string {
	return strconv.Itoa(int(d.Hours())) + "h" + strconv.Itoa(int(d.Minutes())%60) + "m"
}

// optText formats o with f, n/a when absent.
func optText[T any](o reading.Opt[T], f func(T) string) string {
	if v, ok := o.Get(); ok {
		return f(v)
	}
	return "n/a"
}

func optTemp(o reading.Opt[uint32]) string {
	return optText(o, func(v uint32) string { return strconv.FormatUint(uint64(v), 10) + "C" })
}

func optWatts(o reading.Opt[uint32]) string {
	return optText(o, func(v uint32) string { return strconv.FormatUint((uint64(v)+500)/1000, 10) + "W" })
}

// Attrs returns the status as slog attributes: totals, rated ones with the
// current window's count and rate so that "bad long ago" and "bad right
// now" look different (the reference logger gpu-telemetry-deep.py's
// "+N/5m", for that reason), then per GPU samples, failures, hangs and peaks.
func (st Status) Attrs() []slog.Attr {
	t, w := st.Total.Total, st.Total.Window
	rate := anomaly.Rates(w, st.Window)
	a := []slog.Attr{slog.String("uptime", fmtUptime(st.Now.Sub(st.Start)))}
	for i, d := range anomaly.CounterDefs {
		if d.Window != anomaly.WindowRate {
			a = append(a, slog.Uint64(d.Short, t[i]))
			continue
		}
		a = append(a, slog.String(d.Short, strconv.FormatUint(t[i], 10)+" (+"+strconv.FormatUint(w[i], 10)+", "+
			strconv.FormatFloat(rate[i], 'f', 1, 64)+"/min)"))
	}
	a = append(a,
		slog.Uint64("incidents", st.Incidents),
		slog.Bool("disk_paused", st.DiskPaused),
		slog.Int("nvml_level", st.Pacer.Level),
		slog.String("nvml_tick", optMs(st.Pacer.TickNVML)),
		slog.String("nvml_last_late", optMs(st.Pacer.LastLate)),
		slog.String("peak", optTemp(st.Total.PeakTempC)+"/"+optWatts(st.Total.PeakPowerMW)),
	)
	for _, c := range st.Counters {
		a = append(a, slog.Uint64(c.Name, c.Value))
	}
	for _, g := range st.GPUs {
		ga := []any{slog.Uint64("samples", g.Samples), slog.Uint64("fail", g.Failures), slog.Uint64("hung", g.HungRows),
			slog.Uint64("incidents", g.Incidents), slog.String("peak", optTemp(g.PeakTempC)+"/"+optWatts(g.PeakPower)),
			slog.Bool("busy", g.Busy)}
		if g.FanGuard != nil { // --fan-guard: "holding fans 0,1 at 78 % (firmware wanted 53 %), 73 °C"
			ga = append(ga, slog.String("fan_guard", g.FanGuard.Text))
		}
		a = append(a, slog.Group("gpu"+strconv.Itoa(g.Info.Index), ga...))
	}
	return a
}

// SummaryLine renders one summary.log line as the reference logger
// gpu-telemetry-deep.py wrote it (its readers parse it so): cumulative
// totals and per-minute rates over the window that elapsed. final marks the
// last line, over the window a clean stop cut short: "window=42s final |".
func SummaryLine(now time.Time, st Status, window anomaly.Counts, elapsed time.Duration, final bool) string {
	r := anomaly.Rates(window, elapsed)
	t := st.Total.Total
	var b strings.Builder
	fmt.Fprintf(&b, "%s | %s | window=%.0fs", now.Format(sink.TimestampLayout), fmtUptime(st.Now.Sub(st.Start)),
		anomaly.RateWindow(elapsed).Seconds())
	if final {
		b.WriteString(" final")
	}
	b.WriteString(" |")
	// Each detector counter's window as gpu-telemetry-deep.py showed it.
	for i, d := range anomaly.CounterDefs {
		fmt.Fprintf(&b, " %s=%d", d.Name, t[i])
		switch d.Window {
		case anomaly.WindowDelta:
			fmt.Fprintf(&b, " (+%d)", window[i])
		case anomaly.WindowRate:
			fmt.Fprintf(&b, " (rate=%.1f/min)", r[i])
		case anomaly.WindowPeriod:
			fmt.Fprintf(&b, " (period=%d)", window[i])
		}
	}
	fmt.Fprintf(&b, " critical_events=%d peak_temp=%s peak_power=%s", st.Incidents, optTemp(st.Total.PeakTempC), optWatts(st.Total.PeakPowerMW))
	for _, c := range st.Counters {
		fmt.Fprintf(&b, " %s=%d", c.Name, c.Value)
	}
	return b.String()
}

// writeSummary closes the current window, which lasted elapsed, and appends
// a summary line; a periodic one is also logged as a status line (the final
// one is followed by Run's final status line). The final one is written by
// summary.log's Close, within its bound (a stalled disk).
func (m *Monitor) writeSummary(now time.Time, elapsed time.Duration, final bool) {
	if !final {
		defer m.status("summary")
	}
	var window anomaly.Counts
	for _, gs := range m.gpus {
		window = window.Add(gs.tr.TakeWindow().Window)
	}
	line := SummaryLine(now, m.collect(), window, elapsed, final)
	if final {
		m.summary.Close(line)
		return
	}
	if err := m.summary.Line(line); err != nil {
		lose(m.reg, m.log, lineFails, "a summary.log line", slog.String("line", line), slog.String("error", err.Error()))
	}
}

// optMs is a measured duration in milliseconds, n/a until measured.
func optMs(o reading.Opt[time.Duration]) string {
	return optText(o, func(v time.Duration) string { return strconv.FormatFloat(float64(v)/1e6, 'f', 1, 64) + "ms" })
}
