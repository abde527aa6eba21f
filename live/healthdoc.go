package live

import (
	"strconv"
	"strings"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// HealthDoc is a GPU's hardware health in the status document: the verdict
// with its reasons, every GPU-level health counter (null when absent: not
// supported, refused or not read yet) and the NVLink links.
type HealthDoc struct {
	Verdict  string             `json:"verdict"` // ok, warning, critical, unknown (GPU hung|lost|failing): GPU.Verdict
	Reasons  []string           `json:"reasons"`
	Counters map[string]*uint64 `json:"counters"` // by the health counters' Key (reading.Health); clock-event times in ns
	// FabricClusterUUID is the cluster UUID of the NVLink fabric the GPU
	// is in (reading.FabricClusterUUID); null: none read, or in no cluster.
	FabricClusterUUID *string   `json:"fabric_cluster_uuid"`
	NVLink            []LinkDoc `json:"nvlink"` // null: no NVLink read
	// RemapHistogram is the row remapper histogram; null: never read
	// (not supported, or no row remapping on this GPU).
	RemapHistogram *RemapHistDoc `json:"remap_histogram"`
}

// RemapHistDoc is the row remapper histogram: the memory banks by spare
// rows left (reading.RemapHistogram), and when it was read.
type RemapHistDoc struct {
	ReadAt  time.Time `json:"read_at"`
	Max     uint32    `json:"max"`
	High    uint32    `json:"high"`
	Partial uint32    `json:"partial"`
	Low     uint32    `json:"low"`
	None    uint32    `json:"none"`
}

// LinkDoc is one NVLink link.
type LinkDoc struct {
	Link      int                 `json:"link"`
	State     *string             `json:"state"`
	SpeedMBps *uint32             `json:"speed_mbps"`
	Version   *uint32             `json:"version"`
	Counters  map[string]*float64 `json:"counters"` // by reading.LinkDefs name; BERs decoded
}

func healthDoc(g *GPU) *HealthDoc {
	if g.Sample.Time.IsZero() {
		return nil
	}
	_, verdict, known := g.Verdict()
	if !known {
		verdict = "ok" // an answered sample before its first health reading
	}
	d := &HealthDoc{Verdict: verdict, Reasons: g.HealthReasons, Counters: make(map[string]*uint64, len(reading.HealthIDs))}
	if d.Reasons == nil {
		d.Reasons = []string{}
	}
	for _, id := range reading.HealthIDs {
		def := &reading.Table[id]
		d.Counters[def.Key] = nil
		if v, ok := def.Get(&g.Sample); ok {
			d.Counters[def.Key] = &v
		}
	}
	if u, ok := reading.FabricClusterUUID(&g.Sample.Values); ok {
		d.FabricClusterUUID = &u
	}
	if r := g.RemapHist; r != nil {
		d.RemapHistogram = &RemapHistDoc{ReadAt: r.At, Max: r.Max, High: r.High, Partial: r.Partial, Low: r.Low, None: r.None}
	}
	if l := g.Links; l != nil && l.N > 0 {
		d.NVLink = make([]LinkDoc, 0, l.N)
		for i := range min(l.N, reading.MaxLinks) {
			k := &l.L[i]
			ld := LinkDoc{Link: i, SpeedMBps: ptr(k.SpeedMBps), Version: ptr(k.Version), Counters: make(map[string]*float64, reading.NumLinkCounters)}
			if s, ok := k.State.Get(); ok {
				n := reading.LinkStateName(s)
				ld.State = &n
			}
			for c, def := range reading.LinkDefs {
				ld.Counters[def.Name] = nil
				if v, ok := k.C[c].Get(); ok {
					f := float64(v)
					if def.BER {
						f = reading.DecodeBER(v)
					}
					ld.Counters[def.Name] = &f
				}
			}
			d.NVLink = append(d.NVLink, ld)
		}
	}
	return d
}

// VerdictText is a health verdict as status and top show it: a finding
// (warning, critical) in capitals; ok and unknown (GPU lost, ...) are none.
func VerdictText(v string) string {
	if v == "warning" || v == "critical" {
		return strings.ToUpper(v)
	}
	return v
}

// HealthText is a GPU's hardware health in one line, as status and top
// show it: the verdict with its reasons, then the counters an operator
// looks at first ("n/a" where absent).
func HealthText(g GPUDoc) string {
	h := g.Health
	if h == nil {
		return "health n/a"
	}
	s := "health " + VerdictText(h.Verdict)
	if len(h.Reasons) > 0 {
		s += " (" + strings.Join(h.Reasons, ",") + ")"
	}
	c := func(name string) string {
		if v := h.Counters[name]; v != nil {
			return strconv.FormatUint(*v, 10)
		}
		return na
	}
	s += "  ecc sbe " + c("ecc_sbe_volatile") + " dbe " + c("ecc_dbe_volatile") +
		"  remap " + c("remap_correctable") + "/" + c("remap_uncorrectable") + " pending " + c("remap_pending")
	if h.Counters["nvlink_links"] != nil {
		s += "  nvlink " + c("nvlink_up") + "/" + c("nvlink_links") + " up, errors " + c("nvlink_errors")
	}
	if a := h.Counters["recovery_action"]; a != nil && *a != 0 {
		s += "  recovery " + reading.RecoveryActionName(*a)
	}
	// The memory repair and SRAM getters, where they say something.
	set := func(name string) bool { v := h.Counters[name]; return v != nil && *v != 0 }
	if set("memory_unrepairable") {
		s += "  memory UNREPAIRABLE"
	}
	if set("channel_repair_pending") || set("tpc_repair_pending") {
		s += "  repair pending"
	}
	if set("sram_uncorrectable_secded") || set("sram_uncorrectable_parity") || set("sram_threshold_exceeded") {
		s += "  sram unc " + c("sram_uncorrectable_secded") + "+" + c("sram_uncorrectable_parity")
		if set("sram_threshold_exceeded") {
			s += " THRESHOLD"
		}
	}
	return s
}
