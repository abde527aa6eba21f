// Package metrics exports the daemon's published state to Prometheus: one
// custom Collector that reads the live.Board at scrape time (node_exporter's
// pattern), so no metric work happens on the 100 ms path and a scrape never
// waits on NVML. Handler serves it with promhttp.
//
// Per-GPU series carry the labels gpu (index) and uuid. A GPU that is not
// answering (hung, lost, failing, not started) keeps its state, counters and
// info series; its reading series (temperature, power, clocks, ...) are not
// exported until it answers again, so nothing freezes at stale values.
// Absent readings (refused, unsupported) are absent series, never 0.
package metrics

import (
	"runtime"
	"slices"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpu-telemetry/gpu-telemetry/live"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

const ns = "gpu_telemetry_"

// metric is one metric family as exported: its type, its full name
// (gpu_telemetry_<name>), every label name (the scope's, then its own, in
// the order values are given) and its descriptor, computed once.
type metric struct {
	typ    prometheus.ValueType
	full   string
	labels []string
	desc   *prometheus.Desc
}

var gpuLabels = []string{"gpu", "uuid"}

// all is every metric declared with gpuMetric or hostMetric (Describe).
var all []*metric

// newMetric is metric name with the scope's labels, then its own.
func newMetric(name, help string, typ prometheus.ValueType, scope []string, labels ...string) *metric {
	m := &metric{typ: typ, full: ns + name, labels: append(append([]string{}, scope...), labels...)}
	if len(m.labels) > maxLabels {
		panic("metrics: " + m.full + " has more than maxLabels labels")
	}
	m.desc = prometheus.NewDesc(m.full, help, m.labels, nil)
	return m
}

// gpuMetric declares a per-GPU metric (labels gpu and uuid, then labels).
func gpuMetric(name, help string, typ prometheus.ValueType, labels ...string) *metric {
	m := newMetric(name, help, typ, gpuLabels, labels...)
	all = append(all, m)
	return m
}

// hostMetric declares a host metric.
func hostMetric(name, help string, typ prometheus.ValueType, labels ...string) *metric {
	m := newMetric(name, help, typ, nil, labels...)
	all = append(all, m)
	return m
}

// The per-GPU metrics, declared once; Collect walks the readings table.
var (
	mInfo  = gpuMetric("gpu_info", "Static facts of a monitored GPU (value 1).", prometheus.GaugeValue, "model", "pci_bus_id", "serial", "vbios", "driver")
	mState = gpuMetric("gpu_state", "GPU state as the daemon sees it: 1 for the current state (answering, hung, lost, failing, not_started), 0 for the others.", prometheus.GaugeValue, "state")
	mStall = gpuMetric("stall_seconds", "Seconds the GPU's current NVML call has been stuck; 0 when not hung.", prometheus.GaugeValue)
	mThrA  = gpuMetric("throttle_reason_active", "Clocks event (throttle) reason active in the last sample (0 or 1).", prometheus.GaugeValue, "reason")
	mThrS  = gpuMetric("throttle_reason_seconds_total", "Seconds spent with the clocks event reason active.", prometheus.CounterValue, "reason")
	mFlags = gpuMetric("anomaly_flags_total", "Rows that carried the anomaly flag.", prometheus.CounterValue, "kind")
	mXids  = gpuMetric("xids_total", "Xids seen on the GPU, by code (\"other\" beyond the first 16 codes).", prometheus.CounterValue, "xid")
	mLastX = gpuMetric("last_xid_timestamp_seconds", "Time of the last Xid on the GPU (Unix seconds); absent when none.", prometheus.GaugeValue, "xid")
	mRecov = gpuMetric("recovery_action", "Last GPU recovery action the driver asked for (0 none, 1 GPU reset, 2 node reboot, 3 drain P2P, 4 drain and reset); absent when none.", prometheus.GaugeValue)
	mRecT  = gpuMetric("last_recovery_action_timestamp_seconds", "Time of the last GPU recovery action (Unix seconds); absent when none.", prometheus.GaugeValue)
	mLastS = gpuMetric("last_sample_timestamp_seconds", "Time of the GPU's last answered sample (Unix seconds).", prometheus.GaugeValue)
	mOps   = gpuMetric("operational_events_total", "GPU operational events (driver R615+) received, by severity (every severity NVML names, 0 when none; \"other\" for one it does not name).", prometheus.CounterValue, "severity")
	mOpsC  = gpuMetric("operational_events_critical_total", "GPU operational events that were fatal or uncontained (each raised an incident and a crash snapshot).", prometheus.CounterValue)
	mCPER  = gpuMetric("cper_records_total", "CPER records of the GPU read from the driver (R610+), by severity (as seen; \"other\" beyond the first five).", prometheus.CounterValue, "severity")
	mInc   = gpuMetric("incidents_total", "Critical events on the GPU (hang, failure, loss, Xid, recovery action).", prometheus.CounterValue)
	mSamp  = gpuMetric("samples_total", "Answered samples.", prometheus.CounterValue)
	mFail  = gpuMetric("sample_failures_total", "Failed or lost samples.", prometheus.CounterValue)
	mHung  = gpuMetric("hung_rows_total", "NVML_HUNG rows written.", prometheus.CounterValue)
	// mWork names the jobs on a GPU (from its processes' cgroups): one
	// series per distinct job, for dashboards to join on gpu and uuid,
	// never a label on the per-sample series.
	mWork = gpuMetric("gpu_workload_info", "A job with processes on the GPU, from their cgroups (value 1): Slurm job, Kubernetes pod UID, container id; empty where the cgroup does not say.", prometheus.GaugeValue, "slurm_job", "pod_uid", "container")
	// mProcs is the number of processes on a GPU at its last successful
	// process read (absent before one): the processes panel of the host
	// dashboard, next to the jobs in mWork.
	// The fan guard's (--fan-guard only): whether it holds the GPU's fans,
	// and the speed it commands while it does.
	mGuard      = gpuMetric("fan_guard_holding", "Whether the fan guard holds the GPU's fans (0 or 1); absent without --fan-guard.", prometheus.GaugeValue)
	mGuardSpeed = gpuMetric("fan_guard_speed_ratio", "Fan speed the fan guard commands (0-1); absent when it does not hold the fans.", prometheus.GaugeValue)
	mProcs      = gpuMetric("gpu_processes", "Processes on the GPU (compute and graphics) at its last successful process read; absent before one.", prometheus.GaugeValue)
)

// readingMetric is a reading of reading.Table with a metric: its row and
// its metric (shared by the rows of one metric name, told apart by the
// row's label value).
type readingMetric struct {
	def *reading.Def
	m   *metric
}

// readings are reading.Table's metrics, in table order.
var readings = func() (r []readingMetric) {
	byName := map[string]*metric{}
	for i := range reading.Table {
		d := &reading.Table[i]
		dm := &d.Metric
		if dm.Name == "" {
			continue
		}
		m := byName[dm.Name]
		if m == nil {
			var labels []string
			if dm.Label[0] != "" {
				labels = []string{dm.Label[0]}
			}
			m = family(dm, labels...)
			byName[dm.Name] = m
		}
		r = append(r, readingMetric{d, m})
	}
	return r
}()

// family declares a reading's per-GPU metric with labels.
func family(dm *reading.Metric, labels ...string) *metric {
	typ := prometheus.GaugeValue
	if dm.Counter {
		typ = prometheus.CounterValue
	}
	return gpuMetric(dm.Name, dm.Help, typ, labels...)
}

// fanMetrics are reading.FanTable's metrics, by row, each with the label
// fan; nil for a row without a series.
var fanMetrics = func() (m []*metric) {
	for i := range reading.FanTable {
		var fm *metric
		if reading.FanTable[i].Metric.Name != "" {
			fm = family(&reading.FanTable[i].Metric, "fan")
		}
		m = append(m, fm)
	}
	return m
}()

// value is the reading's exported value in s.
func (rm *readingMetric) value(s *reading.Sample) (float64, bool) {
	v, ok := rm.def.Get(s)
	return exported(&rm.def.Metric, v), ok
}

// exported is stored value v as metric m exports it (Div, else Scale).
func exported(m *reading.Metric, v uint64) float64 {
	if m.Div != 0 {
		return float64(v) / m.Div
	}
	return float64(v) * m.Scale
}

// The host metrics.
var (
	mBuild    = hostMetric("build_info", "Build of the running gpu-telemetry (value 1).", prometheus.GaugeValue, "version", "goversion")
	mHost     = hostMetric("host_info", "The host as every output names it: --host (else the hostname), machine id, boot id (value 1).", prometheus.GaugeValue, "host", "machine_id", "boot_id")
	mStart    = hostMetric("start_time_seconds", "When the daemon started (Unix seconds).", prometheus.GaugeValue)
	mDisk     = hostMetric("disk_paused", "1 while CSV writes are paused (disk full or below --min-free-mb).", prometheus.GaugeValue)
	mGPUs     = hostMetric("gpus", "Monitored GPUs.", prometheus.GaugeValue)
	mAnswer   = hostMetric("gpus_answering", "Monitored GPUs whose last sample was answered.", prometheus.GaugeValue)
	mMissing  = hostMetric("gpus_missing", "GPUs missing since this start: boards of the previous run not enumerated now, or fewer than --expect-gpus (GPU_MISSING in events.log).", prometheus.GaugeValue)
	mPeriod   = hostMetric("tick_period_seconds", "Poll-loop tick period over the last minute (stat: mean, p99, max).", prometheus.GaugeValue, "stat")
	mInterval = hostMetric("interval_seconds", "Configured sampling interval.", prometheus.GaugeValue)
	mPacer    = hostMetric("pacer_level", "NVML pacer stretch level: 0 reads every column at its normal rate; each step up (NVML too slow for the interval) reads the slow columns less often.", prometheus.GaugeValue)
	mTickNVML = hostMetric("nvml_tick_seconds", "Median time over the last second from the first GPU's sample start to the last one's end in a tick.", prometheus.GaugeValue)
	mBERT     = hostMetric("boot_error_record", "1 when the host firmware left a boot error record (ACPI BERT) that this boot's run read: a reset that left no Xid may be there; 0 otherwise.", prometheus.GaugeValue)
	mFabricSv = hostMetric("fabric_service_running", "1 when a process runs the NVLink fabric daemon (nvidia-fabricmanager, nvidia-imex, nvlsm), 0 when none does; only on a host where a GPU reports an NVLink fabric (a dead Fabric Manager leaves the fabric unrouted while the driver looks fine).", prometheus.GaugeValue, "service")
	mLogWait  = hostMetric("log_lines_waiting", "events.log and summary.log lines held back now because their file cannot be written.", prometheus.GaugeValue)
)

// stateLabels names live.StateKind values as label values.
var stateLabels = [...]string{live.StateNotStarted: "not_started", live.StateAnswering: "answering", live.StateHung: "hung", live.StateLost: "lost", live.StateFailing: "failing"}

// Collector reads a live.Board at scrape time: a client_golang Collector.
type Collector struct {
	board *live.Board
	// counters are the host counter table's metrics, by counter name.
	counters map[string]*metric
	// linkSeries: which NVLink links get per-link series (linkbudget.go).
	linkSeries LinkSeries
	// noWorkload leaves gpu_workload_info out (NoWorkload).
	noWorkload bool
}

// New returns a collector over board.
func New(board *live.Board, opts ...Option) *Collector {
	c := &Collector{board: board, counters: map[string]*metric{}}
	for _, o := range opts {
		o(c)
	}
	for _, k := range board.View().Host.Counters {
		c.counters[k.Name] = newMetric(k.Name+"_total", capital(k.Help)+".", prometheus.CounterValue, nil)
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
	for _, m := range all {
		ch <- m.desc
	}
	for _, m := range c.counters {
		ch <- m.desc
	}
}

// Collect implements prometheus.Collector: one consistent copy of the
// board, then the series. A series client_golang refuses (a label value
// that is not valid UTF-8) goes to the registry as an invalid metric: the
// scrape reports it and serves the others.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	w := walker{c: c}
	w.walk(c.board.View())
	for i := range w.out {
		s := &w.out[i]
		m, err := prometheus.NewConstMetric(s.m.desc, s.m.typ, s.v, s.lv[:s.n]...)
		if err != nil {
			m = prometheus.NewInvalidMetric(s.m.desc, err)
		}
		ch <- m
	}
}

// maxLabels is the most labels a series has (gpu_info).
const maxLabels = 7

// sample is one series of one scrape: its metric, value and label values
// in the metric's label order.
type sample struct {
	m  *metric
	v  float64
	n  int
	lv [maxLabels]string
}

// walker lists a view's series.
type walker struct {
	c   *Collector
	out []sample
}

func (w *walker) add(m *metric, v float64, lv ...string) {
	w.out = append(w.out, sample{m: m, v: v, n: len(lv)})
	copy(w.out[len(w.out)-1].lv[:], lv)
}

// walk appends the series of one consistent view.
func (w *walker) walk(v live.View) {
	h := &v.Host
	w.add(mBuild, 1, h.Version, runtime.Version())
	w.add(mHost, 1, h.Identity.Host, h.Identity.MachineID, h.Identity.BootID)
	w.add(mStart, unix(h.Start.UnixNano()))
	w.add(mDisk, b2f(h.DiskPaused))
	w.add(mGPUs, float64(len(v.GPUs)))
	w.add(mInterval, h.Interval.Seconds())
	w.add(mPacer, float64(h.Pacer.Level))
	if d, ok := h.Pacer.TickNVML.Get(); ok { // absent until measured
		w.add(mTickNVML, d.Seconds())
	}
	w.add(mLogWait, float64(h.LogLines.Waiting))
	if h.Cadence.Mean > 0 {
		w.add(mPeriod, h.Cadence.Mean.Seconds(), "mean")
		w.add(mPeriod, h.Cadence.P99.Seconds(), "p99")
		w.add(mPeriod, h.Cadence.Max.Seconds(), "max")
	}
	for _, k := range h.Counters {
		if f := w.c.counters[k.Name]; f != nil {
			w.add(f, float64(k.Value))
		}
	}
	answering := 0
	for i := range v.GPUs {
		g := &v.GPUs[i]
		if g.State.Kind == live.StateAnswering {
			answering++
		}
		w.gpu(g, h)
	}
	w.add(mAnswer, float64(answering))
	w.add(mMissing, float64(h.GPUsMissing))
	w.add(mBERT, b2f(h.BERT != nil))
	for _, f := range h.Fabric { // nil: no GPU reports a fabric
		w.add(mFabricSv, b2f(f.PID > 0), f.Name)
	}
	for _, b := range h.Missing { // by its index in the previous run; "" when missing since an earlier one
		gpu := ""
		if b.Index >= 0 {
			gpu = strconv.Itoa(b.Index)
		}
		w.add(mAction, 1, gpu, b.UUID, b.Action.Action.String())
	}
}

func (w *walker) gpu(g *live.GPU, h *live.Host) {
	gpu, uuid := strconv.Itoa(g.Info.Index), g.Info.UUID
	in := g.Info
	w.add(mInfo, 1, gpu, uuid, in.Name, in.BusID, in.Serial, in.VBIOS, h.System.DriverVersion)
	for k, name := range stateLabels {
		w.add(mState, b2f(live.StateKind(k) == g.State.Kind), gpu, uuid, name)
	}
	w.add(mStall, g.State.HungFor(h.Mono).Seconds(), gpu, uuid) // 0 when not hung
	w.add(mInc, float64(g.Incidents), gpu, uuid)
	w.add(mSamp, float64(g.Samples), gpu, uuid)
	w.add(mFail, float64(g.Failures), gpu, uuid)
	w.add(mHung, float64(g.HungRows), gpu, uuid)
	if fg := g.FanGuard; fg != nil {
		w.add(mGuard, b2f(fg.Holding()), gpu, uuid)
		if fg.SpeedPct != nil {
			w.add(mGuardSpeed, float64(*fg.SpeedPct)/100, gpu, uuid)
		}
	}
	for _, k := range reading.FlagKinds() {
		w.add(mFlags, float64(g.FlagCount[k]), gpu, uuid, k.Def().Name)
	}
	for i, r := range reading.ThrottleReasons {
		w.add(mThrS, g.ThrottleTime[i].Seconds(), gpu, uuid, r.Name)
	}
	for _, x := range g.Xids {
		if x.Count > 0 {
			w.add(mXids, float64(x.Count), gpu, uuid, strconv.FormatUint(x.Code, 10))
		}
	}
	if g.XidsOther > 0 {
		w.add(mXids, float64(g.XidsOther), gpu, uuid, "other")
	}
	for i, n := range g.OpEvents {
		if i < len(reading.OpSeverities) {
			w.add(mOps, float64(n), gpu, uuid, reading.OpSeverities[i])
		} else if n > 0 {
			w.add(mOps, float64(n), gpu, uuid, "other")
		}
	}
	w.add(mOpsC, float64(g.OpCritical), gpu, uuid)
	for _, c := range g.CPER {
		if c.Count > 0 {
			w.add(mCPER, float64(c.Count), gpu, uuid, c.Name)
		}
	}
	if !g.LastXid.Time.IsZero() {
		w.add(mLastX, unix(g.LastXid.Time.UnixNano()), gpu, uuid, strconv.FormatUint(g.LastXid.Code, 10))
	}
	w.workloads(g, gpu, uuid)
	if !g.LastRecovery.Time.IsZero() {
		w.add(mRecov, float64(g.LastRecovery.Code), gpu, uuid)
		w.add(mRecT, unix(g.LastRecovery.Time.UnixNano()), gpu, uuid)
	}
	w.healthVerdict(g, gpu, uuid)
	s := &g.Sample
	if s.Time.IsZero() {
		return
	}
	w.add(mLastS, unix(s.Time.UnixNano()), gpu, uuid)
	if g.State.Kind != live.StateAnswering {
		return // no stale readings
	}
	w.links(g, gpu, uuid) // the health counters are readings, exported below
	for i := range readings {
		rm := &readings[i]
		if val, ok := rm.value(s); ok {
			if l := rm.def.Metric.Label[1]; l != "" {
				w.add(rm.m, val, gpu, uuid, l)
			} else {
				w.add(rm.m, val, gpu, uuid)
			}
		}
	}
	for i := range min(s.NumFans, reading.MaxFans) {
		fan := strconv.Itoa(i)
		for j := range reading.FanTable {
			d := &reading.FanTable[j]
			if v, ok := d.Get(s, i); ok && fanMetrics[j] != nil {
				w.add(fanMetrics[j], exported(&d.Metric, uint64(v)), gpu, uuid, fan)
			}
		}
	}
	if m, ok := s.Values[reading.Throttle].Get(); ok {
		for _, r := range reading.ThrottleReasons {
			w.add(mThrA, b2f(m&r.Bit != 0), gpu, uuid, r.Name)
		}
	}
}

// NoWorkload leaves the gpu_workload_info series out (--metrics-no-workload):
// the jobs on each GPU (Slurm job, pod UID, container) are then not shown
// to whoever can read /metrics, which on loopback is every local user.
func NoWorkload() Option { return func(c *Collector) { c.noWorkload = true } }

// workloads adds the GPU's process count and one gpu_workload_info series
// per distinct job of its last successful process read (none with
// NoWorkload).
func (w *walker) workloads(g *live.GPU, gpu, uuid string) {
	if g.Processes == nil {
		return
	}
	good := g.Processes.Good()
	if good == nil {
		return
	}
	w.add(mProcs, float64(len(good.List)), gpu, uuid)
	if w.c.noWorkload {
		return
	}
	type job struct{ slurm, pod, ctr string }
	seen := make([]job, 0, 4)
	for i := range good.List {
		wl := &good.List[i].Workload
		j := job{wl.SlurmJob, wl.PodUID, wl.ContainerID}
		if j == (job{}) || slices.Contains(seen, j) {
			continue
		}
		seen = append(seen, j)
		w.add(mWork, 1, gpu, uuid, j.slurm, j.pod, j.ctr)
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func unix(ns int64) float64 { return float64(ns) / 1e9 }
