package top

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/gdamore/tcell/v2"

	"github.com/gpu-telemetry/gpu-telemetry/live"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// detail is the selected GPU in full (Enter or its number): engines,
// memory, clocks, power and thermal, fans, throttle reasons, PCIe, NVLink,
// health, its last Xids and incidents, the action, and what NVML gives of
// GSP. A reading the daemon does not give shows n/a.
type detail struct{ scroll int }

func (*detail) Name() string   { return "GPU" }
func (*detail) Key() tcell.Key { return tcell.KeyF3 }

// DetailData is what the GPU view exports: the selected GPU as the
// document has it, the PCIe throughput, and the buffered chart series.
type DetailData struct {
	GPU       *live.GPUDoc          `json:"gpu"`
	PCIeTXBps *float64              `json:"pcie_tx_bytes_per_s"`
	PCIeRXBps *float64              `json:"pcie_rx_bytes_per_s"`
	Series    map[string][]*float64 `json:"series"` // by reading key, one value a second, oldest first
}

// Data is the selected GPU's DetailData.
func (*detail) Data(m *Model) any {
	g := m.GPU()
	if g == nil {
		return DetailData{}
	}
	d := DetailData{GPU: g, Series: map[string][]*float64{}}
	if tx, rx, ok := m.PCIeRate(g.UUID); ok {
		d.PCIeTXBps, d.PCIeRXBps = &tx, &rx
	}
	for _, k := range chartKeys {
		d.Series[k] = m.Series(g.UUID, k)
	}
	return d
}

func (v *detail) OnKey(m *Model, ev *tcell.EventKey) bool { return scrollKey(&v.scroll, ev) }

func (v *detail) Render(m *Model, width, height int) []Line {
	g := m.GPU()
	if g == nil {
		return []Line{{pad("no GPU selected (←/→ or a GPU's number)", width), SevDim}}
	}
	out, from := page(detailLines(m, g, width), v.scroll, width, height)
	v.scroll = from
	return out
}

// opt is reading key of g as text with unit, n/a when absent or when this
// build's table has no such key (a reading a newer daemon adds).
func opt(g *live.GPUDoc, key string, prec int, unit string) string {
	v, _ := g.Lookup(key)
	return v.Format(prec, unit)
}

// gib is a byte count reading in GiB with one decimal, n/a when absent.
func gib(g *live.GPUDoc, key string) string {
	v, _ := g.Lookup(key)
	if n, ok := v.Num(); ok {
		return strconv.FormatFloat(n/(1<<30), 'f', 1, 64) + "G"
	}
	return "n/a"
}

// rate is bytes a second in a few characters.
func rate(bps float64) string {
	switch {
	case bps >= 1e9:
		return strconv.FormatFloat(bps/1e9, 'f', 2, 64) + " GB/s"
	case bps >= 1e6:
		return strconv.FormatFloat(bps/1e6, 'f', 1, 64) + " MB/s"
	}
	return strconv.FormatFloat(bps/1e3, 'f', 1, 64) + " kB/s"
}

// The readings the daemon side of issue 40 adds (looked up by key, n/a
// until it serves them): engines, BAR1, the clocks' maximums and the
// thermal limits.
const (
	keyJpg       = "jpg_util_pct"
	keyOfa       = "ofa_util_pct"
	keyBar1Used  = "bar1_used_bytes"
	keyBar1Total = "bar1_total_bytes"
	keyMaxGfx    = "max_graphics_clock_mhz"
	keyMaxSM     = "max_sm_clock_mhz"
	keyMaxMem    = "max_memory_clock_mhz"
	keySlowdown  = "slowdown_temp_c"
	keyShutdown  = "shutdown_temp_c"
)

