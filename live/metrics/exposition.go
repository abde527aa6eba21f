package metrics

import (
	"io"
	"log/slog"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// The daemon writes the text exposition format itself instead of handing
// the Collector to promhttp: at one scrape a second, client_golang's path
// (a registry gathering const metrics through a channel, then expfmt) cost
// 1.6 ms of CPU per scrape for eight GPUs (BenchmarkScrapeClientGolang),
// expfmt's text encoding alone 0.42 ms, and in the daemon, with cold caches
// and freshly faulted pages for its half a megabyte of garbage, about
// 3 ms: 50 % on top of the logger's whole CPU, against a target of 5 % for
// every live interface together. WriteText walks the same series as Collect
// (walker) into buffers kept from scrape to scrape and writes them in the
// order a client_golang registry does, byte for byte the same text
// (TestWriteTextMatchesClientGolang compares them on every test view).

// ContentType is the exposition's media type (Prometheus text format 0.0.4,
// as promhttp names it).
const ContentType = "text/plain; version=0.0.4; charset=utf-8; escaping=underscores"

var (
	helpEscaper  = strings.NewReplacer(`\`, `\\`, "\n", `\n`)
	valueEscaper = strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`)
)

// WriteText writes one consistent reading of the board in the text
// exposition format. Concurrent calls take turns to build (tens of
// microseconds), not to write: a slow reader holds only its own buffer.
//
// It checks nothing that client_golang's registry checks at Gather
// (duplicate series, label counts, valid UTF-8): the families and their
// labels are fixed in this package, the tests run the registry over the
// same Collector (TestWriteTextMatchesClientGolang, which fails on any such
// error) and promtool over the output, and strings from the driver are made
// valid UTF-8 where the sampler reads them.
func (c *Collector) WriteText(w io.Writer) error {
	var out []byte
	select {
	case out = <-c.spare:
	default:
	}
	c.mu.Lock()
	out = c.appendText(out[:0])
	c.mu.Unlock()
	_, err := w.Write(out)
	select {
	case c.spare <- out:
	default:
	}
	return err
}

// appendText appends the exposition to dst, reusing the collector's
// buffers; c.mu is held.
func (c *Collector) appendText(dst []byte) []byte {
	wk := walker{c: c, out: c.buf[:0]}
	c.board.ViewInto(&c.view)
	wk.walk(c.view)
	c.buf = wk.out
	c.idx = c.idx[:0]
	for i := range c.buf {
		c.idx = append(c.idx, int32(i))
	}
	slices.SortFunc(c.idx, func(a, b int32) int { return compareSamples(&c.buf[a], &c.buf[b]) })
	var prev *family
	for _, i := range c.idx {
		s := &c.buf[i]
		f := s.f
		if f != prev {
			dst = append(dst, f.header...)
			prev = f
		}
		dst = append(dst, f.full...)
		if s.n > 0 {
			for j, k := range f.order {
				if j == 0 {
					dst = append(dst, '{')
				} else {
					dst = append(dst, ',')
				}
				dst = append(dst, f.labels[k]...)
				dst = append(dst, '=', '"')
				dst = appendLabelValue(dst, s.lv[k])
				dst = append(dst, '"')
			}
			dst = append(dst, '}')
		}
		dst = append(dst, ' ')
		dst = appendFloat(dst, s.v)
		dst = append(dst, '\n')
	}
	return dst
}

// compareSamples orders series as a client_golang registry does: by
// family name, then by label values in label name order.
func compareSamples(a, b *sample) int {
	if a.f != b.f {
		return a.f.rank - b.f.rank
	}
	for _, k := range a.f.order {
		if c := strings.Compare(a.lv[k], b.lv[k]); c != 0 {
			return c
		}
	}
	return 0
}

func appendLabelValue(dst []byte, v string) []byte {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c == '\\' || c == '\n' || c == '"' {
			return append(dst, valueEscaper.Replace(v)...)
		}
	}
	return append(dst, v...)
}

// appendFloat formats a value as expfmt does.
func appendFloat(dst []byte, f float64) []byte {
	switch {
	case f == 1:
		return append(dst, '1')
	case f == 0:
		return append(dst, '0')
	case f == -1:
		return append(dst, "-1"...)
	case math.IsNaN(f):
		return append(dst, "NaN"...)
	case math.IsInf(f, +1):
		return append(dst, "+Inf"...)
	case math.IsInf(f, -1):
		return append(dst, "-Inf"...)
	}
	return strconv.AppendFloat(dst, f, 'g', -1, 64)
}

// Handler serves the exposition (GET or HEAD); a failed write (the
// scraper went away) is logged at debug level.
func (c *Collector) Handler(log *slog.Logger) http.Handler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", ContentType)
		if r.Method == http.MethodHead {
			return
		}
		if err := c.WriteText(w); err != nil {
			log.Debug("metrics scrape not delivered", "remote", r.RemoteAddr, "error", err)
		}
	})
}
