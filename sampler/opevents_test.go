package sampler

import (
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// TestDecodeOp: every field of an operational event, named where nvml.h
// names the value, a number where not; the legacy Xid of its first
// legacy-Xid context; what makes it critical; overflow.
func TestDecodeOp(t *testing.T) {
	base := opRecord{Severity: 20, LogLevel: 40, Category: 3, ModuleEventCode: 17, Scope: 1, Originator: 2, ModuleInstance: 4, Chiplet: 5,
		GPUInstance: opInstanceAny, ComputeInstance: opInstanceAny, GroupCursor: 9, GroupSize: 2, GroupIndex: 1, Sequence: 11, TraceID: 12,
		SourceModule: "GSP\x00\x00", CperSize: 300}
	for _, tc := range []struct {
		name     string
		mod      func(*opRecord)
		want     []string // fields (key=value) the line must hold
		absent   []string
		critical string
		overflow bool
		xid      uint32
		hasXid   bool
	}{
		{"named values", func(*opRecord) {}, []string{"severity=corrected", "log_level=warning", "category=3", "attributes=none",
			"group_attributes=none", "recovered=false", "module=GSP", "module_event_code=17", "scope=1", "originator=2", "module_instance=4",
			"chiplet=5", "group=9", "group_index=1", "group_size=2", "sequence=11", "trace=12", "cper_size=300", "contexts=0"},
			[]string{"gpu_instance", "compute_instance", "event_time", "context0"}, "", false, 0, false},
		{"unknown values are numbers", func(r *opRecord) { r.Severity, r.LogLevel, r.Attributes, r.GroupAttributes = 45, 35, 1<<9, 1<<5 },
			[]string{"severity=45", "log_level=35", "attributes=0x200", "group_attributes=0x20"}, nil, "", false, 0, false},
		{"every attribute", func(r *opRecord) { r.Attributes, r.GroupAttributes = 0x7f, 7 },
			[]string{"attributes=uncontained|latent|propagated|component_reset|threshold_exceeded|primary|overflow",
				"group_attributes=recovered|previous_error|simulated", "recovered=true"}, nil, "uncontained", true, 0, false},
		{"fatal and uncontained", func(r *opRecord) { r.Severity, r.Attributes = 40, 1 }, []string{"severity=fatal"}, nil, "fatal|uncontained", false, 0, false},
		{"MIG instance and time", func(r *opRecord) { r.GPUInstance, r.ComputeInstance, r.TimestampUsec = 1, 0, 1_780_000_000_123_456 },
			[]string{"gpu_instance=1", "compute_instance=0", "event_time=2026-05-28T20:26:40.123456Z"}, nil, "", false, 0, false},
		{"contexts", func(r *opRecord) {
			r.NContexts = 6
			r.Contexts = []opContext{
				{Type: 0, SourceType: 7, Size: 16, Version: 2},
				{Type: 1, SourceType: 3, Size: 4, Version: 1, HasXid: true, Xid: 79},
				{Type: 1, SourceType: 3, Size: 4, Version: 1, HasXid: true, Xid: 154},
				{Ret: 2},
			}
		}, []string{"contexts=6", "context0=unknown,source_type:7,size:16,version:2", "context1=legacy_xid,source_type:3,size:4,version:1,xid:79",
			"context2=legacy_xid,source_type:3,size:4,version:1,xid:154", "context3=unread,ret:2"}, []string{"context4"}, "", false, 79, true},
		{"a legacy-Xid context not decoded", func(r *opRecord) {
			r.NContexts, r.Contexts = 1, []opContext{{Type: 1, SourceType: 3, Size: 4, Version: 1}}
		}, []string{"context0=legacy_xid,source_type:3,size:4,version:1,xid:unread"}, nil, "", false, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := base
			tc.mod(&r)
			op, xid, ok := decodeOp(r)
			var kv []string
			for i := 0; i < len(op.Fields); i += 2 {
				kv = append(kv, op.Fields[i]+"="+op.Fields[i+1])
			}
			line := " " + strings.Join(kv, " ") + " "
			for _, w := range tc.want {
				if !strings.Contains(line, " "+w+" ") {
					t.Errorf("%s lacks %s", line, w)
				}
			}
			for _, a := range tc.absent {
				if strings.Contains(line, " "+a+"=") {
					t.Errorf("%s has %s", line, a)
				}
			}
			if op.Critical != tc.critical || op.Overflow != tc.overflow || xid != tc.xid || ok != tc.hasXid {
				t.Errorf("critical %q overflow %v xid %d %v, want %q %v %d %v", op.Critical, op.Overflow, xid, ok, tc.critical, tc.overflow, tc.xid, tc.hasXid)
			}
		})
	}
}

// TestMakeOpEvent: one with a legacy Xid is that Xid, from the operational
// events' source; one without is an EventOperational.
func TestMakeOpEvent(t *testing.T) {
	e := makeOpEvent(nil, 0, opRecord{Severity: 40, NContexts: 1, Contexts: []opContext{{Type: 1, HasXid: true, Xid: 79}}})
	if e.Kind != reading.EventXid || e.Data != 79 || e.Source != reading.SourceOpEvent || e.Op == nil || e.Op.Critical != "fatal" {
		t.Errorf("with Xid 79: %+v", e)
	}
	e = makeOpEvent(nil, 0, opRecord{Severity: 10, Category: 6})
	if e.Kind != reading.EventOperational || e.Data != 6 || e.Op == nil || e.Op.Critical != "" {
		t.Errorf("without: %+v", e)
	}
}

// opStream is a stream that says how its operational events went.
type opStream struct {
	*fakeStream
	err error
}

func (s opStream) opEvents() error { return s.err }

// TestLogOpEvents: each GPU's subscription is logged; a driver without
// operational events is said once, whatever the GPUs and reopenings.
func TestLogOpEvents(t *testing.T) {
	var buf strings.Builder
	log := slog.New(slog.NewTextHandler(&buf, nil))
	var h Host
	for gpu := range 3 {
		h.logOpEvents(log, gpu, opStream{newFakeStream(nil), errNoOpEvents})
	}
	h.logOpEvents(log, 0, newFakeStream(nil)) // a stream that cannot hold them: nothing
	if n := strings.Count(buf.String(), "driver lacks GPU operational events"); n != 1 || strings.Count(buf.String(), "\n") != 1 {
		t.Errorf("%d lines saying the driver lacks them, want the only line:\n%s", n, buf.String())
	}
	buf.Reset()
	h.logOpEvents(log, 1, opStream{newFakeStream(nil), nil})
	h.logOpEvents(log, 2, opStream{newFakeStream(nil), errors.New("nvmlEventSetRegisterGpuOperationalEvents_v1: Not Supported")})
	if s := buf.String(); !strings.Contains(s, `msg="GPU operational events subscribed" gpu=1`) || !strings.Contains(s, `msg="GPU operational events refused; Xids come from the NVML Xid events and the kernel log" gpu=2`) {
		t.Errorf("log:\n%s", s)
	}
}
