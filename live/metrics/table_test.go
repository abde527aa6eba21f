package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/live"
	"github.com/gpu-telemetry/gpu-telemetry/live/livetest"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// TestTableReachesMetrics walks reading.Table: a reading that declares a
// metric is exported as that series (with its label value), and only while
// present.
func TestTableReachesMetrics(t *testing.T) {
	for i := range reading.Table {
		d := &reading.Table[i]
		if d.Metric.Name == "" {
			continue
		}
		t.Run(d.Name, func(t *testing.T) {
			series := func(present bool) bool {
				v := livetest.View()
				g := &v.GPUs[0]
				s := reading.Sample{GPU: 0, Time: v.Host.Now.Add(-time.Second)}
				if present {
					d.Set(&s, max(d.Min, 1000))
				}
				*g = live.GPU{Info: g.Info}
				g.Observe(&s, 100*time.Millisecond)
				want := "gpu_telemetry_" + d.Metric.Name + "{"
				for _, l := range strings.Split(string(scrape(t, livetest.Board(v))), "\n") {
					if strings.HasPrefix(l, want) && strings.Contains(l, `gpu="0"`) && (d.Metric.Label[0] == "" || strings.Contains(l, d.Metric.Label[0]+`="`+d.Metric.Label[1]+`"`)) {
						return true
					}
				}
				return false
			}
			if !series(true) {
				t.Errorf("%s set: no series %s%v", d.Name, d.Metric.Name, d.Metric.Label)
			}
			if series(false) {
				t.Errorf("%s absent: series %s%v exported", d.Name, d.Metric.Name, d.Metric.Label)
			}
		})
	}
}

// TestFanTableReachesMetrics walks reading.FanTable: each per-fan reading
// of fan 1 is exported as its series with fan="1", scaled, and only while
// present.
func TestFanTableReachesMetrics(t *testing.T) {
	for i := range reading.FanTable {
		d := &reading.FanTable[i]
		t.Run(d.Name, func(t *testing.T) {
			if d.Metric.Name == "" {
				return // no series (the policy: the status document's only)
			}
			series := func(present bool) []string {
				v := livetest.View()
				g := &v.GPUs[0]
				s := reading.Sample{GPU: 0, Time: v.Host.Now.Add(-time.Second), NumFans: 2}
				if present {
					d.Set(&s, 1, 42)
				}
				*g = live.GPU{Info: g.Info}
				g.Observe(&s, 100*time.Millisecond)
				var out []string
				for _, l := range strings.Split(string(scrape(t, livetest.Board(v))), "\n") {
					if strings.HasPrefix(l, "gpu_telemetry_"+d.Metric.Name+"{") && strings.Contains(l, `gpu="0"`) {
						out = append(out, l)
					}
				}
				return out
			}
			got := series(true)
			if len(got) != 1 || !strings.Contains(got[0], `fan="1"`) || !strings.HasSuffix(got[0], " 0.42") {
				t.Errorf("%s of fan 1 is 42 %%: series %v, want one with fan=\"1\" and value 0.42", d.Name, got)
			}
			if got := series(false); len(got) != 0 {
				t.Errorf("%s absent: series %v exported", d.Name, got)
			}
		})
	}
}
