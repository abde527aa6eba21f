// Package rawnvml calls a few NVML entry points of an already-built
// libnvidia-ml.so.1 directly through dlopen/dlsym, for protocol details that
// go-nvml hides (NULL buffers, undersized buffers, the v1 event struct).
// It exists only for the simnvml tests.
package rawnvml

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

typedef struct { unsigned int pid; unsigned long long mem; } proc_v1;
typedef struct { unsigned int pid; unsigned long long mem; unsigned int gi, ci; } proc_v2;

static void *lib;

static const char *raw_open(const char *path) {
	lib = dlopen(path, RTLD_LAZY | RTLD_GLOBAL);
	return lib ? NULL : dlerror();
}

static void *sym(const char *name) { return lib ? dlsym(lib, name) : NULL; }

static int raw_init(void) {
	int (*f)(void) = (int (*)(void))sym("nvmlInit_v2");
	return f ? f() : -1;
}

static int raw_shutdown(void) {
	int (*f)(void) = (int (*)(void))sym("nvmlShutdown");
	return f ? f() : -1;
}

static int raw_handle(unsigned int i, void **h) {
	int (*f)(unsigned int, void **) = (int (*)(unsigned int, void **))sym("nvmlDeviceGetHandleByIndex_v2");
	return f ? f(i, h) : -1;
}

// procs calls fn(device, &count, buf) with buf NULL when nbuf < 0.
static int raw_procs(const char *fn, void *h, unsigned int *count, int nbuf, int v1, unsigned int *pids) {
	int (*f)(void *, unsigned int *, void *) = (int (*)(void *, unsigned int *, void *))sym(fn);
	void *buf = NULL;
	int r, i;
	if (!f)
		return -1;
	if (nbuf >= 0)
		buf = calloc((size_t)nbuf + 1, v1 ? sizeof(proc_v1) : sizeof(proc_v2));
	r = f(h, count, buf);
	if (r == 0 && buf)
		for (i = 0; i < (int)*count && i < nbuf; i++)
			pids[i] = v1 ? ((proc_v1 *)buf)[i].pid : ((proc_v2 *)buf)[i].pid;
	free(buf);
	return r;
}

typedef struct { void *dev; unsigned long long type, data; unsigned int gi, ci; } evdata;

static int raw_set_create(void **set) {
	int (*f)(void **) = (int (*)(void **))sym("nvmlEventSetCreate");
	return f ? f(set) : -1;
}

static int raw_register(void *h, unsigned long long types, void *set) {
	int (*f)(void *, unsigned long long, void *) = (int (*)(void *, unsigned long long, void *))sym("nvmlDeviceRegisterEvents");
	return f ? f(h, types, set) : -1;
}

// wait calls nvmlEventSetWait (v1) or _v2 on a struct pre-filled with 0xAB.
static int raw_wait(int v2, void *set, unsigned int ms, evdata *out) {
	int (*f)(void *, evdata *, unsigned int) =
		(int (*)(void *, evdata *, unsigned int))sym(v2 ? "nvmlEventSetWait_v2" : "nvmlEventSetWait");
	memset(out, 0xAB, sizeof(*out));
	return f ? f(set, out, ms) : -1;
}
*/
import "C"

import (
	"errors"
	"unsafe"
)

// Open dlopens the library the same way go-nvml does.
func Open(path string) error {
	cs := C.CString(path)
	defer C.free(unsafe.Pointer(cs))
	if e := C.raw_open(cs); e != nil {
		return errors.New(C.GoString(e))
	}
	return nil
}

// Init calls nvmlInit_v2.
func Init() int { return int(C.raw_init()) }

// Shutdown calls nvmlShutdown.
func Shutdown() int { return int(C.raw_shutdown()) }

// Handle is an nvmlDevice_t (a C pointer).
type Handle unsafe.Pointer

// Set is an nvmlEventSet_t (a C pointer).
type Set unsafe.Pointer

// HandleByIndex calls nvmlDeviceGetHandleByIndex_v2.
func HandleByIndex(i uint32) (Handle, int) {
	var h unsafe.Pointer
	r := C.raw_handle(C.uint(i), &h)
	return Handle(h), int(r)
}

// Procs calls the named GetComputeRunningProcesses/GetGraphicsRunningProcesses
// variant with *infoCount = count and a buffer of nbuf entries (nil buffer
// when nbuf < 0). v1 selects the nvmlProcessInfo_v1_t layout.
func Procs(fn string, h Handle, count uint32, nbuf int, v1 bool) (ret int, countOut uint32, pids []uint32) {
	cs := C.CString(fn)
	defer C.free(unsafe.Pointer(cs))
	c := C.uint(count)
	buf := make([]C.uint, max(nbuf, 0)+1)
	iv1 := C.int(0)
	if v1 {
		iv1 = 1
	}
	r := C.raw_procs(cs, unsafe.Pointer(h), &c, C.int(nbuf), iv1, &buf[0])
	if r == 0 {
		for i := 0; i < int(c) && i < nbuf; i++ {
			pids = append(pids, uint32(buf[i]))
		}
	}
	return int(r), uint32(c), pids
}

// Event is nvmlEventData_t as raw words.
type Event struct {
	Device            Handle
	Type, Data        uint64
	GpuInstanceId     uint32
	ComputeInstanceId uint32
}

// EventSetCreate calls nvmlEventSetCreate.
func EventSetCreate() (Set, int) {
	var s unsafe.Pointer
	r := C.raw_set_create(&s)
	return Set(s), int(r)
}

// Register calls nvmlDeviceRegisterEvents.
func Register(h Handle, types uint64, set Set) int {
	return int(C.raw_register(unsafe.Pointer(h), C.ulonglong(types), unsafe.Pointer(set)))
}

// Wait calls nvmlEventSetWait (v2=false) or nvmlEventSetWait_v2 with the
// output struct pre-filled with 0xAB bytes.
func Wait(v2 bool, set Set, ms uint32) (Event, int) {
	var d C.evdata
	iv2 := C.int(0)
	if v2 {
		iv2 = 1
	}
	r := C.raw_wait(iv2, unsafe.Pointer(set), C.uint(ms), &d)
	return Event{Handle(d.dev), uint64(d._type), uint64(d.data), uint32(d.gi), uint32(d.ci)}, int(r)
}
