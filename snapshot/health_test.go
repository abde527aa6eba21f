package snapshot

import (
	"strings"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/testutil"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// The Health counters section, from memory: counters with their last
// change, the row remapper histogram, and the NVLink table (an H100's links:
// the pre-Blackwell counters; the NVLink5 ones n/a).
func TestHealthSectionGolden(t *testing.T) {
	now := time.Date(2026, 11, 30, 15, 4, 5, 0, time.UTC)
	h := HealthData{At: now.Add(-700 * time.Millisecond), Level: "warning", Reasons: []string{"nvlink_errors", "remap_pending"}}
	h.Vals[reading.HECCMode] = reading.Some[uint64](1)
	h.Vals[reading.HSBEVolatile] = reading.Some[uint64](12)
	h.Vals[reading.HRemapUncorrectable] = reading.Some[uint64](1)
	h.Vals[reading.HRemapPending] = reading.Some[uint64](1)
	h.Vals[reading.HNVLinkCount] = reading.Some[uint64](2)
	h.Vals[reading.HNVLinkUp] = reading.Some[uint64](2)
	h.Vals[reading.HNVLinkErrors] = reading.Some[uint64](9)
	h.Changed[reading.HRemapPending] = now.Add(-90 * time.Second)
	h.RemapHist = &reading.RemapHistogram{At: now.Add(-90 * time.Second), Max: 63, High: 1}
	h.Links = reading.NVLinks{At: h.At, N: 2}
	for l := range 2 {
		k := &h.Links.L[l]
		k.State, k.SpeedMBps, k.Version = reading.Some[uint32](reading.LinkStateActive), reading.Some[uint32](50000), reading.Some[uint32](6)
		for _, c := range []reading.LinkCounterID{reading.LDLReplay, reading.LDLRecovery, reading.LDLCRCFlit, reading.LDLCRCData} {
			k.C[c] = reading.Some[uint64](0)
		}
	}
	h.Links.L[1].C[reading.LDLCRCFlit] = reading.Some[uint64](9)
	testutil.Golden(t, "health-section.golden", []byte(HealthSection(h, now).Body))

	none := HealthSection(HealthData{At: h.At, Level: "ok"}, now).Body
	testutil.Contains(t, "section without remapping", none, "row remapper histogram: n/a\n", "NVLink: no links read\n")
	if strings.Contains(none, "fabric cluster") {
		t.Errorf("a fabric cluster without a cluster UUID read:\n%s", none)
	}

	// A GPU in an NVLink fabric's cluster: its UUID (reading.FabricClusterUUID).
	h.Vals[reading.FabricCluster0], h.Vals[reading.FabricCluster8] = reading.Some[uint64](0x5a5a5a5a5a5a5a5a), reading.Some[uint64](0x5a5a5a5a5a5a5a5a)
	testutil.Contains(t, "section of a GPU in a cluster", HealthSection(h, now).Body, "\nNVLink fabric cluster: 5a5a5a5a-5a5a-5a5a-5a5a-5a5a5a5a5a5a\n")
}
