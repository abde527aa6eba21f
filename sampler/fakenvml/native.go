package fakenvml

/*
#cgo LDFLAGS: -ldl -Wl,--export-dynamic
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>

// The binary's own symbols (the exported C functions of cabi.go).
static void *fake_sym(const char *name) { return dlsym(RTLD_DEFAULT, name); }

// The getter trampolines: for each slot, one function per shape (batch.h's
// GT_SHAPE_* order), each answering through fakeGetter as the getter the
// slot names.
extern int fakeGetter(int slot, uintptr_t dev, unsigned int arg, void *out);
#define NSLOTS 48
#define SLOTS X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13) X(14) X(15) X(16) X(17) X(18) X(19) X(20) X(21) X(22) X(23) X(24) X(25) X(26) X(27) X(28) X(29) X(30) X(31) X(32) X(33) X(34) X(35) X(36) X(37) X(38) X(39) X(40) X(41) X(42) X(43) X(44) X(45) X(46) X(47)
#define X(i) \
	static int out_##i(uintptr_t d, void *o) { return fakeGetter(i, d, 0, o); } \
	static int arg_out_##i(uintptr_t d, unsigned int a, void *o) { return fakeGetter(i, d, a, o); } \
	static int out_out_##i(uintptr_t d, void *o, void *o2) { (void)o2; return fakeGetter(i, d, 0, o); }
SLOTS
#undef X
#define X(i) { out_##i, arg_out_##i, out_out_##i },
static void *const tr[NSLOTS][3] = { SLOTS };
#undef X
static void *trampoline(int shape, int slot) { return tr[slot][shape]; }
*/
import "C"

import (
	"runtime/cgo"
	"unsafe"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
	"github.com/gpu-telemetry/gpu-telemetry/sampler/nvmlapi"
)

// numSlots is how many getters the fake can answer for.
const numSlots = C.NSLOTS

// Native implements nvmlapi.Library: the fake's C functions (none for a
// Missing symbol, as the driver) and handles, one cgo.Handle a Dev, kept
// for the test binary's life.
func (l *Lib) Native() nvmlapi.Native {
	return nvmlapi.Native{
		Symbol: func(name string, shape reading.Shape) unsafe.Pointer {
			if l.Missing[name] {
				return nil
			}
			if name == "nvmlDeviceGetFieldValues" {
				s := C.CString("fake_" + name)
				defer C.free(unsafe.Pointer(s))
				return C.fake_sym(s)
			}
			slot := slotOf(name)
			if slot < 0 {
				panic("fakenvml: more getters than numSlots")
			}
			return C.trampoline(C.int(shape), C.int(slot))
		},
		Handle: func(i int) uintptr {
			if i < 0 || i >= len(l.Devs) {
				return 0
			}
			return l.dev(i).handle()
		},
	}
}

// handle returns the Dev's C handle, made on first use.
func (d *Dev) handle() uintptr {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.h == 0 {
		d.h = cgo.NewHandle(d)
	}
	return uintptr(d.h)
}
