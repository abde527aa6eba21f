package fakenvml

// #include <stdint.h>
import "C"

import (
	"runtime/cgo"
	"strings"
	"sync"
	"unsafe"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// The fake's C side, so that sampler/batch.c calls a fake as it calls the
// driver: a getter's C function is a trampoline of its shape bound to a
// slot that names it (Lib.Native), answered by fakeGetter; a device's C
// handle is a cgo.Handle of its Dev. Calls are counted and scripted under
// their NVML name less "nvmlDevice", as the Go methods' are.

func dev(h C.uintptr_t) *Dev { return cgo.Handle(h).Value().(*Dev) }

// slots names the getter each trampoline slot answers for.
var slots struct {
	sync.Mutex
	names []string
}

// slotOf returns the slot of the getter named, giving it one if it is new;
// -1 when every slot is taken.
func slotOf(name string) int {
	slots.Lock()
	defer slots.Unlock()
	for i, n := range slots.names {
		if n == name {
			return i
		}
	}
	if len(slots.names) >= numSlots {
		return -1
	}
	slots.names = append(slots.names, name)
	return len(slots.names) - 1
}

//export fake_nvmlDeviceGetFieldValues
func fake_nvmlDeviceGetFieldValues(h C.uintptr_t, n C.int, v unsafe.Pointer) C.int {
	return C.int(dev(h).GetFieldValues(unsafe.Slice((*nvml.FieldValue)(v), int(n))))
}

// fakeGetter answers the getter of slot for device h (Dev.call, Dev.getter).
//
//export fakeGetter
func fakeGetter(slot C.int, h C.uintptr_t, arg C.uint, out unsafe.Pointer) C.int {
	slots.Lock()
	fn := strings.TrimPrefix(slots.names[slot], "nvmlDevice")
	slots.Unlock()
	d := dev(h)
	if r := d.call(fn); r != nvml.SUCCESS {
		return C.int(r)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return C.int(d.getter(fn, uint32(arg), out))
}
