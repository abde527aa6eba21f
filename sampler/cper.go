package sampler

import (
	"errors"
	"runtime"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// FnCPER reads the driver's Common Platform Error Records (R610+).
var FnCPER = fnOf("nvmlSystemGetCPER_v1")

// cperLib is go-nvml's CPER call; the fakes lack it (no records).
type cperLib interface {
	SystemGetCPER_v1(*nvml.GetCPER_v1) nvml.Return
}

// ErrNoCPER means the driver has no nvmlSystemGetCPER_v1 (older than R610).
var ErrNoCPER = errors.New("the driver lacks nvmlSystemGetCPER_v1 (R610+)")

// maxCPERCalls bounds the calls of one read; a read that stops there
// resumes from its handle next time.
const maxCPERCalls = 64

// HasCPER reports whether the driver can return CPER records.
func (h *Host) HasCPER() bool {
	_, ok := h.lib.(cperLib)
	return ok && h.Syms.Has(FnCPER)
}

// ReadCPER reads the GPU uuid's records after handle (0: from the first,
// NVML_CPER_CURSOR_HANDLE_INIT) as nvml.h says: a size query, then a call
// with a buffer that size, until the driver says no more (bufferSize 0). It
// returns the records laid end to end and the handle after the last whole
// call: on an error, what was read before it, and that call's handle, so
// the caller resumes where it stopped. It is not bounded: the caller runs
// it with a deadline.
func (h *Host) ReadCPER(uuid string, handle uint64) (records []byte, next uint64, err error) {
	if !h.HasCPER() {
		return nil, handle, ErrNoCPER
	}
	lib := h.lib.(cperLib)
	var req nvml.GetCPER_v1
	req.Cursor.CperTypeMask = uint32(nvml.CPER_ACCESS_TYPE_GPU)
	for i := 0; i < len(uuid) && i < len(req.Cursor.Uuid)-1; i++ {
		req.Cursor.Uuid[i] = int8(uuid[i])
	}
	fail := func(ret nvml.Return) error { return &CallError{Fn: FnCPER, Class: Classify(ret), Text: retText(ret)} }
	for range maxCPERCalls {
		req.Cursor.Handle, req.Buffer, req.BufferSize = handle, nil, 0
		ret := lib.SystemGetCPER_v1(&req)
		if ret == nvml.SUCCESS && req.BufferSize == 0 {
			return records, handle, nil
		}
		if ret != nvml.ERROR_INSUFFICIENT_SIZE {
			return records, handle, fail(ret)
		}
		buf := make([]byte, req.BufferSize)
		req.Cursor.Handle, req.BufferSize = handle, uint32(len(buf))
		// The struct handed to C holds a pointer to buf: pinned, as cgo's
		// pointer rules ask.
		var pin runtime.Pinner
		pin.Pin(&buf[0])
		req.Buffer = &buf[0]
		ret = lib.SystemGetCPER_v1(&req)
		pin.Unpin()
		req.Buffer = nil
		if ret != nvml.SUCCESS {
			return records, handle, fail(ret)
		}
		if req.BufferSize == 0 {
			return records, req.Cursor.Handle, nil
		}
		records = append(records, buf[:min(int(req.BufferSize), len(buf))]...)
		handle = req.Cursor.Handle
	}
	return records, handle, nil
}
