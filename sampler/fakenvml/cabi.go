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

// The fake's C side, so that the sampler's one executor (sampler/batch.c)
// calls a fake as it calls the driver: nvmlDeviceGetFieldValues, and any
// getter, by its name and shape. A getter's C function is a trampoline of
// its shape bound to a slot that names the function (Lib.Native); every
// trampoline calls fakeGetter, which answers from the Dev (Dev.getter). A
// device's C handle is a cgo.Handle of its Dev. Each call is counted,
// scripted and made to block under its NVML name less "nvmlDevice"
// (Dev.call), as the Go methods' calls are.

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

// fakeGetter answers the getter of slot for device h (its argument arg;
// the value goes to out): the call is counted and scripted (Dev.call),
// then answered by Dev.getter.
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
