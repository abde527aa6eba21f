package sampler

import (
	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// Pre-Blackwell NVLink error counters. A GPU without the NVLink5
// NVLINK_COUNT_* fields (Hopper and older) gives its links' data-link errors
// through nvmlDeviceGetNvLinkErrorCounter, one call per link and counter:
// 18 links x 4 counters would be 72 calls a second per GPU. They are read
// round-robin instead, dlLinksPerRead links per slow sample (every link in
// 9 s on an 18-link GPU), after one full read so the per-GPU sums start
// whole (a link first read later would look like growth); a link's values
// are kept between its reads. They fill NVLink5's per-link counters
// (reading.LDL*). A refused counter stays off for Reprobe, per link and
// counter.

// dlLinksPerRead is how many links' counters one slow sample reads.
const dlLinksPerRead = 2

// dlCounter maps the per-link counters to nvmlNvLinkErrorCounter_t.
var dlCounter = [...]struct {
	id reading.LinkCounterID
	c  nvml.NvLinkErrorCounter
}{
	{reading.LDLReplay, nvml.NVLINK_ERROR_DL_REPLAY},
	{reading.LDLRecovery, nvml.NVLINK_ERROR_DL_RECOVERY},
	{reading.LDLCRCFlit, nvml.NVLINK_ERROR_DL_CRC_FLIT},
	{reading.LDLCRCData, nvml.NVLINK_ERROR_DL_CRC_DATA},
}

// dlCounters holds the counters as last read per link, their capability
// cache and the round-robin position (worker only).
type dlCounters struct {
	v      [reading.MaxLinks][len(dlCounter)]reading.Opt[uint64]
	off    [reading.MaxLinks][len(dlCounter)]int64 // mono() until which the counter stays off
	next   int                                     // the next link to read
	primed bool                                    // every link was read once
}

// hasNVLink5 reports whether any link of out has an NVLink5 counter.
func hasNVLink5(out *reading.NVLinks) bool {
	for l := range min(out.N, reading.MaxLinks) {
		for c, d := range reading.LinkDefs {
			if d.Field != 0 && out.L[l].C[c].OK {
				return true
			}
		}
	}
	return false
}

// readDL reads the pre-Blackwell counters due on this slow sample, where
// the GPU's links have no NVLink5 counters, and fills every link's last
// values into out.
func (g *GPU) readDL(out *reading.NVLinks) {
	d := &g.hlt.dl
	n := min(out.N, reading.MaxLinks)
	if n == 0 || hasNVLink5(out) || !g.syms.Has(FnNVLinkErrorCounter) {
		return
	}
	todo := dlLinksPerRead
	if !d.primed {
		d.next, todo = 0, n
	}
	for range min(todo, n) {
		l := d.next % n
		d.next = (l + 1) % n
		for i, dc := range dlCounter {
			if g.lost {
				return
			}
			if !g.on(d.off[l][i]) {
				continue
			}
			g.begin(FnNVLinkErrorCounter)
			v, ret := g.dev.GetNvLinkErrorCounter(l, dc.c)
			g.begin(FnNone)
			switch c := g.note(FnNVLinkErrorCounter, &d.off[l][i], ret, g.cfg.Reprobe, "link", l, "counter", reading.LinkDefs[dc.id].Name); {
			case c == ClassOK:
				d.v[l][i] = reading.Some(v)
			case c.capability():
				d.v[l][i] = reading.Opt[uint64]{}
			case c == ClassGPULost:
				g.lost = true
			}
			// Another failure keeps the link's last value for this round.
		}
	}
	d.primed = true
	for l := range n {
		for i, dc := range dlCounter {
			out.L[l].C[dc.id] = d.v[l][i]
		}
	}
}
