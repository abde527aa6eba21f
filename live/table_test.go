package live_test

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/live"
	"github.com/gpu-telemetry/gpu-telemetry/live/livetest"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// TestTableReachesStatus walks reading.Table: a reading that declares a
// status key is that key of its GPU in the status document (a hardware
// health counter: of the GPU's health.counters), with its value in the
// form its row declares, null while absent; a GPU decoded from the JSON
// (status, top) gives it back: by key (Reading), a health counter in
// Health.Counters.
func TestTableReachesStatus(t *testing.T) {
	const stored = 1234 // 0x4d2: a mask of five reasons, 1.234 W from mW
	for i := range reading.Table {
		d := &reading.Table[i]
		if d.Key == "" {
			continue
		}
		health := d.IsHealth()
		// The key names the document's unit: watts from a row in mW, joules
		// from one in mJ; a clocks event mask is its reasons' names.
		want := strconv.Itoa(max(stored, int(d.Min)))
		switch {
		case strings.HasSuffix(d.Key, "_w") && d.Unit == "mW", strings.HasSuffix(d.Key, "_j") && d.Unit == "mJ":
			want = "1.234"
		case d.Unit == "bitmask":
			want = `["AppClocks","SyncBoost","HwThermalSlowdown","HwPowerBrakeSlowdown","Reliability"]`
		}
		t.Run(d.Name, func(t *testing.T) {
			// value is the key's JSON, and its value as the decoded GPU
			// gives it in the same form ("" when absent there).
			value := func(present bool) (m json.RawMessage, ok bool, decoded string) {
				v := livetest.View()
				g := &v.GPUs[0]
				s := reading.Sample{GPU: 0, Time: v.Host.Now.Add(-time.Second)}
				if present {
					d.Set(&s, max(d.Min, stored))
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
				var back live.Doc
				if err := json.Unmarshal(b, &back); err != nil {
					t.Fatal(err)
				}
				keys, bg := doc.GPUs[0], back.GPUs[0]
				if health {
					var h struct{ Counters map[string]json.RawMessage }
					if err := json.Unmarshal(keys["health"], &h); err != nil {
						t.Fatal(err)
					}
					m, ok = h.Counters[d.Key]
					if bg.Health == nil {
						t.Fatalf("decoded GPU has no health")
					}
					if c, in := bg.Health.Counters[d.Key]; !in {
						decoded = "missing"
					} else if c != nil {
						decoded = strconv.FormatUint(*c, 10)
					}
					return m, ok, decoded
				}
				m, ok = keys[d.Key]
				r := bg.Reading(d.Key)
				if names := r.Names(); names != nil {
					js, _ := json.Marshal(names)
					decoded = string(js)
				}
				if n, isNum := r.Num(); isNum {
					decoded = strconv.FormatFloat(n, 'f', -1, 64)
				}
				if decoded == "" && r.Text("C") != "n/a" {
					decoded = "shown as " + r.Text("C")
				}
				return m, ok, decoded
			}
			m, ok, back := value(true)
			if !ok || string(m) != want {
				t.Errorf("%s set: key %q is %s (present %v), want %s", d.Name, d.Key, m, ok, want)
			}
			if back != want {
				t.Errorf("%s set: decoded %q is %q, want %s", d.Name, d.Key, back, want)
			}
			m, ok, back = value(false)
			if !ok || string(m) != "null" {
				t.Errorf("%s absent: key %q is %s (present %v), want null", d.Name, d.Key, m, ok)
			}
			if back != "" {
				t.Errorf("%s absent: decoded %q is %q, want absent", d.Name, d.Key, back)
			}
		})
	}
}

// TestGPUDecodeRefusesTooWide walks reading.Table: a status document whose
// reading holds more than the reading's storage (4294967296 for a 32-bit
// reading, as a number or in W from mW) is refused with an error naming
// the key, never cut to fit; the widest value that fits is read back as
// it was.
func TestGPUDecodeRefusesTooWide(t *testing.T) {
	n := 0
	for i := range reading.Table {
		d := &reading.Table[i]
		if health := d.IsHealth(); d.Key == "" || health || d.Doc == reading.DocReasons || d.Fits(1<<32) {
			continue
		}
		n++
		wide, widest := "4294967296", "4294967295"
		if d.Doc == reading.DocMilli {
			wide, widest = "4294967.296", "4294967.295"
		}
		t.Run(d.Name, func(t *testing.T) {
			var g live.GPUDoc
			err := json.Unmarshal([]byte(`{"`+d.Key+`":`+wide+`}`), &g)
			if err == nil || !strings.Contains(err.Error(), d.Key) {
				t.Errorf("%s %s decoded (error %v), want refused naming the key; read as %s", d.Key, wide, err, g.Reading(d.Key).Text(""))
			}
			if err := json.Unmarshal([]byte(`{"`+d.Key+`":`+widest+`}`), &g); err != nil || g.Reading(d.Key).Text("") != widest {
				t.Errorf("%s %s: %v, read as %s", d.Key, widest, err, g.Reading(d.Key).Text(""))
			}
		})
	}
	if n == 0 {
		t.Fatal("no reading with a status key is narrower than 64 bits")
	}
}

// TestReadingPanicsNamingTheKey: GPUDoc.Reading of a key that is not a
// reading of GPUDoc.Readings panics with the key and where such a key
// comes from: a hardware health counter's key is in Health.Counters, any
// other key is no row's of reading.Table.
func TestReadingPanicsNamingTheKey(t *testing.T) {
	for _, c := range []struct{ key, want string }{
		{reading.Table[reading.HECCMode].Key, "Health.Counters"},
		{"temperature", "reading.Table"},
	} {
		msg := func() (msg string) {
			defer func() { msg = fmt.Sprint(recover()) }()
			var g live.GPUDoc
			g.Reading(c.key)
			return "no panic"
		}()
		if !strings.Contains(msg, strconv.Quote(c.key)) || !strings.Contains(msg, c.want) {
			t.Errorf("Reading(%q) panics %q, want the key and %s", c.key, msg, c.want)
		}
	}
}

// TestHealthTextShowsRepairAndSRAM: the memory repair and SRAM getters'
// readings reach the health line of status and top when they say
// something, and leave it as it was when they do not.
func TestHealthTextShowsRepairAndSRAM(t *testing.T) {
	line := func(set map[reading.ID]uint64) string {
		v := livetest.View()
		g := &v.GPUs[0]
		s := reading.Sample{GPU: 0, Time: v.Host.Now.Add(-time.Second)}
		for id, x := range set {
			s.Values[id] = reading.Some(x)
		}
		*g = live.GPU{Info: g.Info}
		g.Observe(&s, 100*time.Millisecond)
		return live.HealthText(live.NewDoc(v).GPUs[0])
	}
	quiet := line(map[reading.ID]uint64{reading.HMemoryUnrepairable: 0, reading.HTPCRepairPending: 0, reading.HSRAMThreshold: 0})
	if want := line(nil); quiet != want {
		t.Errorf("zero flags changed the line:\n%s\nwant\n%s", quiet, want)
	}
	got := line(map[reading.ID]uint64{reading.HMemoryUnrepairable: 1, reading.HTPCRepairPending: 1,
		reading.HSRAMUncSecDed: 3, reading.HSRAMUncParity: 1, reading.HSRAMThreshold: 1})
	for _, want := range []string{"memory UNREPAIRABLE", "repair pending", "sram unc 3+1 THRESHOLD"} {
		if !strings.Contains(got, want) {
			t.Errorf("health line %q lacks %q", got, want)
		}
	}
}

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