func detailLines(m *Model, g *live.GPUDoc, width int) []Line {
	now := m.Doc.Time
	rank := rankOf(*g, now)
	head := SevHead
	if rank < rankOther {
		head = SevCrit
	}
	out := []Line{{fmt.Sprintf("GPU %d  %s  %s  %s  %s", g.Index, live.StateText(*g, now), g.Name, g.BusID, g.UUID), head},
		{"  serial " + orNA(g.Serial) + "  vbios " + orNA(g.VBIOS) + "  samples " + strconv.FormatUint(g.Samples, 10) +
			"  failures " + strconv.FormatUint(g.Failures, 10) + "  hung rows " + strconv.FormatUint(g.HungRows, 10), SevNormal}}
	// A GPU not answering has no readings now: those of its last sample
	// are shown dim under a line that says so, never as current.
	stale := g.State != live.StateAnswering.String() || g.SampleTime == nil
	add := func(sev Sev, s string) {
		if stale && sev == SevNormal {
			sev = SevDim
		}
		out = append(out, Line{s, sev})
	}
	section := func(s string) { add(SevHead, s) }
	if stale {
		why := "  no readings now: not answering"
		if g.SampleTime != nil {
			why += "; the readings below are the last sample's, at " + g.SampleTime.In(now.Location()).Format("15:04:05")
		}
		add(SevCrit, why)
	}

	section("Engines")
	gu, _ := g.Reading("gpu_util_pct").Num()
	add(SevNormal, "  gfx/SM "+bar(gu, 100, 22)+" "+opt(g, "gpu_util_pct", -1, "%")+"  memory "+opt(g, "memory_util_pct", -1, "%")+
		"  encoder "+opt(g, "encoder_util_pct", -1, "%")+"  decoder "+opt(g, "decoder_util_pct", -1, "%")+
		"  JPEG "+opt(g, keyJpg, -1, "%")+"  OFA "+opt(g, keyOfa, -1, "%"))

	section("Memory")
	add(SevNormal, "  VRAM "+gib(g, "memory_used_bytes")+" used of "+gib(g, "memory_total_bytes")+
		"  reserved "+gib(g, "memory_reserved_bytes")+"  BAR1 "+gib(g, keyBar1Used)+" of "+gib(g, keyBar1Total))

	section("Clocks")
	add(SevNormal, "  graphics "+opt(g, "graphics_clock_mhz", -1, "")+"/"+opt(g, keyMaxGfx, -1, "")+" MHz  SM "+
		opt(g, "sm_clock_mhz", -1, "")+"/"+opt(g, keyMaxSM, -1, "")+" MHz  memory "+opt(g, "memory_clock_mhz", -1, "")+"/"+
		opt(g, keyMaxMem, -1, "")+" MHz  P"+opt(g, "pstate", -1, "")+"  (now/max)")

	section("Power and thermal")
	pw, _ := g.Reading("power_w").Num()
	pl, _ := g.Reading("power_limit_w").Num()
	add(SevNormal, "  power "+bar(pw, pl, 22)+" "+opt(g, "power_w", 0, "")+"/"+opt(g, "power_limit_w", 0, "")+"W  enforced "+
		opt(g, "enforced_limit_w", 0, "W")+"  energy "+opt(g, "energy_j", 0, " J"))
	tsev := SevNormal
	if t, ok := g.Reading("temperature_c").Num(); ok {
		if s, ok := g.Lookup(keySlowdown); ok {
			if sd, ok := s.Num(); ok && t >= sd-5 {
				tsev = SevWarn
			}
		}
	}
	add(tsev, "  temperature "+opt(g, "temperature_c", -1, "C")+"  memory "+opt(g, "memory_temperature_c", -1, "C")+
		"  slowdown "+opt(g, keySlowdown, -1, "C")+"  shutdown "+opt(g, keyShutdown, -1, "C"))

	section("Fans")
	if len(g.Fans) == 0 {
		add(SevDim, "  none reported (passively cooled, or not readable)")
	}
	for i, f := range g.Fans {
		policy := "" // a daemon without the policy reading
		if p, ok := f["policy"]; ok {
			policy = "  policy n/a"
			if p != nil {
				policy = "  policy " + reading.FanPolicyText(*p)
			}
		}
		add(SevNormal, "  fan "+strconv.Itoa(i)+"  speed "+live.OptUint(f["speed_pct"], "%")+"  target "+live.OptUint(f["target_pct"], "%")+policy)
	}
	if fg := g.FanGuard; fg != nil {
		sev := SevNormal
		if fg.Holding() {
			sev = SevWarn
		}
		add(sev, "  fan guard: "+fg.Text)
	}

	section("Throttle reasons (now; time since start)")
	now1 := g.Reading("throttle_reasons").Names()
	names := make([]string, 0, len(g.ThrottleS))
	for n := range g.ThrottleS {
		names = append(names, n)
	}
	slices.Sort(names)
	var parts []string
	for _, n := range names {
		s := n + " " + strconv.FormatFloat(g.ThrottleS[n], 'f', 0, 64) + "s"
		if slices.Contains(now1, n) {
			s = "*" + s
		}
		parts = append(parts, s)
	}
	sev := SevNormal
	if len(now1) > 0 {
		sev = SevWarn
	}
	add(sev, "  now: "+orNA(strings.Join(now1, ",")))
	for _, l := range packed(parts, width) {
		add(SevNormal, l)
	}

	section("PCIe")
	tp := "TX/RX n/a (two samples needed)"
	if tx, rx, ok := m.PCIeRate(g.UUID); ok {
		tp = "TX " + rate(tx) + "  RX " + rate(rx)
	}
	// The link's maximum is the lower of the GPU's and the slot's; the
	// GPU's own is said where it is higher (the slot or riser limits it).
	gen := "  gen " + opt(g, "pcie_gen", -1, "") + "/" + opt(g, "pcie_max_gen", -1, "")
	own, _ := g.Lookup("pcie_gpu_max_gen")
	link, _ := g.Lookup("pcie_max_gen")
	if o, ok := own.Num(); ok {
		if l, lok := link.Num(); lok && o > l {
			gen += " (GPU " + own.Text("") + ")"
		}
	}
	lanes := func(key string) string {
		if v, _ := g.Lookup(key); v.Text("") != "n/a" {
			return "x" + v.Text("")
		}
		return "n/a"
	}
	add(SevNormal, gen+"  width "+lanes("pcie_width")+"/"+lanes("pcie_max_width")+"  replay "+opt(g, "pcie_replay", -1, "")+"  "+tp)

	stale = false
	out = append(out, healthLines(g, width)...)

	section("Xids, incidents, action")
	if x := g.LastXid; x != nil {
		add(SevCrit, "  last Xid "+strconv.FormatUint(x.Code, 10)+" "+x.Time.In(now.Location()).Format("15:04:05")+" "+x.Name)
	}
	if len(g.Xids) > 0 {
		codes := make([]string, 0, len(g.Xids))
		for c, n := range g.Xids {
			codes = append(codes, c+"×"+strconv.FormatUint(n, 10))
		}
		slices.Sort(codes)
		add(SevNormal, "  Xids since start: "+strings.Join(codes, " "))
	}
	if r := g.LastRecovery; r != nil {
		add(SevWarn, "  last recovery action "+strconv.FormatUint(r.Code, 10)+" "+r.Name)
	}
	inc := "  incidents " + strconv.FormatUint(g.Incidents, 10)
	if li := g.LastIncident; li != nil {
		inc += "  last " + li.Time.In(now.Location()).Format("15:04:05") + " " + li.Reason
	}
	add(SevNormal, inc)
	add(SevNormal, "  newest snapshot "+orNA(g.NewestSnapshot))
	asev := SevNormal
	if g.Action.Name.String() != "none" {
		asev = SevCrit
	}
	add(asev, "  action "+g.Action.Name.String()+reasons(g.Action.Reasons))

	section("GSP")
	add(SevNormal, "  "+gspText(g))
	add(SevDim, "  GSP-RM internals (RPC queues, heap, task state) are private RM controls, not in public NVML")
	return out
}

