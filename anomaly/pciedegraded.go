package anomaly

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// pcieDegradedDef flags PCIE_DEGRADED(x<W>,gen<G>): the PCIe link has run
// below the maximum the board and the slot allow (nvmlDeviceGetMaxPcieLink*:
// "possible with this device and system", so a x16 card in a x8 slot is not
// degraded) for longer than a grace time while the GPU was busy. A link that
// trained down is a failing riser, cable or slot and leaves no Xid
// (NVIDIA/NVSentinel issue 890); an idle GPU lowers its link generation on
// purpose to save power, so only a busy one (utilization at or above a
// threshold) counts, and any idle or full-speed sample restarts the wait.
// P0 is not busy: datacenter GPUs in persistence mode idle in P0 with their
// link at gen 1, which would flag every idle H100 (issue 39 suggested "P0
// or utilization"; utilization alone is the evidence of traffic).
var pcieDegradedDef = Def{
	Name:    "pcie_degraded",
	Flags:   []reading.FlagDef{{Name: "pcie_degraded", Text: "PCIE_DEGRADED(x{A},gen{B})", Anomaly: true}},
	Counter: CounterDef{Name: "pcie_degraded", Short: "pcie", Help: "busy samples with the PCIe link below its maximum past the grace time (PCIE_DEGRADED)", Window: WindowRate},
	Notice: NoticeDef{Msg: "anomaly: PCIe link below its maximum while busy", Level: slog.LevelWarn, Attrs: func(v [2]uint64) []slog.Attr {
		return []slog.Attr{slog.String("link", LinkText(v[0]>>32, v[0]&0xffffffff, v[1]>>32, v[1]&0xffffffff))}
	}},
	// A flag is a pcie_degraded health reason (a warning, held like a
	// growth reason), with its own events.log line.
	Evidence: reading.Some(ReasonPCIeDegraded),
	Knobs: []Knob{
		// Issue 39: "for longer than a minute"; a link retrains within
		// milliseconds when load arrives, and the current generation is
		// read on the slow tier (once a second), so a minute rules out both.
		{Name: "PCIeDegradedAfterS", Flag: "pcie-degraded-after", Default: 60, Int: true, Min: 1, Max: 3600, Want: "between 1 and 3600",
			Help: "Seconds a busy GPU's PCIe link must stay below its maximum before it is flagged."},
		// Half the engine busy: enough traffic that the driver keeps the
		// link at full speed (it drops the generation at idle).
		{Name: "PCIeBusyUtilPct", Default: 50, Int: true, Min: 1, Max: 100, Want: "between 1 and 100",
			Help: "GPU utilization, in %, at or above which a GPU counts as busy for PCIe downtraining."},
	},
	New: func(k Knobs) Detector {
		return &pcieDegraded{after: time.Duration(k["PCIeDegradedAfterS"]) * time.Second, busyPct: uint32(k["PCIeBusyUtilPct"])}
	},
}

func init() { register(&pcieDegradedDef) }

// pcieDegraded remembers since when the busy GPU's link has been below its
// maximum.
type pcieDegraded struct {
	after   time.Duration // PCIeDegradedAfterS
	busyPct uint32        // PCIeBusyUtilPct
	since   time.Time     // zero: the link is not (or not yet seen) degraded while busy
}

// Check flags every busy sample whose link generation or width is below its
// maximum once that has lasted the grace time. Every value it compares must
// be present: an absent reading is no evidence either way (and restarts the
// wait, as an idle sample does).
func (d *pcieDegraded) Check(in Input) Finding {
	s := in.Cur
	g, okG := s.Get(reading.PCIeGen)
	w, okW := s.Get(reading.PCIeWidth)
	maxG, okMG := s.Get(reading.PCIeMaxGen)
	maxW, okMW := s.Get(reading.PCIeMaxWidth)
	if in.Seen == 0 || !okG || !okW || !okMG || !okMW || (g >= maxG && w >= maxW) || !d.busy(s) {
		d.since = time.Time{}
		return Finding{}
	}
	if d.since.IsZero() {
		d.since = in.Now
	}
	if in.Now.Sub(d.since) < d.after {
		return Finding{}
	}
	return Finding{Count: true, Flag: 1, A: int64(w), B: int64(g), Notice: true, V: [2]uint64{w<<32 | maxW, g<<32 | maxG}}
}

// LinkText says how far a link runs below its maximum: "x8 of x16, gen 4
// of 5" (the notice's and the health event's link=).
func LinkText(w, maxW, g, maxG uint64) string {
	return fmt.Sprintf("x%d of x%d, gen %d of %d", w, maxW, g, maxG)
}

// SampleLinkText is LinkText of sample s's link, if every reading of it
// is present.
func SampleLinkText(s *reading.Sample) (string, bool) {
	g, okG := s.Get(reading.PCIeGen)
	w, okW := s.Get(reading.PCIeWidth)
	maxG, okMG := s.Get(reading.PCIeMaxGen)
	maxW, okMW := s.Get(reading.PCIeMaxWidth)
	if !okG || !okW || !okMG || !okMW {
		return "", false
	}
	return LinkText(w, maxW, g, maxG), true
}

// busy reports whether the GPU's utilization is at or above the threshold.
func (d *pcieDegraded) busy(s *reading.Sample) bool {
	u, ok := s.Get(reading.GPUUtil)
	return ok && u >= uint64(d.busyPct)
}
