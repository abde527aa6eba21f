package top

import (
	"math"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gpu-telemetry/gpu-telemetry/live"
)

// BufferLen is how many one-second samples the view keeps per GPU: the 10
// minutes the daemon's history ring serves, behind the short-term charts
// (gputop's 600-sample live buffer).
const BufferLen = 600

// chartKeys are the readings the buffer keeps for the charts, by their key
// in GPUDoc.
var chartKeys = []string{"temperature_c", "power_w", "gpu_util_pct", "memory_util_pct"}

// Model is what every view renders from: the latest document applied, why
// the last fetch failed (nil: it answered), the client-side buffer of
// recent readings, and the GPU selected. Views read it; only App changes it.
type Model struct {
	Doc     *live.Doc
	Err     error
	Fetched time.Time // when Doc (or Err) came
	Paused  bool      // new documents are held, not applied
	// Sel is the Index of the selected GPU (live.GPUDoc.Index).
	Sel  int
	hist map[string]*buffer // by GPU UUID
}

// buffer is one GPU's recent readings, one value a second, oldest first,
// at most BufferLen; nil is an absent reading, every reading of a GPU not
// answering (the chart shows the gap, never the last values again), and
// each second no document came for (paused, fetches failing, a remote
// document missed), so that a 60 s chart covers 60 s. last is the time of
// the newest value's document (or, seeded from a history, the history's
// end at the document's offset into its second), seen that of the newest
// document applied: a document not newer adds nothing. The PCIe byte counters' previous values make the
// throughput.
type buffer struct {
	series       map[string][]*float64
	last, seen   time.Time
	prevTX       float64
	prevRX       float64
	prevAt       time.Time
	txBps, rxBps *float64
}

// Apply takes a new document: it becomes the one shown, and each GPU's
// readings are appended to its buffer, (re)seeded from the document's
// History when the daemon sent one (the first document, and the first
// after a failure or a new connection: the daemon's ring fills the seconds
// the view missed). A document more than clockStepBack before the newest
// one applied starts the GPU's buffer again.
func (m *Model) Apply(d live.Doc, at time.Time) {
	m.Doc, m.Err, m.Fetched = &d, nil, at
	if m.hist == nil {
		m.hist = map[string]*buffer{}
	}
	for i := range d.GPUs {
		g := &d.GPUs[i]
		b := m.hist[g.UUID]
		if b == nil || b.seen.Sub(d.Time) > clockStepBack {
			// New, or the daemon's wall clock stepped back: its documents
			// cannot be placed after the buffered seconds, so the buffer
			// starts again from this one (and its History, if it came).
			b = &buffer{series: map[string][]*float64{}}
			m.hist[g.UUID] = b
		}
		if h := g.History; h != nil && d.Time.After(b.seen) {
			for _, k := range chartKeys {
				b.series[k] = tail(perSecond(h.Values(k), h.StepS))
			}
			// The history's last value is of the second h.End; the
			// document's own value goes at its second after it, so last
			// takes the document's offset into its second: a history that
			// ends with the document's second (the daemon's: h.End is
			// d.Time's second) is not given that second twice.
			b.last = h.End.Add(d.Time.Sub(d.Time.Truncate(time.Second)))
		}
		b.add(g, d.Time)
	}
	if m.GPU() == nil && len(d.GPUs) > 0 {
		m.Sel = d.GPUs[0].Index
	}
}

// clockStepBack is how far before the newest document applied a document
// may be and still be a late one of the same clock (an answer cached or
// fetched slowly); one more before it means the daemon's wall clock
// stepped back.
const clockStepBack = 2 * time.Second

// perSecond is a history of one value a step seconds as one value a
// second, the buffer's step: a value repeated for a longer step, the last
// of each second kept for a shorter one; none for a step that is not
// positive.
func perSecond(v []*float64, step float64) []*float64 {
	var out []*float64
	switch {
	case step <= 0:
	case step >= 1:
		n := int(math.Round(step))
		for _, x := range v {
			for range n {
				out = append(out, x)
			}
		}
	default:
		k := int(math.Round(1 / step))
		for i := len(v) - 1; i >= 0; i -= k {
			out = append(out, v[i])
		}
		slices.Reverse(out)
	}
	return out
}

func tail(v []*float64) []*float64 {
	if len(v) > BufferLen {
		return v[len(v)-BufferLen:]
	}
	return v
}