// healthLines are the GPU's health: the verdict line, the counters that
// are present, and the NVLink links.
func healthLines(g *live.GPUDoc, width int) []Line {
	out := []Line{{"Health", SevHead}}
	sev := SevNormal
	if h := g.Health; h != nil {
		switch h.Verdict {
		case "warning":
			sev = SevWarn
		case "critical":
			sev = SevCrit
		}
	}
	out = append(out, Line{"  " + live.HealthText(*g), sev})
	h := g.Health
	if h == nil {
		return out
	}
	keys := make([]string, 0, len(h.Counters))
	for k, v := range h.Counters {
		if v != nil {
			keys = append(keys, k+" "+strconv.FormatUint(*v, 10))
		}
	}
	slices.Sort(keys)
	for _, l := range packed(keys, width) {
		out = append(out, Line{l, SevNormal})
	}
	for _, l := range h.NVLink {
		st := "n/a"
		if l.State != nil {
			st = *l.State
		}
		s := "  nvlink " + strconv.Itoa(l.Link) + " " + st + "  speed " + live.OptUint(l.SpeedMBps, " MB/s")
		cs := make([]string, 0, len(l.Counters))
		for k, v := range l.Counters {
			if v != nil && *v != 0 {
				cs = append(cs, k+" "+strconv.FormatFloat(*v, 'g', 3, 64))
			}
		}
		slices.Sort(cs)
		if len(cs) > 0 {
			s += "  " + strings.Join(cs, " ")
		}
		lsev := SevNormal
		if st != "active" {
			lsev = SevWarn
		}
		out = append(out, Line{s, lsev})
	}
	return out
}

