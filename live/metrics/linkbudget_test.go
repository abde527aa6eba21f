package metrics

import (
	"strconv"
	"strings"
	"testing"

	"github.com/gpu-telemetry/gpu-telemetry/internal/testutil"
	"github.com/gpu-telemetry/gpu-telemetry/live"
	"github.com/gpu-telemetry/gpu-telemetry/live/livetest"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// b200s is a host of n answering B200s with 18 active NVLink5 links each,
// every per-link counter present and 0, a little symbol noise on every
// link (pre-FEC: healthy links count symbol errors), and no fault.
func b200s(n int) live.View {
	v := livetest.View()
	g0 := v.GPUs[0]
	v.GPUs = nil
	for i := range n {
		g := g0
		g.Info.Index, g.Info.UUID, g.Info.Name = i, "GPU-b200-"+strconv.Itoa(i), "NVIDIA B200"
		g.HealthLevel, g.HealthReasons = "ok", nil
		g.Sample.Values[reading.HNVLinkCount] = reading.Some[uint64](18)
		g.Sample.Values[reading.HNVLinkUp] = reading.Some[uint64](18)
		g.Sample.Values[reading.HNVLinkErrors] = reading.Some[uint64](0)
		l := &reading.NVLinks{At: g.Sample.Time, N: 18}
		for k := range 18 {
			l.L[k].State = reading.Some[uint32](reading.LinkStateActive)
			l.L[k].SpeedMBps = reading.Some[uint32](53125)
			l.L[k].Version = reading.Some[uint32](7)
			for c := range reading.LinkDefs {
				l.L[k].C[c] = reading.Some[uint64](0)
			}
			l.L[k].C[reading.LSymbolErrors] = reading.Some[uint64](1200)
			l.L[k].C[reading.LSymbolBER] = reading.Some[uint64](3<<8 | 15)    // 3e-15
			l.L[k].C[reading.LEffectiveBER] = reading.Some[uint64](1<<8 | 17) // 1e-17
		}
		g.Links = l
		v.GPUs = append(v.GPUs, g)
	}
	return v
}

// perLink counts the scrape's per-link NVLink series and all its series.
func perLink(body string) (links, all int, linkIDs map[string]bool) {
	linkIDs = map[string]bool{}
	for _, line := range strings.Split(body, "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		all++
		if strings.HasPrefix(line, "gpu_telemetry_nvlink_link_") {
			links++
			i := strings.Index(line, `gpu="`)
			j := strings.Index(line, `link="`)
			linkIDs[line[i+5:i+5+strings.IndexByte(line[i+5:], '"')]+"/"+line[j+6:j+6+strings.IndexByte(line[j+6:], '"')]] = true
		}
	}
	return links, all, linkIDs
}

func scrapeWith(t *testing.T, v live.View, opts ...Option) string {
	t.Helper()
	body := scrapeCollector(t, New(livetest.Board(v), opts...))
	testutil.CheckMetrics(t, body)
	return string(body)
}

// TestLinkSeriesBudget: a healthy 8-B200 host exports no per-link series
// by default, a faulted link exports its own (all its counters) and no
// other link does; all exports every link, none no link.
func TestLinkSeriesBudget(t *testing.T) {
	healthy := b200s(8)
	faulted := b200s(8)
	faulted.GPUs[2].Links.L[5].C[reading.LRxErrors] = reading.Some[uint64](4)             // errors on an active link
	faulted.GPUs[6].Links.L[0].State = reading.Some[uint32](0)                            // a link down
	faulted.GPUs[6].Links.L[9].C[reading.LRecoveryOK] = reading.Some[uint64](1)           // a recovered link
	faulted.GPUs[7].Links.L[1].C[reading.LEffectiveBER] = reading.Some[uint64](2<<8 | 11) // 2e-11 > 1e-12
	faulted.GPUs[7].Links.L[2].C[reading.LSymbolErrors] = reading.Some[uint64](9_000_000) // pre-FEC: not worth a series

	n, all, _ := perLink(scrapeWith(t, healthy))
	if n != 0 {
		t.Errorf("healthy 8 B200, default: %d per-link series, want 0", n)
	}
	base := all
	body := scrapeWith(t, faulted)
	n, all, ids := perLink(body)
	want := map[string]bool{"2/5": true, "6/0": true, "6/9": true, "7/1": true}
	if len(ids) != len(want) {
		t.Errorf("faulted: per-link series for links %v, want %v", ids, want)
	}
	for id := range want {
		if !ids[id] {
			t.Errorf("faulted: link %s (gpu/link) has no series", id)
		}
	}
	// Each shown link: its 11 counters, and the down one its state.
	if wantN := 4*int(reading.NumLinkCounters) + 1; n != wantN {
		t.Errorf("faulted: %d per-link series, want %d", n, wantN)
	}
	if all-base != n {
		t.Errorf("faulted: %d series more than healthy, want the %d per-link ones", all-base, n)
	}
	testutil.Contains(t, "faulted scrape", body,
		`gpu_telemetry_nvlink_link_errors_total{counter="rx_errors",gpu="2",link="5",uuid="GPU-b200-2"} 4`,
		`gpu_telemetry_nvlink_link_errors_total{counter="malformed",gpu="2",link="5",uuid="GPU-b200-2"} 0`,
		`gpu_telemetry_nvlink_link_down{gpu="6",link="0",state="inactive",uuid="GPU-b200-6"} 1`,
		`gpu_telemetry_nvlink_link_ber{counter="effective_ber",gpu="7",link="1",uuid="GPU-b200-7"} 2`)

	n, _, ids = perLink(scrapeWith(t, healthy, NVLinkLinks(LinkSeriesAll)))
	if wantN := 8 * 18 * int(reading.NumLinkCounters); n != wantN || len(ids) != 8*18 {
		t.Errorf("all: %d per-link series on %d links, want %d on %d", n, len(ids), wantN, 8*18)
	}
	if n, _, _ := perLink(scrapeWith(t, faulted, NVLinkLinks(LinkSeriesNone))); n != 0 {
		t.Errorf("none: %d per-link series", n)
	}
}

func TestLinkSeriesUnmarshalText(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want LinkSeries
		err  bool
	}{{"errors", LinkSeriesErrors, false}, {"all", LinkSeriesAll, false}, {"none", LinkSeriesNone, false}, {"", 0, true}, {"ALL", 0, true}, {"some", 0, true}} {
		var got LinkSeries
		err := got.UnmarshalText([]byte(tc.in))
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("UnmarshalText(%q): %v, %v", tc.in, got, err)
		}
		if err == nil && got.String() != tc.in {
			t.Errorf("%v.String() = %q", got, got.String())
		}
	}
}
