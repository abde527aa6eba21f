package live

import (
	"strconv"
	"strings"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/action"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// SchemaVersion is the version of the status document (Doc). It changes
// only when a field is removed or changes meaning; new fields keep it.
// Version 2 left out the copies of counters outside host.counters:
// host.pacer.stretches and busy_skips, host.log_lines.delayed and dropped,
// host.cadence.ticks and overruns, host.rows_written and rows_dropped.
const SchemaVersion = 2

// Doc is the status document: what the control socket answers, what
// `gpu-telemetry status --json` prints and what `status` and `top` render.
// Absent readings are null, never 0.
type Doc struct {
	SchemaVersion int       `json:"schema_version"`
	Time          time.Time `json:"time"`
	Host          HostDoc   `json:"host"`
	GPUs          []GPUDoc  `json:"gpus"`
	// Events are this host's last events.log lines, newest first, only when
	// the request asked for them (status events=N).
	Events []string `json:"events,omitempty"`
}

// HostDoc is the host part of Doc.
type HostDoc struct {
	Version       string       `json:"version"`
	Name          string       `json:"name"`       // the host (--host, else the hostname)
	MachineID     string       `json:"machine_id"` // "" when the host has none
	BootID        string       `json:"boot_id"`
	Driver        string       `json:"driver"`
	NVML          string       `json:"nvml"`
	CUDA          string       `json:"cuda"`
	Started       time.Time    `json:"started"`
	UptimeS       float64      `json:"uptime_s"`
	IntervalS     float64      `json:"interval_s"`
	DeadlineS     float64      `json:"deadline_s"`
	Cadence       CadenceDoc   `json:"cadence"`
	RowsDropped10 uint64       `json:"rows_dropped_10m"` // rows_dropped's growth in the last 10 minutes
	Disk          string       `json:"disk"`             // "ok" or "paused"
	Kmsg          string       `json:"kmsg"`
	NVMLEvents    string       `json:"nvml_events"`
	LastIncident  *IncidentDoc `json:"last_incident"`
	// MissingBoards are the previous run's boards not enumerated now that
	// have a repair action ([] for none).
	MissingBoards []MissingBoardDoc `json:"missing_boards"`
	// GPUsMissing is how many GPUs are missing since this start
	// (gpu_telemetry_gpus_missing): a board of the previous run not
	// enumerated now, or fewer than --expect-gpus.
	GPUsMissing int `json:"gpus_missing"`
	// BERT is the host firmware's boot error record read this boot (ACPI
	// BERT: a silent reset leaves no Xid, only this); null: none.
	BERT     *CPERRecordDoc `json:"bert"`
	Pacer    PacerDoc       `json:"pacer"`
	LogLines LogLinesDoc    `json:"log_lines"`
	Counters []Counter      `json:"counters"`
	// Fabric says which of the NVLink fabric's daemons run
	// (absent where no GPU reports a fabric).
	Fabric []FabricDoc `json:"fabric_services,omitempty"`
}

// FabricDoc is one fabric daemon (a systemd unit) and whether a
// process runs it.
type FabricDoc struct {
	Name    string `json:"name"`
	Running bool   `json:"running"`
	PID     int    `json:"pid,omitempty"`
}

// Counter returns the value of the counter named name; ok is false when the
// daemon has no such counter (an older daemon's document, a renamed
// counter): absent, never 0.
func (h *HostDoc) Counter(name string) (v uint64, ok bool) { return counterValue(h.Counters, name) }

// CounterText is the counter named name as a view prints it: its value, or
// n/a when the daemon has no such counter.
func (h *HostDoc) CounterText(name string) string {
	if v, ok := h.Counter(name); ok {
		return strconv.FormatUint(v, 10)
	}
	return na
}

// PacerDoc is Pacer in seconds.
type PacerDoc struct {
	Level     int      `json:"level"`
	TickNVMLS *float64 `json:"tick_nvml_s"` // null until measured
	LastLateS *float64 `json:"last_gpu_late_s"`
}

// LogLinesDoc is LogLines.
type LogLinesDoc struct {
	Waiting int `json:"waiting"`
}

// CadenceDoc is Cadence in seconds.
type CadenceDoc struct {
	WindowS     float64 `json:"window_s"`
	MeanPeriodS float64 `json:"mean_period_s"`
	P99PeriodS  float64 `json:"p99_period_s"`
	MaxPeriodS  float64 `json:"max_period_s"`
}

// MissingBoardDoc is a board not enumerated now, with its repair action.
type MissingBoardDoc struct {
	Index  int       `json:"index"` // in the previous run
	UUID   string    `json:"uuid"`
	Action ActionDoc `json:"action"`
}

// IncidentDoc is a critical event.
type IncidentDoc struct {
	Time   time.Time `json:"time"`
	GPU    int       `json:"gpu"`
	Reason string    `json:"reason"`
}

// EventDoc is the last Xid or recovery action.
type EventDoc struct {
	Code uint64    `json:"code"`
	Time time.Time `json:"time"`
	Name string    `json:"name"`
	// AgeS is how long before the document's time it was, in seconds,
	// measured on the daemon's monotonic clock: right across a wall-clock
	// step, which Time is not. null from a daemon that does not send it.
	AgeS *float64 `json:"age_s"`
}

// OpEventsDoc is a GPU's operational events (driver R615+) since start.
type OpEventsDoc struct {
	Count      uint64            `json:"count"`
	BySeverity map[string]uint64 `json:"by_severity"` // every severity nvml.h names (0 when none), "other" for another
	Critical   uint64            `json:"critical"`    // fatal or uncontained: each raised an incident
	Last       *OpEventDoc       `json:"last"`        // null: none yet
}

// OpEventDoc is a GPU's last operational event.
type OpEventDoc struct {
	Time       time.Time `json:"time"` // when it was received
	AgeS       *float64  `json:"age_s"`
	Severity   string    `json:"severity"`   // a name of by_severity, or the number nvml.h does not name
	Category   uint32    `json:"category"`   // the category id
	Attributes string    `json:"attributes"` // "uncontained|latent", "none"
	Critical   string    `json:"critical"`   // "fatal", "uncontained", "fatal|uncontained", "" when neither
	LegacyXid  *uint64   `json:"legacy_xid"` // the Xid of its legacy-Xid context; null: none
}

// CPERDoc is a GPU's CPER records read since start (R610+).
type CPERDoc struct {
	Records    uint64            `json:"records"`
	BySeverity map[string]uint64 `json:"by_severity"` // recoverable, fatal, corrected, informational as seen
	Last       *CPERRecordDoc    `json:"last"`        // null: none yet
}

// CPERRecordDoc is one CPER record's header.
type CPERRecordDoc struct {
	ID       uint64     `json:"record_id"`
	Severity string     `json:"severity"`
	Time     time.Time  `json:"time"`        // when it was read
	Recorded *time.Time `json:"record_time"` // the record's own time stamp; null when it has none
}

func cperRecordDoc(r LastCPER) *CPERRecordDoc {
	d := &CPERRecordDoc{ID: r.ID, Severity: r.Severity, Time: r.Time}
	if !r.Recorded.IsZero() {
		t := r.Recorded
		d.Recorded = &t
	}
	return d
}

// FanDoc is one fan: its readings of reading.FanTable by Key (speed and
// target in percent, policy an NVML fan control policy: 0 auto, 1 manual),
// null when absent.
type FanDoc map[string]*uint32

// FlagDoc is one kind of anomaly flag on a GPU: how many rows carried it and
// when it was last seen.
type FlagDoc struct {
	Kind  string    `json:"kind"`
	Count uint64    `json:"count"`
	Last  time.Time `json:"last"`
	AgeS  *float64  `json:"age_s"` // Last's age, as EventDoc.AgeS
}

// GPUDoc is one GPU in Doc.
type GPUDoc struct {
	Index  int    `json:"index"`
	Name   string `json:"name"`
	BusID  string `json:"bus_id"`
	UUID   string `json:"uuid"`
	Serial string `json:"serial"`
	VBIOS  string `json:"vbios"`
	// GSPVersion and GSPMode are the GSP firmware's version and whether it
	// runs ("enabled", "disabled"), read at start; absent where the driver
	// does not say (before R510, or without GSP).
	GSPVersion string     `json:"gsp_firmware_version,omitempty"`
	GSPMode    string     `json:"gsp_firmware_mode,omitempty"`
	State      string     `json:"state"` // ok, hung, lost, failing, not started
	StateSince *time.Time `json:"state_since"`
	// HungS is how long the stuck call has lasted; Function names it.
	HungS    *float64 `json:"hung_s"`
	Function string   `json:"function,omitempty"`
	Error    string   `json:"error,omitempty"`

	SampleTime *time.Time `json:"sample_time"` // the readings are from this sample
	// Readings are the sample's readings of reading.Table that have a Key
	// (but the health counters, in Health), in the table's order: each is
	// its key at the GPU's level of the JSON (MarshalJSON), null when
	// absent. Reading gives one by key.
	Readings []Value  `json:"-"`
	Fans     []FanDoc `json:"fans"`
	// ThrottleS is the time spent in each reason since start, by name.
	ThrottleS map[string]float64 `json:"throttle_seconds"`

	Flags          []FlagDoc         `json:"flags"`
	LastXid        *EventDoc         `json:"last_xid"`
	Xids           map[string]uint64 `json:"xids"` // by code; "other" for codes beyond the table
	LastRecovery   *EventDoc         `json:"last_recovery_action"`
	OpEvents       OpEventsDoc       `json:"op_events"`
	CPER           CPERDoc           `json:"cper"`
	Incidents      uint64            `json:"incidents"`
	LastIncident   *IncidentDoc      `json:"last_incident"`
	NewestSnapshot string            `json:"newest_snapshot"`
	Processes      *ProcsDoc         `json:"processes"` // the slow tier's process read (procdoc.go)
	Samples        uint64            `json:"samples"`
	Failures       uint64            `json:"failures"`
	HungRows       uint64            `json:"hung_rows"`
	Health         *HealthDoc        `json:"health"`              // hardware health counters (healthdoc.go); null before the first sample
	FanGuard       *FanGuard         `json:"fan_guard,omitempty"` // with --fan-guard only
	Action         ActionDoc         `json:"action"`              // the repair action: always present ("none" with no reasons)
	// History is the GPU's recent readings (history.go), only when the
	// request asked for it (status history=DUR).
	History *HistoryDoc `json:"history,omitempty"`
}

// ActionDoc is a GPU's current repair action (package action).
type ActionDoc struct {
	Name    action.Action `json:"name"`    // "none", "watch", "reset_gpu", ... (action.Action's names)
	Reasons []string      `json:"reasons"` // why, the deciding one first; [] for none
	Since   *time.Time    `json:"since"`   // when it last changed; null: not since the daemon started
	Ack     *AckDoc       `json:"ack"`     // the last acknowledgement of the board; null: none
}

// AckDoc is the last `gpu-telemetry ack` of a board.
type AckDoc struct {
	Time   time.Time     `json:"time"`
	Action action.Action `json:"action"` // the action acknowledged
	Note   string        `json:"note"`
	By     string        `json:"by"`
}

func ptr[T any](o reading.Opt[T]) *T {
	if v, ok := o.Get(); ok {
		return &v
	}
	return nil
}

// optSecs is an optional duration in seconds, nil when absent.
func optSecs(o reading.Opt[time.Duration]) *float64 {
	if !o.OK {
		return nil
	}
	s := o.V.Seconds()
	return &s
}

// ageS is how long before now t was, in seconds, never negative. In the
// daemon both carry Go's monotonic reading (time.Now's, which a wall-clock
// step does not move), and the difference is taken on it.
func ageS(now, t time.Time) *float64 {
	s := max(now.Sub(t), 0).Seconds()
	return &s
}

// within reports whether an event at t, age seconds before the document's
// time now (nil: the document has no age, from an older daemon), was at
// most d before now. The age decides when there is one: wall times stamped
// before and after a wall-clock step cannot be compared.
func within(t time.Time, age *float64, now time.Time, d time.Duration) bool {
	if age != nil {
		return *age <= d.Seconds()
	}
	return !t.IsZero() && !t.Before(now.Add(-d))
}

// NewDoc builds the status document from a view.
func NewDoc(v View) Doc {
	h := v.Host
	now := h.Now
	d := Doc{SchemaVersion: SchemaVersion, Time: now, Host: HostDoc{
		Version: h.Version, Name: h.Identity.Host, MachineID: h.Identity.MachineID, BootID: h.Identity.BootID,
		Driver: h.System.DriverVersion, NVML: h.System.NVMLVersion, CUDA: h.System.CUDAVersion,
		Started: h.Start, UptimeS: now.Sub(h.Start).Seconds(), IntervalS: h.Interval.Seconds(), DeadlineS: h.Deadline.Seconds(),
		Cadence: CadenceDoc{WindowS: h.Cadence.Window.Seconds(),
			MeanPeriodS: h.Cadence.Mean.Seconds(), P99PeriodS: h.Cadence.P99.Seconds(), MaxPeriodS: h.Cadence.Max.Seconds()},
		RowsDropped10: h.RowsDroppedRecent, Disk: "ok", Kmsg: h.Kmsg, NVMLEvents: h.Events, Counters: h.Counters,
		Pacer:    PacerDoc{Level: h.Pacer.Level, TickNVMLS: optSecs(h.Pacer.TickNVML), LastLateS: optSecs(h.Pacer.LastLate)},
		LogLines: LogLinesDoc{Waiting: h.LogLines.Waiting},
	}}
	if h.DiskPaused {
		d.Host.Disk = "paused"
	}
	d.Host.GPUsMissing = h.GPUsMissing
	d.Host.MissingBoards = []MissingBoardDoc{}
	for _, b := range h.Missing {
		d.Host.MissingBoards = append(d.Host.MissingBoards, MissingBoardDoc{Index: b.Index, UUID: b.UUID,
			Action: ActionDoc{Name: b.Action.Action, Reasons: append([]string{}, b.Action.Reasons...)}})
	}
	if h.BERT != nil {
		d.Host.BERT = cperRecordDoc(*h.BERT)
	}
	for _, f := range h.Fabric {
		d.Host.Fabric = append(d.Host.Fabric, FabricDoc{Name: f.Name, Running: f.PID > 0, PID: f.PID})
	}
	if !h.LastIncident.Time.IsZero() {
		d.Host.LastIncident = &IncidentDoc{Time: h.LastIncident.Time, GPU: h.LastIncident.GPU, Reason: h.LastIncident.Reason}
	}
	d.GPUs = make([]GPUDoc, 0, len(v.GPUs))
	for i := range v.GPUs {
		d.GPUs = append(d.GPUs, gpuDoc(&v.GPUs[i], now, h.Mono))
	}
	return d
}

// gpuDoc is g's document at now, mono (Host.Now, Host.Mono).
func gpuDoc(g *GPU, now time.Time, mono time.Duration) GPUDoc {
	in := g.Info
	mode, _, _ := strings.Cut(in.GSPMode, " ") // "enabled (default)": whether it is the default is for the system information
	d := GPUDoc{Index: in.Index, Name: in.Name, BusID: in.BusID, UUID: in.UUID, Serial: in.Serial, VBIOS: in.VBIOS,
		GSPVersion: in.GSPVersion, GSPMode: mode,
		State: g.State.Kind.String(), Function: g.State.Function, Error: g.State.Err,
		Incidents: g.Incidents, NewestSnapshot: g.NewestSnapshot, Samples: g.Samples, Failures: g.Failures, HungRows: g.HungRows,
		Processes: procsDoc(g.Processes), Health: healthDoc(g), FanGuard: g.FanGuard}
	if !g.State.Since.IsZero() {
		t := g.State.Since
		d.StateSince = &t
	}
	if g.State.Kind == StateHung {
		h := g.State.HungFor(mono).Seconds()
		d.HungS = &h
	}
	s := &g.Sample
	if !s.Time.IsZero() {
		t := s.Time
		d.SampleTime = &t
		d.Readings = readings(s)
		if s.NumFans > 0 {
			d.Fans = make([]FanDoc, 0, min(s.NumFans, reading.MaxFans))
		}
		for i := range min(s.NumFans, reading.MaxFans) {
			f := make(FanDoc, len(reading.FanTable))
			for j := range reading.FanTable {
				fd := &reading.FanTable[j]
				f[fd.Key] = nil
				if v, ok := fd.Get(s, i); ok {
					f[fd.Key] = &v
				}
			}
			d.Fans = append(d.Fans, f)
		}
	}
	d.ThrottleS = make(map[string]float64, len(reading.ThrottleReasons))
	for i, r := range reading.ThrottleReasons {
		d.ThrottleS[r.Name] = g.ThrottleTime[i].Seconds()
	}
	for _, k := range reading.FlagKinds() {
		if n := g.FlagCount[k]; n > 0 {
			d.Flags = append(d.Flags, FlagDoc{Kind: k.Def().Name, Count: n, Last: g.FlagLast[k], AgeS: ageS(now, g.FlagLast[k])})
		}
	}
	if !g.LastXid.Time.IsZero() {
		d.LastXid = &EventDoc{Code: g.LastXid.Code, Time: g.LastXid.Time, Name: g.LastXid.Name, AgeS: ageS(now, g.LastXid.Time)}
	}
	d.Xids = map[string]uint64{}
	for _, x := range g.Xids {
		if x.Count > 0 {
			d.Xids[strconv.FormatUint(x.Code, 10)] = x.Count
		}
	}
	if g.XidsOther > 0 {
		d.Xids["other"] = g.XidsOther
	}
	if !g.LastRecovery.Time.IsZero() {
		d.LastRecovery = &EventDoc{Code: g.LastRecovery.Code, Time: g.LastRecovery.Time, Name: g.LastRecovery.Name,
			AgeS: ageS(now, g.LastRecovery.Time)}
	}
	d.OpEvents = opEventsDoc(g, now)
	d.CPER = CPERDoc{BySeverity: map[string]uint64{}}
	for _, c := range g.CPER {
		if c.Count > 0 {
			d.CPER.BySeverity[c.Name] = c.Count
			d.CPER.Records += c.Count
		}
	}
	if !g.LastCPER.Time.IsZero() {
		d.CPER.Last = cperRecordDoc(g.LastCPER)
	}
	if !g.LastIncident.IsZero() {
		d.LastIncident = &IncidentDoc{Time: g.LastIncident, GPU: in.Index, Reason: g.LastIncidentReason}
	}
	d.Action = ActionDoc{Name: g.Action.Action, Reasons: append([]string{}, g.Action.Reasons...)}
	if !g.ActionSince.IsZero() {
		t := g.ActionSince
		d.Action.Since = &t
	}
	if !g.Ack.Time.IsZero() {
		d.Action.Ack = &AckDoc{Time: g.Ack.Time, Action: g.Ack.Action, Note: g.Ack.Note, By: g.Ack.By}
	}
	return d
}

// opEventsDoc is the GPU's operational events.
func opEventsDoc(g *GPU, now time.Time) OpEventsDoc {
	d := OpEventsDoc{BySeverity: map[string]uint64{}, Critical: g.OpCritical}
	for i, n := range g.OpEvents {
		name := "other"
		if i < len(reading.OpSeverities) {
			name = reading.OpSeverities[i]
		} else if n == 0 {
			continue
		}
		d.BySeverity[name] = n
		d.Count += n
	}
	if l := g.LastOp; !l.Time.IsZero() {
		d.Last = &OpEventDoc{Time: l.Time, AgeS: ageS(now, l.Time), Severity: l.Severity, Category: l.Category,
			Attributes: l.Attributes, Critical: l.Critical}
		if l.HasXid {
			x := l.LegacyXid
			d.Last.LegacyXid = &x
		}
	}
	return d
}
