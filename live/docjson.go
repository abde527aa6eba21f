package live

import (
	"math"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"
)

// AppendJSON appends the document as encoding/json encodes it (the same
// bytes: TestAppendJSONMatchesEncodingJSON compares them), without
// reflection. The control socket answers every status request with a fresh
// document; encoding/json's reflection over it was two thirds of a status
// answer's CPU in the daemon (0.5-1 ms once a second on a cold cache), for a
// logger whose whole budget is a few ms a second. A NaN or infinite number,
// which encoding/json refuses, is written as null.
//
// A field added to Doc must be added here too: TestAppendJSONWritesEveryField
// fills every field of a document by reflection (omitempty ones included)
// and fails until it is; FuzzJStr and FuzzJFloat hold the string and number
// encoders to encoding/json.
func (d *Doc) AppendJSON(b []byte) []byte {
	b = append(b, `{"schema_version":`...)
	b = strconv.AppendInt(b, int64(d.SchemaVersion), 10)
	b = append(b, `,"time":`...)
	b = jTime(b, d.Time)
	b = append(b, `,"host":`...)
	b = d.Host.appendJSON(b)
	b = append(b, `,"gpus":`...)
	b = jArray(b, d.GPUs, func(b []byte, g *GPUDoc) []byte { return g.appendJSON(b) })
	return append(b, '}')
}

func (h *HostDoc) appendJSON(b []byte) []byte {
	b = append(b, `{"version":`...)
	b = jStr(b, h.Version)
	b = append(b, `,"name":`...)
	b = jStr(b, h.Name)
	b = append(b, `,"machine_id":`...)
	b = jStr(b, h.MachineID)
	b = append(b, `,"boot_id":`...)
	b = jStr(b, h.BootID)
	b = append(b, `,"driver":`...)
	b = jStr(b, h.Driver)
	b = append(b, `,"nvml":`...)
	b = jStr(b, h.NVML)
	b = append(b, `,"cuda":`...)
	b = jStr(b, h.CUDA)
	b = append(b, `,"started":`...)
	b = jTime(b, h.Started)
	b = append(b, `,"uptime_s":`...)
	b = jFloat(b, h.UptimeS)
	b = append(b, `,"interval_s":`...)
	b = jFloat(b, h.IntervalS)
	b = append(b, `,"deadline_s":`...)
	b = jFloat(b, h.DeadlineS)
	c := &h.Cadence
	b = append(b, `,"cadence":{"window_s":`...)
	b = jFloat(b, c.WindowS)
	b = append(b, `,"mean_period_s":`...)
	b = jFloat(b, c.MeanPeriodS)
	b = append(b, `,"p99_period_s":`...)
	b = jFloat(b, c.P99PeriodS)
	b = append(b, `,"max_period_s":`...)
	b = jFloat(b, c.MaxPeriodS)
	b = append(b, `},"rows_dropped_10m":`...)
	b = strconv.AppendUint(b, h.RowsDropped10, 10)
	b = append(b, `,"disk":`...)
	b = jStr(b, h.Disk)
	b = append(b, `,"kmsg":`...)
	b = jStr(b, h.Kmsg)
	b = append(b, `,"nvml_events":`...)
	b = jStr(b, h.NVMLEvents)
	b = append(b, `,"last_incident":`...)
	b = h.LastIncident.appendJSON(b)
	p := &h.Pacer
	b = append(b, `,"pacer":{"level":`...)
	b = strconv.AppendInt(b, int64(p.Level), 10)
	b = append(b, `,"tick_nvml_s":`...)
	b = jFloatPtr(b, p.TickNVMLS)
	b = append(b, `,"last_gpu_late_s":`...)
	b = jFloatPtr(b, p.LastLateS)
	b = append(b, `},"log_lines":{"waiting":`...)
	b = strconv.AppendInt(b, int64(h.LogLines.Waiting), 10)
	b = append(b, `},"counters":`...)
	b = jArray(b, h.Counters, func(b []byte, k *Counter) []byte {
		b = append(b, `{"name":`...)
		b = jStr(b, k.Name)
		b = append(b, `,"help":`...)
		b = jStr(b, k.Help)
		b = append(b, `,"value":`...)
		b = strconv.AppendUint(b, k.Value, 10)
		b = append(b, `,"loss":`...)
		b = strconv.AppendBool(b, k.Loss)
		return append(b, '}')
	})
	return append(b, '}')
}

func (in *IncidentDoc) appendJSON(b []byte) []byte {
	if in == nil {
		return append(b, "null"...)
	}
	b = append(b, `{"time":`...)
	b = jTime(b, in.Time)
	b = append(b, `,"gpu":`...)
	b = strconv.AppendInt(b, int64(in.GPU), 10)
	b = append(b, `,"reason":`...)
	b = jStr(b, in.Reason)
	return append(b, '}')
}

