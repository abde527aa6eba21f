// Package metrics exports the daemon's published state to Prometheus: one
// custom Collector that reads the live.Board at scrape time (node_exporter's
// pattern), so no metric work happens on the 100 ms path and a scrape never
// waits on NVML.
//
// Per-GPU series carry the labels gpu (index) and uuid. A GPU that is not
// answering (hung, lost, failing, not started) keeps its state, counters and
// info series; its reading series (temperature, power, clocks, ...) are not
// exported until it answers again, so nothing freezes at stale values.
// Absent readings (refused, unsupported) are absent series, never 0.
package metrics

import (
	"runtime"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpu-telemetry/gpu-telemetry/live"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

const ns = "gpu_telemetry_"

// metric declares one metric: name, help, type and its extra labels.
type metric struct {
	name   string
	help   string
	typ    prometheus.ValueType
	labels []string
}

var gpuLabels = []string{"gpu", "uuid"}

// The per-GPU metrics, declared once; Collect walks the readings table.
var (
	mInfo = metric{"gpu_info", "Static facts of a monitored GPU (value 1).", prometheus.GaugeValue,
		[]string{"model", "pci_bus_id", "serial", "vbios", "driver"}}
	mState = metric{"gpu_state", "GPU state as the daemon sees it: 1 for the current state (answering, hung, lost, failing, not_started), 0 for the others.", prometheus.GaugeValue,
		[]string{"state"}}
	mStall = metric{"stall_seconds", "Seconds the GPU's current NVML call has been stuck; 0 when not hung.", prometheus.GaugeValue, nil}
	mFan   = metric{"fan_speed_ratio", "Fan speed (0-1).", prometheus.GaugeValue, []string{"fan"}}
	mFanT  = metric{"fan_target_ratio", "Fan speed the controller targets (0-1).", prometheus.GaugeValue, []string{"fan"}}
	mClock = metric{"clock_hz", "Clock frequency.", prometheus.GaugeValue, []string{"clock"}}
	mUtil  = metric{"utilization_ratio", "Utilization over the driver's last sample period (0-1).", prometheus.GaugeValue, []string{"engine"}}
	mThrA  = metric{"throttle_reason_active", "Clocks event (throttle) reason active in the last sample (0 or 1).", prometheus.GaugeValue, []string{"reason"}}
	mThrS  = metric{"throttle_reason_seconds_total", "Seconds spent with the clocks event reason active.", prometheus.CounterValue, []string{"reason"}}
	mFlags = metric{"anomaly_flags_total", "Rows that carried the anomaly flag.", prometheus.CounterValue, []string{"kind"}}
	mXids  = metric{"xids_total", "Xids seen on the GPU, by code (\"other\" beyond the first 16 codes).", prometheus.CounterValue, []string{"xid"}}
	mLastX = metric{"last_xid_timestamp_seconds", "Time of the last Xid on the GPU (Unix seconds); absent when none.", prometheus.GaugeValue, []string{"xid"}}
	mRecov = metric{"recovery_action", "Last GPU recovery action the driver asked for (0 none, 1 GPU reset, 2 node reboot, 3 drain P2P, 4 drain and reset); absent when none.", prometheus.GaugeValue, nil}
	mRecT  = metric{"last_recovery_action_timestamp_seconds", "Time of the last GPU recovery action (Unix seconds); absent when none.", prometheus.GaugeValue, nil}
	mLastS = metric{"last_sample_timestamp_seconds", "Time of the GPU's last answered sample (Unix seconds).", prometheus.GaugeValue, nil}
	mInc   = metric{"incidents_total", "Critical events on the GPU (hang, failure, loss, Xid, recovery action).", prometheus.CounterValue, nil}
	mSamp  = metric{"samples_total", "Answered samples.", prometheus.CounterValue, nil}
	mFail  = metric{"sample_failures_total", "Failed or lost samples.", prometheus.CounterValue, nil}
	mHung  = metric{"hung_rows_total", "NVML_HUNG rows written.", prometheus.CounterValue, nil}
	// mMemTot is exported when the GPU's memory size is known (live.GPU.MemTotal).
	mMemTot = metric{"memory_total_bytes", "GPU memory size.", prometheus.GaugeValue, nil}
)

// reading is one per-sample value exported as its own metric.
type readingMetric struct {
	metric
	get func(s *reading.Sample) (float64, bool)
}

func u32(o reading.Opt[uint32], scale float64) (float64, bool) {
	v, ok := o.Get()
	return float64(v) * scale, ok
}

// readings is the table of per-sample metrics without extra labels.
var readings = []readingMetric{
	{metric{"temperature_celsius", "GPU temperature.", prometheus.GaugeValue, nil}, func(s *reading.Sample) (float64, bool) { return u32(s.TempC, 1) }},
	{metric{"memory_temperature_celsius", "GPU memory temperature.", prometheus.GaugeValue, nil}, func(s *reading.Sample) (float64, bool) { return u32(s.MemTempC, 1) }},
	{metric{"power_watts", "Power draw.", prometheus.GaugeValue, nil}, func(s *reading.Sample) (float64, bool) { return u32(s.PowerMW, 1e-3) }},
	{metric{"power_limit_watts", "Power management limit.", prometheus.GaugeValue, nil}, func(s *reading.Sample) (float64, bool) { return u32(s.PowerLimitMW, 1e-3) }},
	{metric{"power_enforced_limit_watts", "Enforced power limit.", prometheus.GaugeValue, nil}, func(s *reading.Sample) (float64, bool) { return u32(s.EnforcedLimitMW, 1e-3) }},
	{metric{"energy_joules_total", "Energy consumed since the driver loaded.", prometheus.CounterValue, nil}, func(s *reading.Sample) (float64, bool) {
		v, ok := s.EnergyMJ.Get()
		return float64(v) / 1000, ok
	}},
	{metric{"memory_used_bytes", "GPU memory used.", prometheus.GaugeValue, nil}, func(s *reading.Sample) (float64, bool) {
		v, ok := s.VRAMUsedBytes.Get()
		return float64(v), ok
	}},
	{metric{"pstate", "Performance state (0 fastest, 15 slowest).", prometheus.GaugeValue, nil}, func(s *reading.Sample) (float64, bool) { return u32(s.PState, 1) }},
	{metric{"pcie_link_generation", "Current PCIe link generation.", prometheus.GaugeValue, nil}, func(s *reading.Sample) (float64, bool) { return u32(s.PCIeGen, 1) }},
	{metric{"pcie_link_width", "Current PCIe link width (lanes).", prometheus.GaugeValue, nil}, func(s *reading.Sample) (float64, bool) { return u32(s.PCIeWidth, 1) }},
	{metric{"pcie_replays_total", "PCIe replay counter.", prometheus.CounterValue, nil}, func(s *reading.Sample) (float64, bool) {
		v, ok := s.PCIeReplay.Get()
		return float64(v), ok
	}},
}

// The host metrics.
var (
	mBuild    = metric{"build_info", "Build of the running gpu-telemetry (value 1).", prometheus.GaugeValue, []string{"version", "goversion"}}
	mStart    = metric{"start_time_seconds", "When the daemon started (Unix seconds).", prometheus.GaugeValue, nil}
	mDisk     = metric{"disk_paused", "1 while CSV writes are paused (disk full or below --min-free-mb).", prometheus.GaugeValue, nil}
	mGPUs     = metric{"gpus", "Monitored GPUs.", prometheus.GaugeValue, nil}
	mAnswer   = metric{"gpus_answering", "Monitored GPUs whose last sample was answered.", prometheus.GaugeValue, nil}
	mPeriod   = metric{"tick_period_seconds", "Poll-loop tick period over the last minute (stat: mean, p99, max).", prometheus.GaugeValue, []string{"stat"}}
	mInterval = metric{"interval_seconds", "Configured sampling interval.", prometheus.GaugeValue, nil}
)

// stateLabels names live.StateKind values as label values.
var stateLabels = [...]string{live.StateNotStarted: "not_started", live.StateOK: "answering", live.StateHung: "hung", live.StateLost: "lost", live.StateFailing: "failing"}

// Collector reads a live.Board at scrape time.
type Collector struct {
	board *live.Board
	descs map[string]*prometheus.Desc
	// counters are the host counter table's metrics, by counter name.
	counters map[string]*prometheus.Desc
}

// New returns a collector over board.
func New(board *live.Board) *Collector {
	c := &Collector{board: board, descs: map[string]*prometheus.Desc{}, counters: map[string]*prometheus.Desc{}}
	for _, m := range []metric{mInfo, mState, mStall, mFan, mFanT, mClock, mUtil, mThrA, mThrS, mFlags, mXids, mLastX, mRecov, mRecT, mLastS, mInc, mSamp, mFail, mHung, mMemTot} {
		c.descs[m.name] = prometheus.NewDesc(ns+m.name, m.help, append(append([]string{}, gpuLabels...), m.labels...), nil)
	}
	for _, r := range readings {
		c.descs[r.name] = prometheus.NewDesc(ns+r.name, r.help, gpuLabels, nil)
	}
	for _, m := range []metric{mBuild, mStart, mDisk, mGPUs, mAnswer, mPeriod, mInterval} {
		c.descs[m.name] = prometheus.NewDesc(ns+m.name, m.help, m.labels, nil)
	}
	for _, k := range board.View().Host.Counters {
		c.counters[k.Name] = prometheus.NewDesc(ns+k.Name+"_total", capital(k.Help)+".", nil, nil)
	}
	return c
}

func capital(s string) string {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
	for _, d := range c.counters {
		ch <- d
	}
}

// Collect implements prometheus.Collector: one consistent copy of the
// board, then the series.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	v := c.board.View()
	h := &v.Host
	emit := func(m metric, typ prometheus.ValueType, val float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(c.descs[m.name], typ, val, labels...)
	}
	emit(mBuild, prometheus.GaugeValue, 1, h.Version, runtime.Version())
	emit(mStart, prometheus.GaugeValue, unix(h.Start.UnixNano()))
	emit(mDisk, prometheus.GaugeValue, b2f(h.DiskPaused))
	emit(mGPUs, prometheus.GaugeValue, float64(len(v.GPUs)))
	emit(mInterval, prometheus.GaugeValue, h.Interval.Seconds())
	if h.Cadence.Mean > 0 {
		emit(mPeriod, prometheus.GaugeValue, h.Cadence.Mean.Seconds(), "mean")
		emit(mPeriod, prometheus.GaugeValue, h.Cadence.P99.Seconds(), "p99")
		emit(mPeriod, prometheus.GaugeValue, h.Cadence.Max.Seconds(), "max")
	}
	for _, k := range h.Counters {
		if d := c.counters[k.Name]; d != nil {
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(k.Value))
		}
	}
	answering := 0
	for i := range v.GPUs {
		g := &v.GPUs[i]
		if g.State.Kind == live.StateOK {
			answering++
		}
		c.collectGPU(ch, g, h)
	}
	emit(mAnswer, prometheus.GaugeValue, float64(answering))
}

