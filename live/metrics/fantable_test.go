package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/live"
	"github.com/gpu-telemetry/gpu-telemetry/live/livetest"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// TestFanTableReachesMetrics walks reading.FanTable: each per-fan reading
// of fan 1 is exported as its series with fan="1", scaled, and only while
// present.
func TestFanTableReachesMetrics(t *testing.T) {
	for i := range reading.FanTable {
		d := &reading.FanTable[i]
		t.Run(d.Name, func(t *testing.T) {
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
