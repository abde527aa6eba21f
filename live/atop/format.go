package atop

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
)

// MaxBody is the longest reply body atop accepts (gpucom.c drops the
// connection on a longer one).
const MaxBody = 8192

// Newest is the newest API version served.
const Newest = 2

// appendInts appends each of vs after a space.
func appendInts(b []byte, vs ...int64) []byte {
	for _, v := range vs {
		b = strconv.AppendInt(append(b, ' '), v, 10)
	}
	return b
}

// appendGPU appends a GPU's record as both API versions send it, what atop's
// gpuparse scans: "@busy membusy memtotal memused samples busycum
// membusycum memusedcum".
func appendGPU(b []byte, g *gpuStat) []byte {
	b = strconv.AppendInt(append(b, '@'), g.busy.now, 10)
	return appendInts(b, g.memBusy.now, g.memTotal, g.memUsed.now, g.samples, g.busy.cum, g.memBusy.cum, g.memUsed.cum)
}

// procLayouts, indexed by API version, append a process record's fields
// after "#<state>", what atop's pidparse scans, in that order.
var procLayouts = [Newest + 1]func(b []byte, p *procStat) []byte{
	// Version 1 (atop 2.8 to 2.12, TCP): gpucom.c's pidparse scans
	// "%c %ld %d %d %lld %lld %lld %lld": state, PID, busy % and memory busy %
	// (atopgpud's accounting figures), accounting ms, memory now and summed
	// (KiB), samples (the reads with a memory figure).
	1: func(b []byte, p *procStat) []byte {
		return appendInts(b, int64(p.pid), p.gpuBusy, p.memBusy, p.timeMs, p.memNow, p.memCum, p.sample)
	},
	// Version 2 (atop 2.13, abstract socket): established from Debian's
	// atop 2.13.0-1 binary (sid), whose only process scan is
	// "%c %ld %c %lld %lld %lld %lld %lld", and by serving it distinct
	// figures: state, PID, kind (C, G or U), busy % and memory busy % summed
	// over the samples, memory now and summed (KiB) over the same samples,
	// samples. atop shows each busy % as the growth of its sum divided by the
	// growth of the samples; the samples are the reads that had every figure
	// (procStat says which), so that one divisor fits all three sums. The
	// per-GPU record is unchanged (appendGPU).
	2: func(b []byte, p *procStat) []byte {
		b = append(appendInts(b, int64(p.pid)), ' ', p.kind)
		return appendInts(b, p.gpuBusyCum, p.memBusyCum, p.memNow, p.memCumSeen, p.seen)
	},
}

// Version returns the version a request for v is answered in: v when
// served, the newest otherwise (0 included), as atopgpud does.
func Version(v byte) byte {
	if v == 0 || int(v) > Newest {
		return Newest
	}
	return v
}

// Types is the body of the reply to 'T': the GPU count, then per GPU
// "@busid devname tasksupport".
func (a *Accumulator) Types(version byte) []byte {
	a.mu.Lock()
	defer a.mu.Unlock()
	b := strconv.AppendInt(nil, int64(len(a.gpus)), 10)
	for i := range a.gpus {
		g := &a.gpus[i]
		b = fmt.Appendf(b, "@%s %s %d", g.busID, g.name, g.tasks)
	}
	return b
}

// record is one process record of a reply, before the length limit is applied.
type record struct {
	gpu    int
	state  byte // 'A' active, 'E' exited
	st     procStat
	text   []byte
	chosen bool
}

// Stats is the body of the reply to 'S' for client c: per GPU the '@'
// record, then '#A' for each active process and '#E' for each process that
// exited since c's last request (c's exited list is emptied). When the body
// would pass MaxBody, the busiest processes (GPU busy, then memory) are kept
// and left is how many records were left out; the GPU records always fit.
func (a *Accumulator) Stats(version byte, c *Client) (body []byte, left int) {
	layout := procLayouts[Version(version)]
	a.mu.Lock()
	defer a.mu.Unlock()
	gpuRecs := make([][]byte, len(a.gpus))
	size := 0
	var recs []record
	for i := range a.gpus {
		g := &a.gpus[i]
		gpuRecs[i] = appendGPU(nil, g)
		size += len(gpuRecs[i])
		if g.procsKnown {
			for _, st := range sortedProcs(g) {
				recs = append(recs, record{gpu: i, state: 'A', st: st})
			}
		}
		if c != nil && i < len(c.exited) {
			for _, st := range c.exited[i] {
				recs = append(recs, record{gpu: i, state: 'E', st: st})
			}
			c.exited[i] = nil
		}
	}
	for k := range recs {
		r := &recs[k]
		r.text = layout(append(r.text, '#', r.state), &r.st)
	}
	// Choose the records that fit, busiest first.
	order := make([]int, len(recs))
	for k := range order {
		order[k] = k
	}
	slices.SortStableFunc(order, func(x, y int) int {
		a, b := &recs[x].st, &recs[y].st
		return cmp.Or(cmp.Compare(b.gpuBusy, a.gpuBusy), cmp.Compare(b.memNow, a.memNow))
	})
	for _, k := range order {
		if size+len(recs[k].text) <= MaxBody {
			recs[k].chosen = true
			size += len(recs[k].text)
		} else {
			left++
		}
	}
	body = make([]byte, 0, size)
	k := 0
	for i := range a.gpus {
		body = append(body, gpuRecs[i]...)
		for ; k < len(recs) && recs[k].gpu == i; k++ {
			if recs[k].chosen {
				body = append(body, recs[k].text...)
			}
		}
	}
	return body, left
}
