package atop

import (
	"slices"
	"strconv"
)

// MaxBody is the longest reply body atop accepts (gpucom.c drops the
// connection on a longer one).
const MaxBody = 8192

// Newest is the newest API version served.
const Newest = 2

// procField is one integer of a per-process record.
type procField uint8

const (
	pfPID  procField = iota
	pfKind           // one character, not an integer: C compute, G graphics, U unknown
	pfGPUBusy
	pfMemBusy
	pfTimeMs
	pfMemNow
	pfMemCum
	pfSample     // version 1's divisor (reads with a memory figure)
	pfMemCumSeen // memory summed over version 2's samples (pfSeen)
	pfGPUBusyCum
	pfMemBusyCum
	pfSeen
)

// gpuField is one integer of a per-GPU record.
type gpuField uint8

const (
	gfBusyNow gpuField = iota
	gfMemBusyNow
	gfMemTotal
	gfMemUsed
	gfSamples
	gfBusyCum
	gfMemBusyCum
	gfMemUsedCum
)

// layout is one API version's field order: what atop's gpuparse and pidparse
// scan, in that order. Both versions send the per-GPU record as
// "@busy membusy memtotal memused samples busycum membusycum memusedcum" and
// a process record as "#<state> <fields>".
type layout struct {
	gpu  []gpuField
	proc []procField
}

// layouts is indexed by API version.
var layouts = [Newest + 1]layout{
	// Version 1 (atop 2.8 to 2.12, TCP): gpucom.c's pidparse scans
	// "%c %ld %d %d %lld %lld %lld %lld": state, PID, busy % and memory busy %
	// (atopgpud's accounting figures), accounting ms, memory now and summed
	// (KiB), samples.
	1: {
		gpu:  []gpuField{gfBusyNow, gfMemBusyNow, gfMemTotal, gfMemUsed, gfSamples, gfBusyCum, gfMemBusyCum, gfMemUsedCum},
		proc: []procField{pfPID, pfGPUBusy, pfMemBusy, pfTimeMs, pfMemNow, pfMemCum, pfSample},
	},
	// Version 2 (atop 2.13, abstract socket): established from Debian's
	// atop 2.13.0-1 binary (sid), whose only process scan is
	// "%c %ld %c %lld %lld %lld %lld %lld", and by serving it distinct
	// figures: state, PID, kind (C, G or U), busy % and memory busy % summed
	// over the samples, memory now and summed (KiB) over the same samples,
	// samples. atop shows each busy % as the growth of its sum divided by the
	// growth of the samples; the samples are the reads that had every figure
	// (procStat says which), so that one divisor fits all three sums. The
	// per-GPU record is unchanged (same scan as version 1).
	2: {
		gpu:  []gpuField{gfBusyNow, gfMemBusyNow, gfMemTotal, gfMemUsed, gfSamples, gfBusyCum, gfMemBusyCum, gfMemUsedCum},
		proc: []procField{pfPID, pfKind, pfGPUBusyCum, pfMemBusyCum, pfMemNow, pfMemCumSeen, pfSeen},
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

func (g *gpuStat) value(f gpuField) int64 {
	switch f {
	case gfBusyNow:
		return g.busyNow
	case gfMemBusyNow:
		return g.memBusyNow
	case gfMemTotal:
		return g.memTotal
	case gfMemUsed:
		return g.memUsed
	case gfSamples:
		return g.samples
	case gfBusyCum:
		return g.busyCum
	case gfMemBusyCum:
		return g.memBusyCum
	case gfMemUsedCum:
		return g.memUsedCum
	}
	return na
}

func (p *procStat) value(f procField) int64 {
	switch f {
	case pfPID:
		return int64(p.pid)
	case pfGPUBusy:
		return p.gpuBusy
	case pfMemBusy:
		return p.memBusy
	case pfTimeMs:
		return p.timeMs
	case pfMemNow:
		return p.memNow
	case pfMemCum:
		return p.memCum
	case pfMemCumSeen:
		return p.memCumSeen
	case pfSample:
		return p.sample
	case pfGPUBusyCum:
		return p.gpuBusyCum
	case pfMemBusyCum:
		return p.memBusyCum
	case pfSeen:
		return p.seen
	}
	return na
}

// Types is the body of the reply to 'T': the GPU count, then per GPU
// "@busid devname tasksupport".
func (a *Accumulator) Types(version byte) []byte {
	a.mu.Lock()
	defer a.mu.Unlock()
	b := strconv.AppendInt(nil, int64(len(a.gpus)), 10)
	for i := range a.gpus {
		g := &a.gpus[i]
		b = append(b, '@')
		b = append(b, g.busID...)
		b = append(b, ' ')
		b = append(b, g.name...)
		b = append(b, ' ')
		b = strconv.AppendInt(b, int64(g.tasks), 10)
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
	l := &layouts[Version(version)]
	a.mu.Lock()
	defer a.mu.Unlock()
	gpuRecs := make([][]byte, len(a.gpus))
	size := 0
	var recs []record
	for i := range a.gpus {
		g := &a.gpus[i]
		r := []byte{'@'}
		for k, f := range l.gpu {
			if k > 0 {
				r = append(r, ' ')
			}
			r = strconv.AppendInt(r, g.value(f), 10)
		}
		gpuRecs[i] = r
		size += len(r)
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
		r.text = append(r.text, '#', r.state)
		for _, f := range l.proc {
			r.text = append(r.text, ' ')
			if f == pfKind {
				r.text = append(r.text, r.st.kind)
				continue
			}
			r.text = strconv.AppendInt(r.text, r.st.value(f), 10)
		}
	}
	// Choose the records that fit, busiest first.
	order := make([]int, len(recs))
	for k := range order {
		order[k] = k
	}
	slices.SortStableFunc(order, func(x, y int) int {
		a, b := &recs[x].st, &recs[y].st
		if a.gpuBusy != b.gpuBusy {
			return int(b.gpuBusy - a.gpuBusy)
		}
		if a.memNow != b.memNow {
			if b.memNow > a.memNow {
				return 1
			}
			return -1
		}
		return 0
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
