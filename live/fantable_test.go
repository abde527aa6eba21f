package live_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/live"
	"github.com/gpu-telemetry/gpu-telemetry/live/livetest"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// TestFanTableReachesStatus walks reading.FanTable: each per-fan reading is
// its Key in each fan's object of the status document, null while absent,
// and a document decoded from the JSON gives it back.
func TestFanTableReachesStatus(t *testing.T) {
	for i := range reading.FanTable {
		d := &reading.FanTable[i]
		t.Run(d.Name, func(t *testing.T) {
			v := livetest.View()
			g := &v.GPUs[0]
			s := reading.Sample{GPU: 0, Time: v.Host.Now.Add(-time.Second), NumFans: 2}
			d.Set(&s, 1, 42)
			*g = live.GPU{Info: g.Info}
			g.Observe(&s, 100*time.Millisecond)
			b, err := json.Marshal(live.NewDoc(v))
			if err != nil {
				t.Fatal(err)
			}
			var doc struct {
				GPUs []struct{ Fans []map[string]json.RawMessage }
			}
			if err := json.Unmarshal(b, &doc); err != nil {
				t.Fatal(err)
			}
			fans := doc.GPUs[0].Fans
			if len(fans) != 2 {
				t.Fatalf("fans %v, want 2", fans)
			}
			for j := range reading.FanTable {
				o := &reading.FanTable[j]
				want0, want1 := "null", "null"
				if o == d {
					want1 = "42"
				}
				if got, ok := fans[0][o.Key]; !ok || string(got) != want0 {
					t.Errorf("fan 0 %s: %s (%v), want %s", o.Key, got, ok, want0)
				}
				if got, ok := fans[1][o.Key]; !ok || string(got) != want1 {
					t.Errorf("fan 1 %s: %s (%v), want %s", o.Key, got, ok, want1)
				}
			}
			var back live.Doc
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatal(err)
			}
			if p := back.GPUs[0].Fans[1][d.Key]; p == nil || *p != 42 {
				t.Errorf("decoded fan 1 %s: %v, want 42", d.Key, p)
			}
		})
	}
}
