package sampler

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// GPU Operational Events (driver R615+: nvmlEventSetRegisterGpuOperationalEvents_v1,
// nvmlEventSetWait_v3). The event thread subscribes each GPU where the
// driver has them (evthread.c) and hands over an opRecord; decodeOp names
// every value nvml.h names and writes the rest as numbers: NVML says newer
// drivers may send values this header does not name.

// opRecord is one operational event as the event thread read it.
type opRecord struct {
	Severity, LogLevel, Category, Attributes, GroupAttributes   uint32
	ModuleEventCode, Scope, Originator, ModuleInstance, Chiplet uint32
	GPUInstance, ComputeInstance, CperSize                      uint32
	GroupSize, GroupIndex                                       uint8
	GroupCursor, Sequence, TimestampUsec, TraceID               uint64
	SourceModule                                                string
	// NContexts is how many context records the event had; Contexts are
	// those read (at most the thread's GT_EV_MAXCTX).
	NContexts uint32
	Contexts  []opContext
}

// opContext is one context record: ret is the info call's result (the rest
// is valid only when it succeeded).
type opContext struct {
	Ret                    int32
	Type, SourceType, Size uint32
	Version                uint16
	HasXid                 bool
	Xid                    uint32
}

// nvml.h's values (nvmlOperationalEventSeverity_t,
// nvmlGpuOperationalEventLogLevel_t, NVML_OPERATIONAL_EVENT_ATTR_*,
// NVML_OPERATIONAL_EVENT_GROUP_ATTR_*, nvmlGpuOperationalEventContextType_t).
const (
	opSeverityFatal    = 40
	opAttrUncontained  = 1 << 0
	opAttrOverflow     = 1 << 6
	opContextLegacyXid = 1
	opInstanceAny      = 0xFFFFFFFF // NVML_GPU_INSTANCE_ID_ANY, NVML_COMPUTE_INSTANCE_ID_ANY
)

var (
	opSeverities = map[uint32]string{10: "informational", 20: "corrected", 30: "recoverable", 40: "fatal"}
	opLogLevels  = map[uint32]string{10: "telemetry", 20: "diag", 30: "notice", 40: "warning", 50: "error"}
	// The attribute bits, in bit order.
	opAttrs      = []string{"uncontained", "latent", "propagated", "component_reset", "threshold_exceeded", "primary", "overflow"}
	opGroupAttrs = []string{"recovered", "previous_error", "simulated"}
	opContexts   = map[uint32]string{0: "unknown", 1: "legacy_xid"}
)

// named is names[v], or v as a number when NVML's header does not name it.
func named(names map[uint32]string, v uint32) string {
	if n, ok := names[v]; ok {
		return n
	}
	return strconv.FormatUint(uint64(v), 10)
}

// bitNames joins the names of mask's bits (names[i] is bit i's) with "|",
// a bit without a name as its hex value; "none" for no bit.
func bitNames(names []string, mask uint32) string {
	if mask == 0 {
		return "none"
	}
	var out []string
	for bit := range 32 {
		if mask&(1<<bit) == 0 {
			continue
		}
		if bit < len(names) {
			out = append(out, names[bit])
		} else {
			out = append(out, fmt.Sprintf("0x%x", uint32(1)<<bit))
		}
	}
	return strings.Join(out, "|")
}

// decodeOp decodes r, and returns the legacy Xid of its first legacy-Xid
// context (ok false: none).
func decodeOp(r opRecord) (op reading.OpEvent, xid uint32, ok bool) {
	u := func(v uint32) string { return strconv.FormatUint(uint64(v), 10) }
	u64 := func(v uint64) string { return strconv.FormatUint(v, 10) }
	f := []string{
		"severity", named(opSeverities, r.Severity),
		"log_level", named(opLogLevels, r.LogLevel),
		"category", u(r.Category),
		"attributes", bitNames(opAttrs, r.Attributes),
		"group_attributes", bitNames(opGroupAttrs, r.GroupAttributes),
		// recovered: the group's condition has been recovered from
		// (NVML_OPERATIONAL_EVENT_GROUP_ATTR_RECOVERED).
		"recovered", strconv.FormatBool(r.GroupAttributes&1 != 0),
		"module", strings.TrimRight(r.SourceModule, "\x00"),
		"module_event_code", u(r.ModuleEventCode),
		"scope", u(r.Scope),
		"originator", u(r.Originator),
		"module_instance", u(r.ModuleInstance),
		"chiplet", u(r.Chiplet),
	}
	if r.GPUInstance != opInstanceAny {
		f = append(f, "gpu_instance", u(r.GPUInstance))
	}
	if r.ComputeInstance != opInstanceAny {
		f = append(f, "compute_instance", u(r.ComputeInstance))
	}
	f = append(f,
		"group", u64(r.GroupCursor),
		"group_index", strconv.Itoa(int(r.GroupIndex)),
		"group_size", strconv.Itoa(int(r.GroupSize)),
		"sequence", u64(r.Sequence),
		"trace", u64(r.TraceID),
	)
	if r.TimestampUsec != 0 {
		f = append(f, "event_time", time.UnixMicro(int64(r.TimestampUsec)).UTC().Format("2006-01-02T15:04:05.000000Z"))
	}
	f = append(f, "cper_size", u(r.CperSize), "contexts", u(r.NContexts))
	for i, c := range r.Contexts {
		var v string
		if c.Ret != 0 {
			v = "unread,ret:" + strconv.Itoa(int(c.Ret)) // nvmlEventSetGetContextInfo_v1's code
		} else {
			v = fmt.Sprintf("%s,source_type:%d,size:%d,version:%d", named(opContexts, c.Type), c.SourceType, c.Size, c.Version)
			if c.HasXid {
				v += ",xid:" + u(c.Xid)
				if !ok {
					xid, ok = c.Xid, true
				}
			} else if c.Type == opContextLegacyXid {
				v += ",xid:unread"
			}
		}
		f = append(f, "context"+strconv.Itoa(i), v)
	}
	var why []string
	if r.Severity == opSeverityFatal {
		why = append(why, "fatal")
	}
	if r.Attributes&opAttrUncontained != 0 {
		why = append(why, "uncontained")
	}
	return reading.OpEvent{Fields: f, Critical: strings.Join(why, "|"), Overflow: r.Attributes&opAttrOverflow != 0}, xid, ok
}

// makeOpEvent is makeEvent for an operational event of the GPU with index
// idx: an Xid (the same incident as that Xid from the other sources) when
// it carries a legacy Xid, else an EventOperational.
func makeOpEvent(gpus []*GPU, idx int, r opRecord) reading.Event {
	ev := makeEvent(gpus, idx, 0, 0)
	op, xid, ok := decodeOp(r)
	ev.Source, ev.Op, ev.Kind, ev.Data = reading.SourceOpEvent, &op, reading.EventOperational, uint64(r.Category)
	if ok {
		ev.Kind, ev.Data = reading.EventXid, uint64(xid)
	}
	return ev
}
