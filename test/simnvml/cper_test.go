package simnvml_test

import (
	"runtime"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpu-telemetry/gpu-telemetry/cper"
)

// readCPER makes one nvmlSystemGetCPER_v1 read of uuid's records as nvml.h
// says (size query, then a buffer that size), returning the record (nil:
// none left) and the handle after it.
func readCPER(t *testing.T, l nvml.Interface, uuid string, handle uint64) ([]byte, uint64) {
	t.Helper()
	var req nvml.GetCPER_v1
	req.Cursor.CperTypeMask = uint32(nvml.CPER_ACCESS_TYPE_GPU)
	for i := range len(uuid) {
		req.Cursor.Uuid[i] = int8(uuid[i])
	}
	req.Cursor.Handle = handle
	r := l.SystemGetCPER_v1(&req)
	if r == nvml.SUCCESS && req.BufferSize == 0 {
		return nil, handle
	}
	if r != nvml.ERROR_INSUFFICIENT_SIZE {
		t.Fatalf("size query: %v", r)
	}
	buf := make([]byte, req.BufferSize)
	var pin runtime.Pinner
	pin.Pin(&buf[0])
	defer pin.Unpin()
	req.Buffer = &buf[0]
	ok(t, l.SystemGetCPER_v1(&req), "read")
	return buf[:req.BufferSize], req.Cursor.Handle
}

// Records appear at their scenario time, one per call, of the GPU the cursor
// names; the handle resumes after those read; the records decode.
func TestCPERCursor(t *testing.T) {
	t.Parallel()
	simulate(t, opts{scenario: "gpus 2\ngpu 0 cper corrected section pcie\ngpu 1 cper\nat 0.5 gpu 0 cper fatal section memory\n"}, func(c clock, l nvml.Interface) {
		u0, r := dev(t, l, 0).GetUUID()
		ok(t, r, "uuid")
		rec, h := readCPER(t, l, u0, 0)
		d, err := cper.Parse(rec)
		if err != nil || d.ID != 1000 || d.Severity != cper.SevCorrected || d.SectionTypes() != "pcie" || d.Time.IsZero() {
			t.Fatalf("first record %+v %v", d, err)
		}
		if rec, h2 := readCPER(t, l, u0, h); rec != nil || h2 != h {
			t.Fatalf("a record before its time (handle %d)", h2)
		}
		time.Sleep(600 * time.Millisecond)
		rec, h = readCPER(t, l, u0, h)
		if d, err := cper.Parse(rec); err != nil || d.ID != 1002 || d.SectionTypes() != "platform_memory" {
			t.Fatalf("second record %+v %v", d, err)
		}
		if rec, _ := readCPER(t, l, u0, h); rec != nil {
			t.Fatal("a third record of GPU 0")
		}
		u1, _ := dev(t, l, 1).GetUUID()
		if rec, _ := readCPER(t, l, u1, 0); rec == nil {
			t.Fatal("GPU 1's record missing")
		} else if d, _ := cper.Parse(rec); d.ID != 1001 || d.Severity != cper.SevFatal {
			t.Fatalf("GPU 1's record %+v", d)
		}
	})
}
