package sampler

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// The fan guard's calls (package fanguard decides when; these make them):
// the only NVML calls the logger makes that change a GPU. They are never
// part of a sample: the guard makes them on a goroutine of its own, under
// its deadline.

// fanDevice is the part of go-nvml's nvml.Device that sets fans. A
// device without it (a test's fake) refuses fan control as not supported.
type fanDevice interface {
	GetMinMaxFanSpeed() (int, int, nvml.Return)
	SetFanSpeed_v2(fan, speed int) nvml.Return
	SetDefaultFanSpeed_v2(fan int) nvml.Return
}

// CallError is the classified failure of a call outside the sample (a fan
// setter's, a CPER read's): Refused means the driver refuses the call here
// (no permission, not supported, the function missing): not a fault; Lost
// that the GPU is gone.
type CallError struct {
	Fn    Fn
	Class Class
	Text  string // the driver's words
}

func (e *CallError) Error() string { return e.Fn.String() + ": " + e.Text }

// Refused reports whether the driver refuses the call here.
func (e *CallError) Refused() bool { return e.Class.capability() }

// Unavailable is Refused as package cper asks it (CPER needs root).
func (e *CallError) Unavailable() bool { return e.Refused() }

// Lost reports whether the GPU is lost.
func (e *CallError) Lost() bool { return e.Class == ClassGPULost }

// FanControl is a GPU's fan setters.
type FanControl struct{ g *GPU }

// FanControl returns the GPU's fan setters.
func (g *GPU) FanControl() FanControl { return FanControl{g} }

// do makes fan call fn through f when it may be made, classifying its result.
func (f FanControl) do(fn Fn, call func(fanDevice) nvml.Return) error {
	if !f.g.syms.Has(fn) {
		return &CallError{Fn: fn, Class: ClassFunctionNotFound, Text: "the driver lacks " + fn.String()}
	}
	dev := f.g.Device()
	if dev == nil { // no handle yet: a failure, tried again, not a refusal
		return &CallError{Fn: fn, Class: ClassOther, Text: "the GPU's handle is not open"}
	}
	d, ok := dev.(fanDevice)
	if !ok {
		return &CallError{Fn: fn, Class: ClassNotSupported, Text: "no fan control for this device"}
	}
	if ret := call(d); ret != nvml.SUCCESS {
		return &CallError{Fn: fn, Class: Classify(ret), Text: retText(ret)}
	}
	return nil
}

// MinMax returns the lowest and highest speed, in %, the GPU's fans accept
// (nvmlDeviceGetMinMaxFanSpeed).
func (f FanControl) MinMax() (lo, hi int, err error) {
	err = f.do(FnMinMaxFanSpeed, func(d fanDevice) (ret nvml.Return) {
		lo, hi, ret = d.GetMinMaxFanSpeed()
		return ret
	})
	return lo, hi, err
}

// SetSpeed sets fan's speed to pct % (nvmlDeviceSetFanSpeed_v2): the fan
// leaves the firmware's control until SetDefault.
func (f FanControl) SetSpeed(fan, pct int) error {
	return f.do(FnSetFanSpeed, func(d fanDevice) nvml.Return { return d.SetFanSpeed_v2(fan, pct) })
}

// SetDefault hands fan back to the firmware's control
// (nvmlDeviceSetDefaultFanSpeed_v2).
func (f FanControl) SetDefault(fan int) error {
	return f.do(FnSetDefaultFanSpeed, func(d fanDevice) nvml.Return { return d.SetDefaultFanSpeed_v2(fan) })
}

// FanRelease is what ReleaseFans did to one fan.
type FanRelease struct {
	GPU  int    // -1: no GPU has UUID
	UUID string // "": not known (the GPU's handle or UUID could not be read)
	Fan  int    // -1: the GPU as a whole (its handle or UUID)
	Err  error  // nil: handed back
}

// ReleaseFans hands fans back to the firmware without a running logger
// (`gpu-telemetry fan-guard release`, the unit's ExecStopPost=): it opens
// the driver, and for each GPU whose UUID is in fans hands those fans back
// (every fan of every GPU with all). Nothing is skipped in silence: a GPU
// whose handle or UUID cannot be read, and a UUID of fans that no GPU has,
// are results with an error. The whole release shares one bound: timeout
// for nvmlInit, timeout for every call of every GPU together, timeout for
// nvmlShutdown; one stuck leaves the rest undone, with an error.
func ReleaseFans(lib Library, fans map[string][]int, all bool, timeout time.Duration) ([]FanRelease, error) {
	var ret nvml.Return
	if !bounded(timeout, func() { ret = lib.Init() }) {
		return nil, fmt.Errorf("nvmlInit did not return within %s", timeout)
	}
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("nvmlInit: %s", retText(ret))
	}
	syms := LookupSymbols(lib.LookupSymbol)
	var out []FanRelease
	var err error
	if !bounded(timeout, func() { out, err = releaseFans(lib, &syms, fans, all) }) {
		return nil, fmt.Errorf("the driver did not answer within %s; fans not handed back yet are left as they are", timeout)
	}
	if !bounded(timeout, func() { lib.Shutdown() }) {
		return out, errors.Join(err, fmt.Errorf("nvmlShutdown did not return within %s", timeout))
	}
	return out, err
}

func releaseFans(lib Library, syms *Symbols, fans map[string][]int, all bool) ([]FanRelease, error) {
	n, ret := lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("nvmlDeviceGetCount: %s", retText(ret))
	}
	var out []FanRelease
	found := map[string]bool{}
	for i := range n {
		dev, ret := lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			out = append(out, FanRelease{GPU: i, Fan: -1, Err: fmt.Errorf("nvmlDeviceGetHandleByIndex: %s", retText(ret))})
			continue
		}
		uuid, ret := dev.GetUUID()
		if ret != nvml.SUCCESS {
			out = append(out, FanRelease{GPU: i, Fan: -1, Err: fmt.Errorf("nvmlDeviceGetUUID: %s", retText(ret))})
			continue
		}
		found[uuid] = true
		list, held := fans[uuid]
		if all {
			nf, ret := dev.GetNumFans()
			if ret != nvml.SUCCESS && ret != nvml.ERROR_NOT_SUPPORTED {
				out = append(out, FanRelease{GPU: i, UUID: uuid, Fan: -1, Err: fmt.Errorf("nvmlDeviceGetNumFans: %s", retText(ret))})
				continue
			}
			list = make([]int, max(nf, 0))
			for f := range list {
				list[f] = f
			}
		} else if !held {
			continue
		}
		fc := FanControl{&GPU{dev: dev, syms: syms}}
		for _, f := range list {
			out = append(out, FanRelease{GPU: i, UUID: uuid, Fan: f, Err: fc.SetDefault(f)})
		}
	}
	if !all {
		for _, uuid := range slices.Sorted(maps.Keys(fans)) {
			if found[uuid] {
				continue
			}
			for _, f := range fans[uuid] {
				out = append(out, FanRelease{GPU: -1, UUID: uuid, Fan: f, Err: errors.New("no GPU with this UUID answered")})
			}
		}
	}
	return out, nil
}
