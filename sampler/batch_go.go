package sampler

import (
	"sync/atomic"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// fieldSem serializes GetFieldValues across GPUs for the Go executor: NVML
// has been seen to misbehave when it is called concurrently. It is a channel
// rather than a mutex so that a waiter can give up (a GSP fault can keep the
// holder inside the driver for 45 s). The C executor has its own (batch.c).
var fieldSem = make(chan struct{}, 1)

// goExec makes the calls through a Device (go-nvml, or a fake in tests).
type goExec struct {
	cur   atomic.Int32
	dev   Device
	wait  time.Duration // FieldWait
	timer *time.Timer   // reused: Reset on a stopped timer does not allocate
}

func newGoExec(dev Device, wait time.Duration) *goExec {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &goExec{dev: dev, wait: wait, timer: t}
}

func (x *goExec) lockFields() bool {
	select {
	case fieldSem <- struct{}{}:
		return true
	default:
	}
	x.timer.Reset(x.wait)
	defer x.timer.Stop()
	select {
	case fieldSem <- struct{}{}:
		return true
	case <-x.timer.C:
		return false
	}
}

func (x *goExec) current() int32 { return x.cur.Load() }

func (x *goExec) run(r *raw) {
	cur := &x.cur
	defer cur.Store(0)
	lost := false
	do := func(c call, f func() nvml.Return) {
		if lost || r.plan&(1<<c) == 0 {
			return
		}
		cur.Store(int32(c) + 1)
		ret := f()
		r.ret[c] = int32(ret)
		lost = ret == nvml.ERROR_GPU_IS_LOST
	}
	d := x.dev
	if r.plan&(1<<cFields) != 0 {
		if x.lockFields() {
			do(cFields, func() nvml.Return { return d.GetFieldValues(r.fields[:r.nfields]) })
			<-fieldSem
		} else {
			r.ret[cFields] = retLockTimeout
		}
		if r.ret[cFields] != int32(nvml.SUCCESS) {
			r.plan |= r.fallback
		} else {
			for i := 0; i < r.nfields; i++ {
				if r.fields[i].NvmlReturn != uint32(nvml.SUCCESS) {
					r.plan |= r.fieldFallback[i]
				}
			}
		}
	}
	u32 := func(dst *uint32, f func() (uint32, nvml.Return)) func() nvml.Return {
		return func() nvml.Return {
			v, ret := f()
			*dst = v
			return ret
		}
	}
	do(cTemp, u32(&r.temp, func() (uint32, nvml.Return) { return d.GetTemperature(nvml.TEMPERATURE_GPU) }))
	do(cPowerLim, u32(&r.powerLim, d.GetPowerManagementLimit))
	do(cPState, func() nvml.Return {
		v, ret := d.GetPerformanceState()
		r.pstate = uint32(v)
		return ret
	})
	for i, t := range [3]nvml.ClockType{nvml.CLOCK_GRAPHICS, nvml.CLOCK_SM, nvml.CLOCK_MEM} {
		do(cClockGfx+call(i), u32(&r.clk[i], func() (uint32, nvml.Return) { return d.GetClockInfo(t) }))
	}
	do(cUtil, func() nvml.Return {
		u, ret := d.GetUtilizationRates()
		r.utilGPU, r.utilMem = u.Gpu, u.Memory
		return ret
	})
	do(cMemV2, func() nvml.Return {
		m, ret := d.GetMemoryInfo_v2()
		r.memUsed = m.Used
		return ret
	})
	do(cMem, func() nvml.Return {
		m, ret := d.GetMemoryInfo()
		r.memUsed = m.Used
		return ret
	})
	do(cReasons, func() (ret nvml.Return) { r.reasons, ret = d.GetCurrentClocksEventReasons(); return })
	do(cThrottle, func() (ret nvml.Return) { r.reasons, ret = d.GetCurrentClocksThrottleReasons(); return })
	do(cFanSpeed1, u32(&r.fan1, d.GetFanSpeed))
	for i := range reading.MaxFans {
		do(cFanSpeed+call(i), u32(&r.fan[i], func() (uint32, nvml.Return) { return d.GetFanSpeed_v2(i) }))
		do(cTarget+call(i), func() nvml.Return {
			v, ret := d.GetTargetFanSpeed(i)
			r.target[i] = uint32(v)
			return ret
		})
	}
	do(cEnc, func() (ret nvml.Return) { r.enc, _, ret = d.GetEncoderUtilization(); return })
	do(cDec, func() (ret nvml.Return) { r.dec, _, ret = d.GetDecoderUtilization(); return })
	do(cPcieGen, func() nvml.Return {
		v, ret := d.GetCurrPcieLinkGeneration()
		r.pcieGen = uint32(v)
		return ret
	})
	do(cPcieWidth, func() nvml.Return {
		v, ret := d.GetCurrPcieLinkWidth()
		r.pcieWidth = uint32(v)
		return ret
	})
	do(cThermal, func() nvml.Return {
		t, ret := d.GetThermalSettings(0)
		r.thCount, r.th = t.Count, t.Sensor[0]
		return ret
	})
	do(cPower, u32(&r.power, d.GetPowerUsage))
	do(cEnforced, u32(&r.enforced, d.GetEnforcedPowerLimit))
	do(cEnergy, func() (ret nvml.Return) { r.energy, ret = d.GetTotalEnergyConsumption(); return })
	do(cReplay, func() nvml.Return {
		v, ret := d.GetPcieReplayCounter()
		r.replay = uint32(v)
		return ret
	})
}
