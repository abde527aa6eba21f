package live_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/live"
	"github.com/gpu-telemetry/gpu-telemetry/live/livetest"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// TestTableReachesStatus walks reading.Table: a reading that declares a
// status key is that key of its GPU in the status document (a hardware
// health counter: of the GPU's health.counters), null while absent.
func TestTableReachesStatus(t *testing.T) {
	for i := range reading.Table {
		d := &reading.Table[i]
		if d.Key == "" {
			continue
		}
		t.Run(d.Name, func(t *testing.T) {
			value := func(present bool) (json.RawMessage, bool) {
				v := livetest.View()
				g := &v.GPUs[0]
				s := reading.Sample{GPU: 0, Time: v.Host.Now.Add(-time.Second)}
				if present {
					d.Set(&s, max(d.Min, 1000))
				}
				*g = live.GPU{Info: g.Info}
				g.Observe(&s, 100*time.Millisecond)
				b, err := json.Marshal(live.NewDoc(v))
				if err != nil {
					t.Fatal(err)
				}
				var doc struct{ GPUs []map[string]json.RawMessage }
				if err := json.Unmarshal(b, &doc); err != nil {
					t.Fatal(err)
				}
				keys := doc.GPUs[0]
				if _, ok := d.Health(); ok {
					var h struct{ Counters map[string]json.RawMessage }
					if err := json.Unmarshal(keys["health"], &h); err != nil {
						t.Fatal(err)
					}
					keys = h.Counters
				}
				m, ok := keys[d.Key]
				return m, ok
			}
			if m, ok := value(true); !ok || string(m) == "null" {
				t.Errorf("%s set: key %q is %s (present %v)", d.Name, d.Key, m, ok)
			}
			if m, ok := value(false); !ok || string(m) != "null" {
				t.Errorf("%s absent: key %q is %s (present %v), want null", d.Name, d.Key, m, ok)
			}
		})
	}
}

// TestHealthTextShowsRepairAndSRAM: the memory repair and SRAM getters'
// readings reach the health line of status and top when they say
// something, and leave it as it was when they do not.
func TestHealthTextShowsRepairAndSRAM(t *testing.T) {
	line := func(set map[reading.HealthID]uint64) string {
		v := livetest.View()
		g := &v.GPUs[0]
		s := reading.Sample{GPU: 0, Time: v.Host.Now.Add(-time.Second)}
		for id, x := range set {
			s.Health[id] = reading.Some(x)
		}
		*g = live.GPU{Info: g.Info}
		g.Observe(&s, 100*time.Millisecond)
		return live.HealthText(live.NewDoc(v).GPUs[0])
	}
	quiet := line(map[reading.HealthID]uint64{reading.HMemoryUnrepairable: 0, reading.HTPCRepairPending: 0, reading.HSRAMThreshold: 0})
	if want := line(nil); quiet != want {
		t.Errorf("zero flags changed the line:\n%s\nwant\n%s", quiet, want)
	}
	got := line(map[reading.HealthID]uint64{reading.HMemoryUnrepairable: 1, reading.HTPCRepairPending: 1,
		reading.HSRAMUncSecDed: 3, reading.HSRAMUncParity: 1, reading.HSRAMThreshold: 1})
	for _, want := range []string{"memory UNREPAIRABLE", "repair pending", "sram unc 3+1 THRESHOLD"} {
		if !strings.Contains(got, want) {
			t.Errorf("health line %q lacks %q", got, want)
		}
	}
}
