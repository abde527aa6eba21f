package monitor

import (
	"cmp"
	"strconv"
	"strings"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/anomaly"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
	"github.com/gpu-telemetry/gpu-telemetry/sink"
	"github.com/gpu-telemetry/gpu-telemetry/snapshot"
)

// HealthView is a GPU's hardware health as the worker last recorded it,
// immutable once published: crash snapshots, status and metrics read it from
// memory, also while NVML is hung. Level and Reasons are Verdict's.
type HealthView struct {
	snapshot.HealthData
	Verdict anomaly.HealthVerdict
	// Cluster is the fabric's cluster UUID as last read ("none": in no
	// cluster; "": never read), for its events.log line on a change.
	Cluster string
}

// Health returns the GPU's latest health view (zero before the first
// sample). Safe from any goroutine.
func (gs *gpuState) Health() HealthView {
	if p := gs.health.Load(); p != nil {
		return *p
	}
	return HealthView{}
}

// recordHealth writes the sample's health changes to events.log (a baseline
// with the first reading, a line per changed counter, link, and health
// reason that began, but the critical one, written with its incident) and
// publishes the GPU's health view. Worker goroutine only.
//
// A view is 8.6 kB (a value and a change time per reading) and the NVLink
// reading 4.8 kB: they are copied only when a new view is published, not
// at every sample (they were the largest cost of a healthy sample).
func (gs *gpuState) recordHealth(s *reading.Sample, r *anomaly.Result, critical sampleIncident) {
	m := gs.m
	now := s.Time
	prev := gs.health.Load()
	if prev == nil {
		prev = new(HealthView) // before the first sample
	}
	changed := r.HealthBaseline || r.NumHealthChanges() > 0 || r.Verdict != prev.Verdict

	if r.HealthBaseline {
		line := gs.event(now, sink.TypeHealthBaseline)
		for _, id := range reading.HealthIDs {
			d := &reading.Table[id]
			if c := s.Values[id]; c.OK {
				line.Fields = append(line.Fields, sink.Field{Key: d.Name, Value: string(reading.AppendHealthCell(nil, id, c))})
			}
		}
		if u, ok := reading.FabricClusterUUID(&s.Values); ok {
			line.Fields = append(line.Fields, sink.Field{Key: "fabric_cluster_uuid", Value: u})
		}
		if h := gs.g.RemapHistogram(); h != nil {
			line.Fields = append(line.Fields, sink.Field{Key: "remap_histogram", Value: h.String()})
		}
		m.eventLine(line)
		// system-info.txt says which groups the GPU supports, known now.
		m.side.queue("rewriting system-info.txt with the GPU's health counter groups", gs.idx, m.writeSystemInfo)
	}
	for i := range r.NumHealthChanges() {
		c := r.HealthChange(i)
		d := &reading.Table[c.ID]
		line := gs.event(now, sink.TypeHealth, "counter", d.Name,
			"from", string(reading.AppendHealthCell(nil, c.ID, reading.Some(c.From))),
			"to", string(reading.AppendHealthCell(nil, c.ID, reading.Some(c.To))))
		if d.Kind == reading.HealthCount && c.To >= c.From {
			line.Fields = append(line.Fields, sink.Field{Key: "delta", Value: "+" + strconv.FormatUint(c.To-c.From, 10)})
		}
		if d.Text != nil {
			line.Fields = append(line.Fields, sink.Field{Key: "meaning", Value: d.Text(c.To)})
		}
		if c.ID == reading.HRecoveryAction {
			line.Fields = append(line.Fields, sink.Field{Key: "action", Value: reading.RecoveryActionName(c.To)})
		}
		m.eventLine(line)
	}
	// The fabric's cluster UUID, two readings of 8 bytes: one line in its
	// text when the GPU moves to another cluster (or into or out of one:
	// "none"), as the health counters' lines (an absent reading is no
	// change; one that appears after the baseline is, from n/a).
	cluster := prev.Cluster
	is, ok := reading.FabricClusterUUID(&s.Values)
	if !ok { // "none": all zero, in no cluster; or not read
		is, ok = "none", s.Values[reading.FabricCluster0].OK && s.Values[reading.FabricCluster8].OK
	}
	if ok && is != cluster {
		if !r.HealthBaseline {
			m.eventLine(gs.event(now, sink.TypeHealth, "counter", "fabric_cluster_uuid", "from", cmp.Or(cluster, "n/a"), "to", is))
		}
		cluster, changed = is, true
	}
	remap := gs.recordRemapHist(prev.RemapHist, r.HealthBaseline, now)
	changed = changed || remap != prev.RemapHist
	links := gs.g.NVLinks()
	if !links.At.IsZero() {
		changed = changed || !links.At.Equal(prev.Links.At)
		for _, c := range gs.links.Check(links, now) {
			kv := []string{"counter", "nvlink_" + c.Counter, "link", strconv.Itoa(c.Link)}
			switch {
			case c.State:
				kv = append(kv, "from", reading.LinkStateName(uint32(c.From)), "to", reading.LinkStateName(uint32(c.To)))
			case strings.HasSuffix(c.Counter, "_ber"):
				ber := func(v uint64) string { return strconv.FormatFloat(reading.DecodeBER(v), 'g', 3, 64) }
				kv = append(kv, "from", ber(c.From), "to", ber(c.To))
			default:
				kv = append(kv, "from", strconv.FormatUint(c.From, 10), "to", strconv.FormatUint(c.To, 10))
				if c.To >= c.From {
					kv = append(kv, "delta", "+"+strconv.FormatUint(c.To-c.From, 10))
				}
			}
			m.eventLine(gs.event(now, sink.TypeHealth, kv...))
		}
	}
	began := r.Verdict.Reasons &^ prev.Verdict.Reasons
	for rs := range anomaly.NumHealthReasons {
		if began&(1<<rs) == 0 {
			continue
		}
		line := healthReasonLine(gs.event(now, ""), rs, gs.reasonDetail(rs))
		if line.Type == critical.line.Type && line.Get("reason") == critical.line.Get("reason") {
			continue // written with its incident
		}
		if link, ok := anomaly.SampleLinkText(s); ok && rs == anomaly.ReasonPCIeDegraded {
			line.Fields = append(line.Fields, sink.Field{Key: "link", Value: link}) // "x8 of x16, gen 4 of 5"
		}
		m.eventLine(line)
	}
	if !changed {
		return
	}
	v := new(HealthView)
	*v = *prev
	v.At, v.Vals, v.Verdict = s.Time, s.Values, r.Verdict
	for i := range r.NumHealthChanges() {
		v.Changed[r.HealthChange(i).ID] = now
	}
	v.Cluster, v.RemapHist, v.Links = cluster, remap, reading.NVLinks{}
	if !links.At.IsZero() {
		v.Links = *links
	}
	v.Level, v.Reasons = v.Verdict.Level(), v.Verdict.Names()
	gs.health.Store(v)
}