func (e *EventDoc) appendJSON(b []byte) []byte {
	if e == nil {
		return append(b, "null"...)
	}
	b = append(b, `{"code":`...)
	b = strconv.AppendUint(b, e.Code, 10)
	b = append(b, `,"time":`...)
	b = jTime(b, e.Time)
	b = append(b, `,"name":`...)
	b = jStr(b, e.Name)
	b = append(b, `,"age_s":`...)
	b = jFloatPtr(b, e.AgeS)
	return append(b, '}')
}

func (g *GPUDoc) appendJSON(b []byte) []byte {
	b = append(b, `{"index":`...)
	b = strconv.AppendInt(b, int64(g.Index), 10)
	b = append(b, `,"name":`...)
	b = jStr(b, g.Name)
	b = append(b, `,"bus_id":`...)
	b = jStr(b, g.BusID)
	b = append(b, `,"uuid":`...)
	b = jStr(b, g.UUID)
	b = append(b, `,"serial":`...)
	b = jStr(b, g.Serial)
	b = append(b, `,"vbios":`...)
	b = jStr(b, g.VBIOS)
	b = append(b, `,"state":`...)
	b = jStr(b, g.State)
	b = append(b, `,"state_since":`...)
	b = jTimePtr(b, g.StateSince)
	b = append(b, `,"hung_s":`...)
	b = jFloatPtr(b, g.HungS)
	b = jOmitEmpty(b, `,"function":`, g.Function)
	b = jOmitEmpty(b, `,"error":`, g.Error)
	b = append(b, `,"sample_time":`...)
	b = jTimePtr(b, g.SampleTime)
	b = append(b, `,"temperature_c":`...)
	b = jU32(b, g.TempC)
	b = append(b, `,"memory_temperature_c":`...)
	b = jU32(b, g.MemTempC)
	b = append(b, `,"fans":`...)
	b = jArray(b, g.Fans, func(b []byte, f *FanDoc) []byte {
		b = append(b, `{"speed_pct":`...)
		b = jU32(b, f.Speed)
		b = append(b, `,"target_pct":`...)
		b = jU32(b, f.Target)
		return append(b, '}')
	})
	for _, f := range [...]struct {
		key string
		v   *float64
	}{{`,"power_w":`, g.PowerW}, {`,"power_limit_w":`, g.PowerLimitW}, {`,"enforced_limit_w":`, g.EnforcedLimitW}, {`,"energy_j":`, g.EnergyJ}} {
		b = append(b, f.key...)
		b = jFloatPtr(b, f.v)
	}
	for _, f := range [...]struct {
		key string
		v   *uint32
	}{{`,"graphics_clock_mhz":`, g.GraphicsMHz}, {`,"sm_clock_mhz":`, g.SMMHz}, {`,"memory_clock_mhz":`, g.MemMHz},
		{`,"gpu_util_pct":`, g.GPUUtil}, {`,"memory_util_pct":`, g.MemUtil}, {`,"encoder_util_pct":`, g.EncUtil}, {`,"decoder_util_pct":`, g.DecUtil}} {
		b = append(b, f.key...)
		b = jU32(b, f.v)
	}
	b = append(b, `,"memory_used_bytes":`...)
	b = jU64(b, g.MemUsedBytes)
	b = append(b, `,"memory_total_bytes":`...)
	b = jU64(b, g.MemTotalBytes)
	b = append(b, `,"pstate":`...)
	b = jU32(b, g.PState)
	b = append(b, `,"pcie_gen":`...)
	b = jU32(b, g.PCIeGen)
	b = append(b, `,"pcie_width":`...)
	b = jU32(b, g.PCIeWidth)
	b = append(b, `,"pcie_replay":`...)
	b = jU64(b, g.PCIeReplay)
	b = append(b, `,"throttle_reasons":`...)
	b = jArray(b, g.ThrottleReasons, func(b []byte, r *string) []byte { return jStr(b, *r) })
	b = append(b, `,"throttle_seconds":`...)
	b = jMap(b, g.ThrottleS, jFloat)
	b = append(b, `,"flags":`...)
	b = jArray(b, g.Flags, func(b []byte, f *FlagDoc) []byte {
		b = append(b, `{"kind":`...)
		b = jStr(b, f.Kind)
		b = append(b, `,"count":`...)
		b = strconv.AppendUint(b, f.Count, 10)
		b = append(b, `,"last":`...)
		b = jTime(b, f.Last)
		b = append(b, `,"age_s":`...)
		b = jFloatPtr(b, f.AgeS)
		return append(b, '}')
	})
	b = append(b, `,"last_xid":`...)
	b = g.LastXid.appendJSON(b)
	b = append(b, `,"xids":`...)
	b = jMap(b, g.Xids, func(b []byte, v uint64) []byte { return strconv.AppendUint(b, v, 10) })
	b = append(b, `,"last_recovery_action":`...)
	b = g.LastRecovery.appendJSON(b)
	b = append(b, `,"incidents":`...)
	b = strconv.AppendUint(b, g.Incidents, 10)
	b = append(b, `,"last_incident":`...)
	b = g.LastIncident.appendJSON(b)
	b = append(b, `,"newest_snapshot":`...)
	b = jStr(b, g.NewestSnapshot)
	b = append(b, `,"processes":`...)
	b = g.Processes.appendJSON(b)
	b = append(b, `,"samples":`...)
	b = strconv.AppendUint(b, g.Samples, 10)
	b = append(b, `,"failures":`...)
	b = strconv.AppendUint(b, g.Failures, 10)
	b = append(b, `,"hung_rows":`...)
	b = strconv.AppendUint(b, g.HungRows, 10)
	return append(b, '}')
}

