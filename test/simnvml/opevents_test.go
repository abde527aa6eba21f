package simnvml_test

import (
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// TestOperationalEvents: an "opevent" reaches a set that subscribed its GPU
// by UUID through nvmlEventSetWait_v3 with every field the scenario set, its
// context records readable until the next wait (a legacy Xid decoded); the
// same wait delivers the event bits, naming the GPU by UUID; a v1 wait skips
// the operational event.
func TestOperationalEvents(t *testing.T) {
	t.Parallel()
	scn := "gpus 1\n" +
		"at 0.3 gpu 0 opevent severity fatal level error category 7 attrs uncontained|overflow group recovered code 12 module FBHUB mig 2 1 xid 79 context 9\n" +
		"at 0.3 gpu 0 xid 13\n"
	simulate(t, opts{scenario: scn}, func(c clock, l nvml.Interface) {
		d := dev(t, l, 0)
		uuid, r := d.GetUUID()
		ok(t, r, "uuid")
		set, r := l.EventSetCreate()
		ok(t, r, "create")
		ok(t, d.RegisterEvents(nvml.EventTypeXidCriticalError, set), "register")
		var cfg nvml.GpuOperationalEventConfig_v1
		for i := range len(uuid) {
			cfg.Uuid[i] = int8(uuid[i])
		}
		ok(t, l.EventSetRegisterGpuOperationalEvents_v1(set, &cfg), "subscribe")
		old, r := l.EventSetCreate()
		ok(t, r, "create v1 set")
		ok(t, d.RegisterEvents(nvml.EventTypeXidCriticalError, old), "register v1 set")
		ok(t, l.EventSetRegisterGpuOperationalEvents_v1(old, &cfg), "subscribe v1 set")

		op, r := l.EventSetWait_v3(set, 5000)
		ok(t, r, "wait op")
		str := func(b []int8) string {
			var s []byte
			for _, c := range b {
				if c == 0 {
					break
				}
				s = append(s, byte(c))
			}
			return string(s)
		}
		if op.DataType != 1 || str(op.Uuid[:]) != uuid || str(op.SourceModule[:]) != "FBHUB" || op.Severity != 40 || op.LogLevel != 50 ||
			op.CategoryId != 7 || op.Attributes != 0x41 || op.GroupAttributes != 1 || op.ModuleEventCode != 12 ||
			op.GpuInstanceId != 2 || op.ComputeInstanceId != 1 || op.EventType != 0 || op.TimestampUsec == 0 {
			t.Fatalf("operational event %+v", op)
		}
		n, r := l.EventSetGetContextCount_v1(set)
		ok(t, r, "context count")
		if n.Count != 2 {
			t.Fatalf("%d contexts, want 2", n.Count)
		}
		i0, r := l.EventSetGetContextInfo_v1(set, 0)
		ok(t, r, "context 0")
		i1, r := l.EventSetGetContextInfo_v1(set, 1)
		ok(t, r, "context 1")
		if i0.NvmlGpuOperationalEventContextType != 1 || i1.NvmlGpuOperationalEventContextType != 0 || i1.SourceEventContextType != 9 {
			t.Errorf("contexts %+v %+v", i0, i1)
		}
		x, r := l.EventSetGetGpuOperationalEventContextLegacyXid_v1(set, 0)
		ok(t, r, "legacy Xid")
		if x != 79 {
			t.Errorf("legacy Xid %d, want 79", x)
		}
		_, r = l.EventSetGetGpuOperationalEventContextLegacyXid_v1(set, 1)
		wantRet(t, r, nvml.ERROR_NOT_FOUND, "legacy Xid of an opaque context")
		_, r = l.EventSetGetContextInfo_v1(set, 2)
		wantRet(t, r, nvml.ERROR_INVALID_ARGUMENT, "context out of range")

		bit, r := l.EventSetWait_v3(set, 5000)
		ok(t, r, "wait bit")
		if bit.DataType != 0 || bit.EventType != nvml.EventTypeXidCriticalError || bit.EventData != 13 || str(bit.Uuid[:]) != uuid {
			t.Errorf("event bit %+v", bit)
		}
		n, r = l.EventSetGetContextCount_v1(set)
		ok(t, r, "context count of an event bit")
		if n.Count != 0 {
			t.Errorf("an event bit with %d contexts", n.Count)
		}

		e, r := old.Wait(5000)
		ok(t, r, "v1 wait")
		if e.EventType != nvml.EventTypeXidCriticalError || e.EventData != 13 {
			t.Errorf("v1 wait got %+v, want the Xid 13 (the operational event skipped)", e)
		}
	})
}