// recordRemapHist returns the row remapper histogram a new view holds
// (read at start and when the remap counts change), prev being the last
// published, and writes its change to events.log; the first is in the
// baseline line when baseline.
func (gs *gpuState) recordRemapHist(prev *reading.RemapHistogram, baseline bool, now time.Time) *reading.RemapHistogram {
	h := gs.g.RemapHistogram()
	if h == nil || h == prev {
		return prev
	}
	switch {
	case prev == nil && baseline:
	case prev == nil:
		gs.m.eventLine(gs.event(now, sink.TypeHealth, "counter", "remap_histogram", "from", "n/a", "to", h.String()))
	case prev.Buckets() != h.Buckets():
		gs.m.eventLine(gs.event(now, sink.TypeHealth, "counter", "remap_histogram", "from", prev.String(), "to", h.String()))
	}
	return h
}

// healthCritical is the critical event of a critical health reason that
// began at t (zero: none).
func (gs *gpuState) healthCritical(t time.Time, r *anomaly.Result) sampleIncident {
	if rs, ok := r.HealthCritical.Get(); ok {
		d, detail := anomaly.HealthReasonDefs[rs], gs.reasonDetail(rs)
		c := sampleIncident{fault(t, "health: "+d.Name+" ("+detail+")"), healthReasonLine(gs.event(t, ""), rs, detail)}
		if rs == anomaly.ReasonNVSwitchFatal {
			gs.sxidIncident(&c)
		}
		return c
	}
	return sampleIncident{}
}

// healthReasonLine makes line the HEALTH_WARNING or HEALTH_CRITICAL line of
// health reason rs, with its detail (gpuState.reasonDetail).
func healthReasonLine(line sink.EventLine, rs anomaly.HealthReason, detail string) sink.EventLine {
	d := anomaly.HealthReasonDefs[rs]
	line.Type = sink.TypeHealthWarning
	if d.Critical {
		line.Type = sink.TypeHealthCritical
	}
	line.Fields = sink.KV("reason", d.Name, "detail", detail)
	return line
}

// healthGroupsText lists the groups a GPU answered and those it did not,
// for system-info.txt.
func healthGroupsText(g [reading.NumHealthGroups]bool, links int) string {
	var yes, no []string
	for i, name := range reading.HealthGroupNames {
		switch {
		case g[i] && reading.HealthGroup(i) == reading.GroupNVLink:
			yes = append(yes, name+" ("+strconv.Itoa(links)+" links)")
		case g[i]:
			yes = append(yes, name)
		default:
			no = append(no, name)
		}
	}
	s := "supported: " + cmp.Or(strings.Join(yes, ", "), "none")
	if len(no) > 0 {
		s += "; not supported: " + strings.Join(no, ", ")
	}
	return s
}
