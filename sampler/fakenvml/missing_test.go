package fakenvml

import (
	"fmt"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// TestCallingAFunctionTheLibraryLacks: a process that calls a function its
// libnvidia-ml lacks dies, so a call to one the fake lacks (Lib.Missing),
// through a handle the library gave, fails the test loudly: it panics
// naming the function. The functions it has answer as before.
func TestCallingAFunctionTheLibraryLacks(t *testing.T) {
	l := &Lib{Devs: []*Dev{NewDev()}, Missing: map[string]bool{"nvmlDeviceGetNumFans": true}}
	d, r := l.DeviceGetHandleByIndex(0)
	if r != nvml.SUCCESS {
		t.Fatalf("handle: %v", r)
	}
	if _, r := d.GetName(); r != nvml.SUCCESS {
		t.Fatalf("GetName, which the library has: %v", r)
	}
	defer func() {
		if p := recover(); p == nil || !strings.Contains(fmt.Sprint(p), "nvmlDeviceGetNumFans") {
			t.Errorf("calling nvmlDeviceGetNumFans, which the library lacks: recovered %v, want a panic naming it", p)
		}
	}()
	d.GetNumFans()
}
