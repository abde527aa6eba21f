package snapshot

import (
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
	"github.com/gpu-telemetry/gpu-telemetry/sink"
)

// HealthTitle is the title of the health counter section.
const HealthTitle = "Health counters"

// HealthData is what the health section shows, from the sampler's slow tier.
type HealthData struct {
	At      time.Time // the sample that carried the counters; zero: none read
	Vals    [reading.NumReadings]reading.Opt[uint64]
	Changed [reading.NumReadings]time.Time
	Links   reading.NVLinks
	Level   string   // ok, warning, critical
	Reasons []string // the verdict's reasons

	RemapHist *reading.RemapHistogram // as last read; nil: never
}

// HealthSection renders the "Health counters" section: every counter with
// its value ("n/a" when absent) and last change, then the NVLink table.
func HealthSection(h HealthData, now time.Time) Section {
	if h.At.IsZero() {
		return Section{HealthTitle, "no health counters: none read yet\n"}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "read by the sample at %s, %s before this snapshot\n", h.At.Format(sink.TimestampLayout), age(now.Sub(h.At)))
	verdict := h.Level
	if len(h.Reasons) > 0 {
		verdict += " (" + strings.Join(h.Reasons, ", ") + ")"
	}
	fmt.Fprintf(&b, "verdict: %s\n", verdict)
	tw := tabwriter.NewWriter(&b, 0, 0, 1, ' ', 0) // the counter column: the longest name
	fmt.Fprintf(tw, "COUNTER\t%16s  %s\n", "VALUE", "LAST CHANGE")
	for _, id := range reading.HealthIDs {
		val := "n/a"
		if v := h.Vals[id]; v.OK {
			val = string(reading.AppendHealthCell(nil, id, v))
		}
		ch := "-"
		if t := h.Changed[id]; !t.IsZero() {
			ch = t.Format(sink.TimestampLayout) + " (" + age(now.Sub(t)) + " before)"
		}
		fmt.Fprintf(tw, "%s\t%16s  %s\n", reading.Table[id].Name, val, ch)
	}
	tw.Flush()
	if u, ok := reading.FabricClusterUUID((*reading.Values)(&h.Vals)); ok {
		fmt.Fprintf(&b, "\nNVLink fabric cluster: %s\n", u)
	}
	if r := h.RemapHist; r != nil {
		fmt.Fprintf(&b, "\nrow remapper histogram (memory banks by spare rows left): %s; read at %s (%s before)\n", r, r.At.Format(sink.TimestampLayout), age(now.Sub(r.At)))
	} else {
		b.WriteString("\nrow remapper histogram: n/a\n")
	}
	if h.Links.N == 0 {
		b.WriteString("\nNVLink: no links read\n")
		return Section{HealthTitle, b.String()}
	}
	fmt.Fprintf(&b, "\nNVLink: %d links, read at %s\n", h.Links.N, h.Links.At.Format(sink.TimestampLayout))
	// A counter no link answered is not a column (an H100 has none of the
	// NVLink5 ones, a B200 none of the pre-Blackwell ones): it is named once.
	links := h.Links.L[:min(h.Links.N, reading.MaxLinks)]
	var cols []reading.LinkCounterID
	var absent []string
	for c, d := range reading.LinkDefs {
		if slices.ContainsFunc(links, func(k reading.Link) bool { return k.C[c].OK }) {
			cols = append(cols, reading.LinkCounterID(c))
		} else {
			absent = append(absent, d.Name)
		}
	}
	if len(absent) > 0 {
		fmt.Fprintf(&b, "not answered by any link: %s\n", strings.Join(absent, ", "))
	}
	fmt.Fprintf(&b, "%4s  %-10s %7s %4s", "LINK", "STATE", "MB/s", "VER")
	for _, c := range cols {
		d := reading.LinkDefs[c]
		fmt.Fprintf(&b, " %*s", max(len(d.Name), 6), d.Name)
	}
	b.WriteByte('\n')
	for l := range links {
		k := &links[l]
		state := "n/a"
		if s, ok := k.State.Get(); ok {
			state = reading.LinkStateName(s)
		}
		fmt.Fprintf(&b, "%4d  %-10s %7s %4s", l, state, optf("%d", k.SpeedMBps), optf("%d", k.Version))
		for _, c := range cols {
			d := reading.LinkDefs[c]
			cell := optf("%d", k.C[c])
			if v, ok := k.C[c].Get(); ok && d.BER {
				cell = fmt.Sprintf("%.2g", reading.DecodeBER(v))
			}
			fmt.Fprintf(&b, " %*s", max(len(d.Name), 6), cell)
		}
		b.WriteByte('\n')
	}
	return Section{HealthTitle, b.String()}
}
