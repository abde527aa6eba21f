package sampler

import (
	"sync/atomic"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// The hardware health counters (reading.HealthIDs) are read on the slow
// tier: a getter counter by its call in the sample's batch, the field
// counters after the sample in at most two nvmlDeviceGetFieldValues calls:
// the GPU-level fields (reading.HealthCall) and, on a GPU with NVLink or
// C2C links, the per-link fields (on GB200, ECC fields batched with NVLink
// counters were reported to come back N/A: DCGM issue 265). Each entry's
// own nvmlReturn decides; a refused field stays off for Reprobe, and the
// cache is cleared when the GPU's handle is had again.

// healthTier is the health counters as last read and their capability
// cache (worker only, except links and groups).
type healthTier struct {
	vals    [reading.NumReadings]reading.Opt[uint64]
	off     [reading.NumReadings]int64                                  // ns since base until which the field stays off
	linkOff [max(reading.MaxLinks, reading.MaxC2C)][numLinkFields]int64 // per link: one link's refusal is not another's
	fv      []nvml.FieldValue
	fvID    []reading.ID
	lfv     []nvml.FieldValue
	links   atomic.Pointer[reading.NVLinks] // the latest per-link reading; nil: none
	groups  atomic.Uint32                   // bit g: group g answered at least one field
	told    bool                            // logged a read put off (health_skips)
	hist    remapHist                       // the row remapper histogram (remaphist.go)
	dl      dlCounters                      // pre-Blackwell NVLink error counters (nvlinkerr.go)
	eccMode reading.Opt[uint64]             // the ECC mode last answered since the handle was had (judgeSupport)
}

// Per-link fields: the inventory three, the counters, then C2C's (its
// status, then its three error counters).
const (
	lfState = iota
	lfSpeed
	lfVersion
	lfCounter0
	lfC2CStatus   = lfCounter0 + int(reading.NumLinkCounters)
	numLinkFields = lfC2CStatus + 4
)

var linkField = func() (t [numLinkFields]uint32) {
	t[lfState], t[lfSpeed], t[lfVersion] = reading.FieldLinkState, reading.FieldLinkSpeed, reading.FieldLinkVersion
	for i, d := range reading.LinkDefs {
		t[lfCounter0+i] = d.Field
	}
	copy(t[lfC2CStatus:], []uint32{reading.FieldC2CStatus, reading.FieldC2CCRC, reading.FieldC2CReplay, reading.FieldC2CReplayB2})
	return t
}()

// resetHealth forgets the values and capability caches (a new handle: the
// driver may have been reloaded, with other support).
func (g *GPU) resetHealth() {
	h := &g.hlt
	h.vals = [reading.NumReadings]reading.Opt[uint64]{}
	h.eccMode = reading.Opt[uint64]{}
	h.off = [reading.NumReadings]int64{}
	h.linkOff = [max(reading.MaxLinks, reading.MaxC2C)][numLinkFields]int64{}
	h.links.Store(nil)
	h.hist.key, h.hist.due, h.hist.retry = [4]reading.Opt[uint64]{}, false, 0
	h.hist.last.Store(nil)
	g.off[FnRemapHistogram][0] = 0
	h.dl = dlCounters{}
}

// noLinks is the NVLink reading of a GPU without NVLink or not read yet.
var noLinks reading.NVLinks

// NVLinks returns the GPU's per-link NVLink reading as last read, never
// nil and never to be written (4.8 kB: the sample path reads it in place);
// N is 0 without NVLink (or never read). Safe from any goroutine.
func (g *GPU) NVLinks() *reading.NVLinks {
	if p := g.hlt.links.Load(); p != nil {
		return p
	}
	return &noLinks
}

// HealthGroups reports which health groups answered at least one field
// since start (system-info.txt, status). Safe from any goroutine.
func (g *GPU) HealthGroups() [reading.NumHealthGroups]bool {
	var out [reading.NumHealthGroups]bool
	b := g.hlt.groups.Load()
	for i := range out {
		out[i] = b&(1<<i) != 0
	}
	return out
}

// fieldCall makes fn's GetFieldValues call fv outside the batch, in
// flight once it has the field lock; locked is false when another GPU held
// the lock (counted, logged once).
func (g *GPU) fieldCall(fn Fn, fv []nvml.FieldValue) (ok, locked bool) {
	ret, locked := g.exec.Load().fields(fv, &g.cur, fn)
	if locked {
		return g.end(fn, 0, ret), true
	}
	if g.reg.Inc(healthSkips); !g.hlt.told {
		g.hlt.told = true
		g.log.Warn("health counters not read: another GPU holds the field lock; the last reading is kept (counted as health_skips)")
	}
	return false, false
}

// readHealth reads the health counters into g.hlt (slow samples that
// succeeded only). A GPU lost during it is noted in g.lost.
func (g *GPU) readHealth(s *reading.Sample) {
	h := &g.hlt
	var vals [reading.NumReadings]reading.Opt[uint64]
	for _, id := range reading.HealthIDs {
		if reading.Table[id].Getter != "" {
			vals[id] = s.Values[id] // read by its call in this sample's batch (interpret)
		}
	}
	if g.can(FnHealthFields, 0) {
		h.fv, h.fvID = h.fv[:0], h.fvID[:0]
		for _, id := range reading.HealthIDs {
			if d := &reading.Table[id]; d.Field == 0 || d.Call != reading.HealthCall || !g.on(h.off[id]) {
				continue
			}
			// A fresh, zeroed entry per call: values must not carry over.
			h.fv = append(h.fv, nvml.FieldValue{FieldId: reading.Table[id].Field})
			h.fvID = append(h.fvID, id)
		}
		if len(h.fv) > 0 {
			ok, locked := g.fieldCall(FnHealthFields, h.fv)
			if !locked {
				return // the last reading stays, one slow period older
			}
			if ok {
				for i := range h.fv {
					if v, ok := g.fieldEntry(&h.fv[i], &h.off[h.fvID[i]]); ok {
						vals[h.fvID[i]] = reading.Some(v)
					}
				}
			}
		}
	}
	if vals[reading.HECCMode].OK {
		h.eccMode = vals[reading.HECCMode]
	}
	judgeSupport(&vals, h.eccMode)
	g.readRemapHist(s, &vals)
	g.readLinks(s, &vals)
	h.vals = vals
	var groups uint32
	for _, id := range reading.HealthIDs {
		if vals[id].OK {
			groups |= 1 << reading.Table[id].Group
		}
	}
	h.groups.Store(h.groups.Load() | groups)
}

// fieldEntry classifies one entry of any field call, setting its cache
// entry *off when refused, and returns its value when it succeeded.
func (g *GPU) fieldEntry(fv *nvml.FieldValue, off *int64) (uint64, bool) {
	c := g.note(FnNone, off, nvml.Return(fv.NvmlReturn), g.cfg.Reprobe)
	if c == ClassOK {
		return fieldUint(fv)
	}
	g.lost = g.lost || c == ClassGPULost
	return 0, false
}

// judgeSupport drops what the driver answered but the GPU cannot have: ECC
// totals, retired pages and row remapping need ECC on (a GeForce board was
// seen answering the remap fields with SUCCESS and zeros: gpud, RTX 4090).
// mode is the ECC mode last answered since the handle was had: it changes
// only with a reset (a new handle), so one failed read of it does not blank
// the counters.
func judgeSupport(v *[reading.NumReadings]reading.Opt[uint64], mode reading.Opt[uint64]) {
	if m, ok := mode.Get(); ok && m == 1 {
		return
	}
	for _, id := range reading.HealthIDs {
		switch d := &reading.Table[id]; {
		case id == reading.HECCMode || id == reading.HECCPending:
		case d.Group == reading.GroupECC || d.Group == reading.GroupRemap || d.Group == reading.GroupRetired:
			v[id] = reading.Opt[uint64]{}
		}
	}
}

// derivedHealth is the health counters readLinks derives from the per-link
// readings (their rows have neither field nor getter).
var derivedHealth = []reading.ID{reading.HNVLinkUp, reading.HNVLinkErrors, reading.HNVLinkRecovery, reading.HNVLinkRecoveryFailed, reading.HC2CUp, reading.HC2CErrors}

// readLinks reads the per-link NVLink and C2C fields in a call of their own
// when the GPU has links, publishes them and fills the derived sums.
func (g *GPU) readLinks(s *reading.Sample, vals *[reading.NumReadings]reading.Opt[uint64]) {
	h := &g.hlt
	var out *reading.NVLinks // published on return; nil: none
	defer func() { h.links.Store(out) }()
	nl, _ := vals[reading.HNVLinkCount].Get()
	nc, _ := vals[reading.HC2CCount].Get()
	nl, nc = min(nl, reading.MaxLinks), min(nc, reading.MaxC2C)
	if (nl == 0 && nc == 0) || g.lost || !g.can(FnNVLinkFields, 0) {
		return
	}
	type ref struct{ link, f int }
	h.lfv = h.lfv[:0]
	refs := make([]ref, 0, int(nl)*lfC2CStatus+int(nc)*4)
	ask := func(links uint64, from, to int) {
		for l := range int(links) {
			for f := from; f < to; f++ {
				if linkField[f] != 0 && g.on(h.linkOff[l][f]) { // 0: the pre-Blackwell getter's (readDL)
					h.lfv = append(h.lfv, nvml.FieldValue{FieldId: linkField[f], ScopeId: uint32(l)})
					refs = append(refs, ref{l, f})
				}
			}
		}
	}
	ask(nl, lfState, lfC2CStatus)
	ask(nc, lfC2CStatus, numLinkFields)
	if len(h.lfv) == 0 {
		return
	}
	ok, locked := g.fieldCall(FnNVLinkFields, h.lfv)
	if !locked {
		if out = h.links.Load(); out != nil { // kept, one slow period older
			for _, id := range derivedHealth {
				vals[id] = h.vals[id]
			}
		}
		return
	}
	if !ok {
		return
	}
	links := &reading.NVLinks{At: s.Time, N: int(nl)}
	// add sums v into derived counter id: present once any link gave one.
	add := func(id reading.ID, v uint64) { vals[id] = reading.Some(vals[id].V + v) }
	for i := range h.lfv {
		r := refs[i]
		v, ok := g.fieldEntry(&h.lfv[i], &h.linkOff[r.link][r.f])
		if !ok {
			continue
		}
		switch k := &links.L[r.link]; {
		case r.f == lfState:
			k.State = reading.Some(uint32(v))
		case r.f == lfSpeed:
			k.SpeedMBps = reading.Some(uint32(v))
		case r.f == lfVersion:
			k.Version = reading.Some(uint32(v))
		case r.f < lfC2CStatus:
			k.C[r.f-lfCounter0] = reading.Some(v)
		case r.f == lfC2CStatus:
			add(reading.HC2CUp, b2u(v == 1))
		default:
			add(reading.HC2CErrors, v)
		}
	}
	if nl == 0 {
		return
	}
	g.readDL(links)
	out = links
	for l := range out.N {
		k := &out.L[l]
		if k.State.OK {
			add(reading.HNVLinkUp, b2u(k.Up()))
		}
		for c, d := range reading.LinkDefs {
			v, ok := k.C[c].Get()
			switch {
			case !ok:
			case d.Error:
				add(reading.HNVLinkErrors, v)
			case reading.LinkCounterID(c) == reading.LRecoveryOK || reading.LinkCounterID(c) == reading.LDLRecovery:
				add(reading.HNVLinkRecovery, v)
			case reading.LinkCounterID(c) == reading.LRecoveryFailed:
				add(reading.HNVLinkRecoveryFailed, v)
			}
		}
	}
}

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}