// add appends the readings of g in the document of time now, after a nil
// for each whole second missed since the last value (a document less than
// half a second after it is of the same second: not appended again).
func (b *buffer) add(g *live.GPUDoc, now time.Time) {
	if !now.After(b.seen) {
		return
	}
	b.seen = now
	answering := g.SampleTime != nil && g.State == live.StateAnswering.String()
	if steps := secondsSince(b.last, now); steps > 0 {
		b.last = now
		for _, k := range chartKeys {
			var p *float64
			if n, ok := g.Reading(k).Num(); ok && answering {
				p = &n
			}
			s := b.series[k]
			s = append(s, make([]*float64, min(steps-1, BufferLen))...)
			b.series[k] = tail(append(s, p))
		}
	}
	b.txBps, b.rxBps = nil, nil
	if !answering {
		return
	}
	t := *g.SampleTime
	tx, okT := g.Reading("pcie_tx_bytes").Num()
	rx, okR := g.Reading("pcie_rx_bytes").Num()
	if okT && okR {
		if dt := t.Sub(b.prevAt).Seconds(); !b.prevAt.IsZero() && dt > 0 && tx >= b.prevTX && rx >= b.prevRX {
			t1, r1 := (tx-b.prevTX)/dt, (rx-b.prevRX)/dt
			b.txBps, b.rxBps = &t1, &r1
		}
		b.prevTX, b.prevRX, b.prevAt = tx, rx, t
	}
}

// secondsSince is how many seconds of the buffer's step now is after
// last, rounded (a document's time jitters by the daemon's answer cache
// and the fetch: 1 s ± 0.1 s is one step); 1 when there is no last value.
func secondsSince(last, now time.Time) int {
	if last.IsZero() {
		return 1
	}
	return int(min(math.Round(now.Sub(last).Seconds()), 2*BufferLen))
}

// Series is the buffered values of reading key on the GPU with uuid,
// oldest first (nil: none yet).
func (m *Model) Series(uuid, key string) []*float64 {
	if b := m.hist[uuid]; b != nil {
		return b.series[key]
	}
	return nil
}

// PCIeRate is the GPU's PCIe throughput in bytes a second from the
// cumulative byte counters' last two samples; ok is false until there are
// two.
func (m *Model) PCIeRate(uuid string) (tx, rx float64, ok bool) {
	b := m.hist[uuid]
	if b == nil || b.txBps == nil {
		return 0, 0, false
	}
	return *b.txBps, *b.rxBps, true
}

// GPU is the selected GPU in the document, nil when there is none.
func (m *Model) GPU() *live.GPUDoc {
	if m.Doc == nil {
		return nil
	}
	for i := range m.Doc.GPUs {
		if m.Doc.GPUs[i].Index == m.Sel {
			return &m.Doc.GPUs[i]
		}
	}
	return nil
}

// Step selects the GPU by in the document's order after (by > 0) or before
// the selected one, staying at either end.
func (m *Model) Step(by int) {
	if m.Doc == nil || len(m.Doc.GPUs) == 0 {
		return
	}
	at := 0
	for i, g := range m.Doc.GPUs {
		if g.Index == m.Sel {
			at = i
		}
	}
	at = min(max(at+by, 0), len(m.Doc.GPUs)-1)
	m.Sel = m.Doc.GPUs[at].Index
}

// Sev is how a line is drawn: its severity, or its part in the frame.
type Sev uint8

// The severities, the plainest first.
const (
	SevNormal Sev = iota
	SevDim        // a note: absent data, what NVML cannot give
	SevHead       // a title or the column heads
	SevWarn       // a warning: health warning, throttling, flags
	SevCrit       // failing, critical, an Xid
	SevSel        // the highlighted row
	SevBar        // the footer
)

// Line is one screen line: its text, exactly the screen's width, and how
// it is drawn.
type Line struct {
	Text string
	Sev  Sev
}

// pad is s cut or padded with spaces to exactly width runes.
func pad(s string, width int) string {
	s = cut(s, width)
	if n := utf8.RuneCountInString(s); n < width {
		s += strings.Repeat(" ", width-n)
	}
	return s
}

// page is lines from the from'th (held so the last page is full), at most
// height of them, each padded to width; from is returned as held.
func page(lines []Line, from, width, height int) ([]Line, int) {
	height = max(height, 0)
	from = min(max(from, 0), max(len(lines)-height, 0))
	out := lines[from:min(len(lines), from+height)]
	res := make([]Line, len(out))
	for i, l := range out {
		res[i] = Line{pad(l.Text, width), l.Sev}
	}
	return res, from
}

// sparkRunes are the eighths of a sparkline cell.
var sparkRunes = []rune("▁▂▃▄▅▆▇█")

// spark draws the last n values as a sparkline of n cells between lo and
// hi (a value outside is held to them); an absent value, and a time before
// the first, is a blank cell.
func spark(vals []*float64, n int, lo, hi float64) string {
	if n <= 0 {
		return ""
	}
	if len(vals) > n {
		vals = vals[len(vals)-n:]
	}
	var b strings.Builder
	b.WriteString(strings.Repeat(" ", n-len(vals)))
	for _, v := range vals {
		if v == nil || hi <= lo {
			b.WriteByte(' ')
			continue
		}
		i := int((*v - lo) / (hi - lo) * float64(len(sparkRunes)-1))
		b.WriteRune(sparkRunes[min(max(i, 0), len(sparkRunes)-1)])
	}
	return b.String()
}
