package fakenvml

/*
#cgo LDFLAGS: -ldl -Wl,--export-dynamic
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>

// The binary's own symbols (the exported C functions of cabi.go).
static void *fake_sym(const char *name) { return dlsym(RTLD_DEFAULT, name); }
*/
import "C"

import (
	"runtime/cgo"
	"unsafe"

	"github.com/gpu-telemetry/gpu-telemetry/sampler/nvmlapi"
)

// Native implements nvmlapi.Library: the fake's C functions (a symbol
// Missing has none, as the driver would: defensive, since the sampler plans
// no call whose symbol LookupSymbol refused) and handles, one cgo.Handle a
// Dev, kept for the test binary's life. A function the sampler calls that the fake
// lacks panics, naming it: a new getter needs its fake_ function in
// cabi.go.
func (l *Lib) Native() nvmlapi.Native {
	return nvmlapi.Native{
		Symbol: func(name string) unsafe.Pointer {
			if l.Missing[name] {
				return nil
			}
			s := C.CString("fake_" + name)
			defer C.free(unsafe.Pointer(s))
			if p := C.fake_sym(s); p != nil {
				return p
			}
			panic("fakenvml: no fake_" + name + " in cabi.go")
		},
		Handle: func(i int) uintptr {
			if i < 0 || i >= len(l.Devs) {
				return 0
			}
			return l.Devs[i].handle()
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
