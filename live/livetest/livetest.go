// Package livetest holds a fixed live.View for the tests of the live
// readers (status text, JSON, metrics, top).
package livetest

import (
	"time"

	_ "github.com/gpu-telemetry/gpu-telemetry/anomaly" // registers the detectors' flag kinds
	"github.com/gpu-telemetry/gpu-telemetry/live"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// Uptime is how long View's daemon has run: its Host.Start is Uptime before
// its Now, and its Host.Mono (the publisher's monotonic clock, which starts
// with it) is Uptime.
const Uptime = 2*time.Hour + 5*time.Minute

// View is a two-GPU view: GPU 0 answering with every reading and a
// recent spurious throttle, GPU 1 hung in nvmlDeviceGetTemperature for 12 s
// after an Xid 79 and a crash snapshot; the NVML pacer one step up after
// skipped samples, and log lines held back and lost.
func View() live.View {
	now := time.Date(2026, 11, 30, 15, 4, 5, 0, time.UTC)
	g0 := live.GPU{Info: reading.GPU{Index: 0, Name: "NVIDIA H100 80GB HBM3", BusID: "00000000:1B:00.0", UUID: "GPU-aaaa", Serial: "1650123", VBIOS: "96.00.99.00.01", NumFans: 2}}
	s := reading.Sample{GPU: 0, Time: now.Add(-100 * time.Millisecond), NumFans: 2}
	for id, v := range map[reading.ID]uint64{reading.TempC: 71, reading.MemTempC: 80,
		reading.PowerMW: 612_400, reading.PowerLimitMW: 700_000, reading.EnforcedLimitMW: 700_000,
		reading.EnergyMJ: 123_456_789, reading.PState: 0, reading.GraphicsMHz: 1980, reading.SMMHz: 1980,
		reading.MemMHz: 2619, reading.GPUUtil: 100, reading.MemUtil: 43, reading.EncUtil: 0,
		reading.VRAMUsedBytes: 40 << 30, reading.VRAMTotalBytes: 80 << 30, reading.PCIeGen: 5, reading.PCIeWidth: 16, reading.PCIeReplay: 3,
		reading.Throttle: reading.ThrottleSwPowerCap} {
		s.Set(id, v)
	}
	s.Fans[0] = reading.Fan{Speed: reading.Some[uint32](45), Target: reading.Some[uint32](50)}
	s.Fans[1] = reading.Fan{Speed: reading.Some[uint32](46)}
	spurThrot, _ := reading.FlagKindNamed("spur_throt")
	s.Flags.Add(reading.Flag{Kind: spurThrot, A: 20})
	// Health counters: ECC on, 12 SBEs, a remap pending, 2 of 3 NVLink links up.
	for id, v := range map[reading.ID]uint64{reading.HECCMode: 1, reading.HSBEVolatile: 12, reading.HDBEVolatile: 0,
		reading.HRemapPending: 1, reading.HClkHWThermal: 1_500_000_000, reading.HNVLinkCount: 3, reading.HNVLinkUp: 2,
		reading.HNVLinkErrors: 7, reading.HRecoveryAction: 0} {
		s.Values[id] = reading.Some(v)
	}
	prev := s
	prev.Time = s.Time.Add(-100 * time.Millisecond)
	g0.Observe(&prev, 100*time.Millisecond)
	g0.Observe(&s, 100*time.Millisecond)
	g0.Processes = &reading.Procs{GPU: 0, Time: s.Time, Status: reading.ProcOK, List: []reading.Process{}}
	g0.HealthLevel, g0.HealthReasons = "critical", []string{"nvlink_down", "remap_pending"}
	links := &reading.NVLinks{At: s.Time, N: 3}
	for i := range 3 {
		links.L[i].State = reading.Some[uint32](reading.LinkStateActive)
		links.L[i].SpeedMBps = reading.Some[uint32](50000)
		links.L[i].C[reading.LRxErrors] = reading.Some[uint64](0)
	}
	links.L[1].State = reading.Some[uint32](0)
	links.L[1].C[reading.LRxErrors] = reading.Some[uint64](7)
	links.L[1].C[reading.LSymbolBER] = reading.Some[uint64](4<<8 | 11)
	g0.Links = links
	g0.RemapHist = &reading.RemapHistogram{At: s.Time.Add(-time.Hour), Max: 63, High: 1}

	g1 := live.GPU{Info: reading.GPU{Index: 1, Name: "NVIDIA H100 80GB HBM3", BusID: "00000000:2B:00.0", UUID: "GPU-bbbb", NumFans: 0}}
	s1 := reading.Sample{GPU: 1, Time: now.Add(-13 * time.Second), Values: reading.Values{reading.TempC: reading.Some[uint64](65)}}
	g1.Observe(&s1, 100*time.Millisecond)
	g1.Xid(79, now.Add(-13*time.Second), "GPU has fallen off the bus")
	g1.OpEvent(now.Add(-14*time.Second), &reading.OpEvent{Severity: "corrected", Category: 3, Attributes: "none"}, 0, false)
	g1.OpEvent(now.Add(-13*time.Second), &reading.OpEvent{Severity: "fatal", Category: 2, Attributes: "uncontained", Critical: "fatal|uncontained"}, 79, true)
	g1.CPERRecord(live.LastCPER{Time: now.Add(-12 * time.Second), ID: 1000, Severity: "fatal", Recorded: now.Add(-13 * time.Second).Truncate(time.Second)})
	g1.Hung("nvmlDeviceGetTemperature", now.Add(-12*time.Second), Uptime-12*time.Second)
	g1.Incident(now.Add(-11*time.Second), "NVML_HUNG(nvmlDeviceGetTemperature,1000ms)")
	g1.HungRows = 110
	g1.NewestSnapshot = "/var/log/gpu-telemetry/crashes/crash-20261130-150354.000-gpu1.log"

	return live.View{Host: live.Host{Now: now, Mono: Uptime, Start: now.Add(-Uptime), Version: "1.0", Identity: reading.Identity{Host: "gpu-node-07", MachineID: "4f0c8d6a2b7e4e1c9a3d5b7f1e2c4a6b", BootID: "9b1d3f5e-7a2c-4e6b-8d0f-1a3c5e7b9d2f"}, System: reading.System{DriverVersion: "580.95.05", NVMLVersion: "12.580.95.05", CUDAVersion: "13.0"},
		Interval: 100 * time.Millisecond, Deadline: time.Second,
		Cadence: live.Cadence{Window: time.Minute, Mean: 100 * time.Millisecond, P99: 101 * time.Millisecond, Max: 180 * time.Millisecond},
		Kmsg:    "following", Events: "watching",
		LastIncident: live.Incident{Time: now.Add(-11 * time.Second), GPU: 1, Reason: "NVML_HUNG(nvmlDeviceGetTemperature,1000ms)"},
		Pacer:        live.Pacer{Level: 1, TickNVML: reading.Some(4200 * time.Microsecond), LastLate: reading.Some(1100 * time.Microsecond)},
		LogLines:     live.LogLines{Waiting: 2},
		BERT:         &live.LastCPER{Time: now.Add(-2 * time.Hour), ID: 7, Severity: "fatal"},
		Counters: []live.Counter{{Name: "tick_overruns", Help: "ticks skipped", Value: 2, Loss: true}, {Name: "busy_skips", Help: "GPU samples skipped", Value: 12, Loss: true},
			{Name: "rows_dropped", Help: "CSV rows not written", Loss: true},
			{Name: "nvml_stretches", Help: "pacer steps up", Value: 3, Loss: true}, {Name: "side_drops", Help: "side work dropped", Loss: true},
			{Name: "ticks", Help: "ticks", Value: 75000}, {Name: "rows_written", Help: "CSV rows written", Value: 149_000},
			{Name: "log_lines_delayed", Help: "log lines written late", Value: 5}},
	}, GPUs: []live.GPU{g0, g1}}
}

// Board is a board over v's GPUs whose host view is v's.
func Board(v live.View) *live.Board {
	slots := make([]*live.Slot, len(v.GPUs))
	for i, g := range v.GPUs {
		slots[i] = live.NewSlot(g.Info)
		slots[i].Update(func(p *live.GPU) { *p = g })
	}
	return live.NewBoard(slots, func() live.Host { return v.Host })
}

// SetCounter sets the host counter named name in v; it panics when View
// has no such counter, so that a test cannot change nothing by mistake.
func SetCounter(v *live.View, name string, value uint64) {
	for i := range v.Host.Counters {
		if c := &v.Host.Counters[i]; c.Name == name {
			c.Value = value
			return
		}
	}
	panic("livetest: no counter " + name)
}
