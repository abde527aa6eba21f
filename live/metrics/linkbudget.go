package metrics

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/gpu-telemetry/gpu-telemetry/live"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// The series budget of the per-link NVLink series. A fleet's Prometheus
// holds every host's series: a B200 has 18 links and a dozen counters per
// link, so exporting all of them would add about 1,700 series to a host of 8
// (about 870 without). The per-GPU sums (health_nvlink_*) are always
// exported; per-link series follow LinkSeries.

// LinkSeries says which NVLink links get per-link series.
type LinkSeries uint8

const (
	// LinkSeriesErrors (the default) exports a link only while it is worth
	// showing: not active, or an error or recovery counter above 0, or an
	// effective BER above DCGM's 1e-12. Such a link exports every counter
	// it has (zeros too, so its row reads whole); a healthy link exports
	// none. Symbol errors and the symbol BER alone do not count: they are
	// before forward error correction and grow on healthy links.
	LinkSeriesErrors LinkSeries = iota
	// LinkSeriesAll exports every link's state (down only) and counters.
	LinkSeriesAll
	// LinkSeriesNone exports no per-link series: the GPU sums only
	// (GPUNVLinkDown, which alerts per link, then has no input; the
	// nvlink_down health reason still does).
	LinkSeriesNone
)

// linkSeriesNames are the --metrics-nvlink-links values.
var linkSeriesNames = [...]string{LinkSeriesErrors: "errors", LinkSeriesAll: "all", LinkSeriesNone: "none"}

func (m LinkSeries) String() string {
	if int(m) < len(linkSeriesNames) {
		return linkSeriesNames[m]
	}
	return "LinkSeries(" + strconv.Itoa(int(m)) + ")"
}

// UnmarshalText parses a --metrics-nvlink-links value: all, errors or none
// (encoding.TextUnmarshaler, the flag).
func (m *LinkSeries) UnmarshalText(b []byte) error {
	i := slices.Index(linkSeriesNames[:], string(b))
	if i < 0 {
		return fmt.Errorf("%q: want all, errors or none", b)
	}
	*m = LinkSeries(i)
	return nil
}

// MarshalText implements encoding.TextMarshaler.
func (m LinkSeries) MarshalText() ([]byte, error) { return []byte(m.String()), nil }

// Option configures a Collector.
type Option func(*Collector)

// NVLinkLinks sets which links get per-link series (default LinkSeriesErrors).
func NVLinkLinks(m LinkSeries) Option { return func(c *Collector) { c.linkSeries = m } }

// berWorthShowing is DCGM's NVLink5 health watch limit: an effective BER
// above 1e-12 fails.
const berWorthShowing = 1e-12

// linkWorthShowing reports whether a link has state or errors worth a
// series of its own.
func linkWorthShowing(k *reading.Link) bool {
	if k.State.OK && !k.Up() {
		return true
	}
	for c := range reading.LinkDefs {
		v, ok := k.C[c].Get()
		switch {
		case !ok || v == 0:
		case reading.LinkCounterID(c) == reading.LEffectiveBER:
			if reading.DecodeBER(v) > berWorthShowing {
				return true
			}
		case reading.LinkCounterID(c) == reading.LSymbolErrors || reading.LinkCounterID(c) == reading.LSymbolBER:
		default:
			return true
		}
	}
	return false
}

// links adds the per-link series of g's links as c.linkSeries says.
func (w *walker) links(g *live.GPU, gpu, uuid string) {
	l := g.Links
	mode := w.c.linkSeries
	if l == nil || mode == LinkSeriesNone {
		return
	}
	for i := range min(l.N, reading.MaxLinks) {
		k := &l.L[i]
		if mode == LinkSeriesErrors && !linkWorthShowing(k) {
			continue
		}
		link := strconv.Itoa(i)
		if st, ok := k.State.Get(); ok && !k.Up() {
			w.add(mLinkDn, 1, gpu, uuid, link, reading.LinkStateName(st))
		}
		for c, d := range reading.LinkDefs {
			v, ok := k.C[c].Get()
			switch {
			case !ok:
			case d.BER:
				w.add(mLinkBER, reading.DecodeBER(v), gpu, uuid, link, d.Name)
			default:
				w.add(mLinkErr, float64(v), gpu, uuid, link, d.Name)
			}
		}
	}
}