func (p *ProcsDoc) appendJSON(b []byte) []byte {
	if p == nil {
		return append(b, "null"...)
	}
	b = append(b, `{"status":`...)
	b = jStr(b, p.Status)
	b = jOmitEmpty(b, `,"error":`, p.Error)
	b = append(b, `,"read_at":`...)
	b = jTimePtr(b, p.ReadAt)
	b = append(b, `,"list":`...)
	b = jArray(b, p.List, func(b []byte, r *ProcDoc) []byte {
		b = append(b, `{"pid":`...)
		b = strconv.AppendUint(b, uint64(r.PID), 10)
		b = append(b, `,"type":`...)
		b = jStr(b, r.Type)
		b = append(b, `,"memory_bytes":`...)
		b = jU64(b, r.MemBytes)
		b = append(b, `,"sm_util_pct":`...)
		b = jU32(b, r.SMUtil)
		b = append(b, `,"memory_util_pct":`...)
		b = jU32(b, r.MemUtil)
		b = append(b, `,"origin":`...)
		b = jStr(b, r.Origin)
		b = jOmitEmpty(b, `,"name":`, r.Name)
		b = jOmitEmpty(b, `,"cmdline":`, r.Cmdline)
		return append(b, '}')
	})
	return append(b, '}')
}

// jArray writes a slice as encoding/json does: null when nil, else its
// elements, each written by elem, between brackets.
func jArray[T any](b []byte, s []T, elem func([]byte, *T) []byte) []byte {
	if s == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i := range s {
		if i > 0 {
			b = append(b, ',')
		}
		b = elem(b, &s[i])
	}
	return append(b, ']')
}

// jOmitEmpty writes the key (`,"name":`) and the string unless the string is
// empty, as encoding/json does for a field tagged omitempty.
func jOmitEmpty(b []byte, key, s string) []byte {
	if s == "" {
		return b
	}
	return jStr(append(b, key...), s)
}

// jMap writes a map with its keys sorted, as encoding/json does. The
// maps are small (a dozen keys): the key slice lives on the stack.
func jMap[V any](b []byte, m map[string]V, val func([]byte, V) []byte) []byte {
	if m == nil {
		return append(b, "null"...)
	}
	var arr [32]string
	keys := arr[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = jStr(b, k)
		b = append(b, ':')
		b = val(b, m[k])
	}
	return append(b, '}')
}

func jU32(b []byte, p *uint32) []byte {
	if p == nil {
		return append(b, "null"...)
	}
	return strconv.AppendUint(b, uint64(*p), 10)
}

func jU64(b []byte, p *uint64) []byte {
	if p == nil {
		return append(b, "null"...)
	}
	return strconv.AppendUint(b, *p, 10)
}

func jFloatPtr(b []byte, p *float64) []byte {
	if p == nil {
		return append(b, "null"...)
	}
	return jFloat(b, *p)
}

// jFloat formats a number as encoding/json does (shortest form, exponent
// only below 1e-6 or from 1e21, "e-07" written "e-7").
func jFloat(b []byte, f float64) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(b, "null"...)
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

func jTimePtr(b []byte, t *time.Time) []byte {
	if t == nil {
		return append(b, "null"...)
	}
	return jTime(b, *t)
}

// jTime writes a time as time.Time's MarshalJSON does.
func jTime(b []byte, t time.Time) []byte {
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"')
}

const hexDigits = "0123456789abcdef"

// jStr writes a string as encoding/json does with HTML escaping (its
// default): quotes, backslashes and control characters escaped, <, > and &
// as \u003c, \u003e and \u0026, invalid UTF-8 as U+FFFD, U+2028 and U+2029
// escaped.
func jStr(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