// gspText is what NVML gives of the GSP: the firmware's version and mode
// (read by the daemon at start; n/a before R510 or without GSP) and the GSP
// Xids (119 RPC timeout, 120 GSP error), the last one named.
func gspText(g *live.GPUDoc) string {
	s := "firmware " + orNA(g.GSPVersion) + "  mode " + orNA(g.GSPMode)
	n := uint64(0)
	for _, c := range []string{"119", "120"} {
		n += g.Xids[c]
	}
	s += "  GSP Xids (119, 120) since start " + strconv.FormatUint(n, 10)
	if x := g.LastXid; x != nil && (x.Code == 119 || x.Code == 120) {
		s += "  last " + strconv.FormatUint(x.Code, 10) + " " + x.Name
	}
	return s
}

// packed lays parts out two spaces apart on lines indented by two, as
// many on a line as width takes (one at least).
func packed(parts []string, width int) []string {
	var out []string
	line := ""
	for _, p := range parts {
		if line != "" && len([]rune(line))+2+len([]rune(p)) > width {
			out = append(out, line)
			line = ""
		}
		line += "  " + p
	}
	if line != "" {
		out = append(out, line)
	}
	return out
}

func reasons(r []string) string {
	if len(r) == 0 {
		return ""
	}
	return " (" + strings.Join(r, "; ") + ")"
}

func orNA(s string) string {
	if s == "" {
		return "n/a"
	}
	return s
}

// scrollKey moves *at by a key: ↑/↓ one, PgUp/PgDn a page (10), Home and
// End the ends (the view holds it to its last page); false for other keys.
func scrollKey(at *int, ev *tcell.EventKey) bool {
	switch ev.Key() {
	case tcell.KeyUp:
		*at = max(*at-1, 0)
	case tcell.KeyDown:
		*at++
	case tcell.KeyPgUp:
		*at = max(*at-10, 0)
	case tcell.KeyPgDn:
		*at += 10
	case tcell.KeyHome:
		*at = 0
	case tcell.KeyEnd:
		*at = 1 << 30
	default:
		return false
	}
	return true
}