func (c *Collector) collectGPU(ch chan<- prometheus.Metric, g *live.GPU, h *live.Host) {
	gpu, uuid := strconv.Itoa(g.Info.Index), g.Info.UUID
	emit := func(m metric, val float64, extra ...string) {
		ch <- prometheus.MustNewConstMetric(c.descs[m.name], m.typ, val, append([]string{gpu, uuid}, extra...)...)
	}
	in := g.Info
	emit(mInfo, 1, in.Name, in.BusID, in.Serial, in.VBIOS, h.System.DriverVersion)
	for k, name := range stateLabels {
		emit(mState, b2f(live.StateKind(k) == g.State.Kind), name)
	}
	stall := 0.0
	if g.State.Kind == live.StateHung {
		stall = h.Now.Sub(g.State.Since).Seconds()
	}
	emit(mStall, stall)
	emit(mInc, float64(g.Incidents))
	emit(mSamp, float64(g.Samples))
	emit(mFail, float64(g.Failures))
	emit(mHung, float64(g.HungRows))
	for k, name := range live.FlagKindNames {
		if name != "" {
			emit(mFlags, float64(g.FlagCount[k]), name)
		}
	}
	for i, r := range reading.ThrottleReasons {
		emit(mThrS, g.ThrottleTime[i].Seconds(), r.Name)
	}
	for _, x := range g.Xids {
		if x.Count > 0 {
			emit(mXids, float64(x.Count), strconv.FormatUint(x.Code, 10))
		}
	}
	if g.XidsOther > 0 {
		emit(mXids, float64(g.XidsOther), "other")
	}
	if !g.LastXid.Time.IsZero() {
		emit(mLastX, unix(g.LastXid.Time.UnixNano()), strconv.FormatUint(g.LastXid.Code, 10))
	}
	if !g.LastRecovery.Time.IsZero() {
		emit(mRecov, float64(g.LastRecovery.Code))
		emit(mRecT, unix(g.LastRecovery.Time.UnixNano()))
	}
	s := &g.Sample
	if s.Time.IsZero() {
		return
	}
	emit(mLastS, unix(s.Time.UnixNano()))
	if g.State.Kind != live.StateOK {
		return // no stale readings
	}
	for _, r := range readings {
		if val, ok := r.get(s); ok {
			ch <- prometheus.MustNewConstMetric(c.descs[r.name], r.typ, val, gpu, uuid)
		}
	}
	if t, ok := g.MemTotalBytes().Get(); ok {
		emit(mMemTot, float64(t))
	}
	for i := 0; i < s.NumFans && i < reading.MaxFans; i++ {
		fan := strconv.Itoa(i)
		if v, ok := u32(s.Fans[i].Speed, 0.01); ok {
			emit(mFan, v, fan)
		}
		if v, ok := u32(s.Fans[i].Target, 0.01); ok {
			emit(mFanT, v, fan)
		}
	}
	for _, cl := range [...]struct {
		name string
		v    reading.Opt[uint32]
	}{{"graphics", s.GraphicsMHz}, {"sm", s.SMMHz}, {"memory", s.MemMHz}} {
		if v, ok := u32(cl.v, 1e6); ok {
			emit(mClock, v, cl.name)
		}
	}
	for _, u := range [...]struct {
		name string
		v    reading.Opt[uint32]
	}{{"gpu", s.GPUUtil}, {"memory", s.MemUtil}, {"encoder", s.EncUtil}, {"decoder", s.DecUtil}} {
		if v, ok := u32(u.v, 0.01); ok {
			emit(mUtil, v, u.name)
		}
	}
	if m, ok := s.Throttle.Get(); ok {
		for _, r := range reading.ThrottleReasons {
			emit(mThrA, b2f(m&r.Bit != 0), r.Name)
		}
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func unix(ns int64) float64 { return float64(ns) / 1e9 }
