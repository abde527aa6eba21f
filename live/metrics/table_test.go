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
