package sampler

import (
	"errors"
	"testing"
	"unsafe"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpu-telemetry/gpu-telemetry/sampler/fakenvml"
)

// cperDriver answers nvmlSystemGetCPER_v1 as nvml.h says, one record a
// call, the handle counting the records returned; fail, when set, answers
// the call numbered failAt.
type cperDriver struct {
	*fakenvml.Lib
	records [][]byte
	uuid    string
	calls   int
	failAt  int
	fail    nvml.Return
}

func (d *cperDriver) SystemGetCPER_v1(c *nvml.GetCPER_v1) nvml.Return {
	d.calls++
	var u []byte
	for _, b := range c.Cursor.Uuid {
		if b == 0 {
			break
		}
		u = append(u, byte(b))
	}
	d.uuid = string(u)
	if d.fail != nvml.SUCCESS && d.calls == d.failAt {
		return d.fail
	}
	if c.Cursor.CperTypeMask != uint32(nvml.CPER_ACCESS_TYPE_GPU) {
		return nvml.ERROR_INVALID_ARGUMENT
	}
	if c.Cursor.Handle >= uint64(len(d.records)) {
		c.BufferSize = 0
		return nvml.SUCCESS
	}
	r := d.records[c.Cursor.Handle]
	if c.Buffer == nil || int(c.BufferSize) < len(r) {
		c.BufferSize = uint32(len(r))
		return nvml.ERROR_INSUFFICIENT_SIZE
	}
	copy(unsafe.Slice(c.Buffer, c.BufferSize), r)
	c.BufferSize = uint32(len(r))
	c.Cursor.Handle++
	return nvml.SUCCESS
}

func TestReadCPER(t *testing.T) {
	recs := [][]byte{[]byte("first"), []byte("second!")}
	for _, tc := range []struct {
		name    string
		handle  uint64
		failAt  int
		fail    nvml.Return
		missing bool
		want    string
		next    uint64
		class   Class // of the error; ClassOK: none
		noCPER  bool
	}{
		{name: "from the start", want: "firstsecond!", next: 2},
		{name: "resumes at the handle", handle: 1, want: "second!", next: 2},
		{name: "nothing new", handle: 2, want: "", next: 2},
		{name: "fails after one record", failAt: 3, fail: nvml.ERROR_UNKNOWN, want: "first", next: 1, class: ClassOther},
		{name: "needs root", failAt: 1, fail: nvml.ERROR_NO_PERMISSION, next: 0, class: ClassNoPermission},
		{name: "old driver", missing: true, noCPER: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &cperDriver{Lib: &fakenvml.Lib{}, records: recs, failAt: tc.failAt, fail: tc.fail}
			h := &Host{lib: d}
			h.Syms = LookupSymbols(func(s string) error {
				if tc.missing && s == "nvmlSystemGetCPER_v1" {
					return nvml.ERROR_FUNCTION_NOT_FOUND
				}
				return nil
			})
			got, next, err := h.ReadCPER("GPU-x", tc.handle)
			if tc.noCPER {
				if !errors.Is(err, ErrNoCPER) || h.HasCPER() || d.calls != 0 {
					t.Fatalf("err %v, HasCPER %v, %d calls", err, h.HasCPER(), d.calls)
				}
				return
			}
			if string(got) != tc.want || next != tc.next {
				t.Errorf("got %q next %d, want %q next %d", got, next, tc.want, tc.next)
			}
			var ce *CallError
			switch {
			case tc.class == ClassOK && err != nil:
				t.Errorf("err %v", err)
			case tc.class != ClassOK && (!errors.As(err, &ce) || ce.Class != tc.class):
				t.Errorf("err %v, want class %v", err, tc.class)
			}
			if tc.class == ClassNoPermission && !ce.Unavailable() {
				t.Error("no permission is not Unavailable")
			}
			if d.uuid != "GPU-x" {
				t.Errorf("uuid filter %q", d.uuid)
			}
		})
	}
	// A library without the call (the fakes) has no CPER.
	if h := (&Host{lib: &fakenvml.Lib{}}); h.HasCPER() {
		t.Error("a library without SystemGetCPER_v1 has CPER")
	}
}
