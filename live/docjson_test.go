package live_test

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"
	"time"

	. "github.com/gpu-telemetry/gpu-telemetry/live"
	"github.com/gpu-telemetry/gpu-telemetry/live/livetest"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// jsonDocs are documents of every shape: hung, failing, lost and not
// started GPUs, processes read, hung and never read, strings encoding/json
// escapes, numbers it writes with an exponent.
func jsonDocs() map[string]Doc {
	v := livetest.View()
	now := v.Host.Now
	ok := &reading.Procs{Time: now.Add(-time.Second), Status: reading.ProcOK, List: []reading.Process{
		{PID: 4000, Kind: reading.ProcCompute, MemBytes: reading.Some[uint64](1 << 30), SMUtil: reading.Some[uint32](7), Origin: reading.ProcHere,
			Name: "python<3>", Cmdline: "python train.py --lr 1e-4 & \"quoted\" \\ tab\there \u2028 \xff bad \x01"},
		{PID: 4001, Kind: reading.ProcCompute | reading.ProcGraphics, Origin: reading.ProcOtherNS},
	}}
	v.GPUs[0].Processes = ok
	v.GPUs[1].Processes = &reading.Procs{Time: now, Status: reading.ProcHung, Err: "nvmlDeviceGetComputeRunningProcesses", LastOK: ok}
	v.GPUs[0].Recovery(1, now, "GPU reset")
	for _, code := range []uint64{119, 13, 31, 43, 45, 48, 61, 62, 63, 64, 68, 69, 74, 92, 94, 95, 154, 79} {
		v.GPUs[0].Xid(code, now, "x<y>")
	}
	failing := live8(v)
	failing.GPUs[2].Observe(&reading.Sample{GPU: 2, Time: now, Status: reading.StatusFailed, Err: "every call failed: \"unknown\""}, 100*time.Millisecond)
	failing.GPUs[3].Lost(now)
	failing.GPUs = append(failing.GPUs, GPU{Info: reading.GPU{Index: 8, Name: "not started"}, Processes: &reading.Procs{Status: reading.ProcNotRead}})
	odd := livetest.View()
	odd.Host.Version = "v<1>&\"2\""
	odd.Host.Counters = nil
	odd.Host.Start = time.Time{}
	odd.Host.Interval = 3 * time.Nanosecond // 3e-9 s
	odd.GPUs = nil
	oddDoc := NewDoc(odd)
	oddDoc.Host.Cadence.MaxPeriodS = 1.5e21 // an exponent above
	tiny := -2.5e-7
	oddDoc.Host.Pacer.TickNVMLS = &tiny
	oddDoc.Host.Pacer.LastLateS = nil // not measured yet: null
	docs := map[string]Doc{"two GPUs": NewDoc(livetest.View()), "processes and Xids": NewDoc(v), "failing, lost, not started": NewDoc(failing), "odd host": oddDoc}
	zone := NewDoc(livetest.View())
	zone.Time = zone.Time.In(time.FixedZone("CET", 3600))
	docs["time zone"] = zone
	return docs
}

func live8(v View) View {
	for i := 2; i < 8; i++ {
		g := v.GPUs[i%2]
		g.Info.Index = i
		v.GPUs = append(v.GPUs, g)
	}
	return v
}

// TestAppendJSONMatchesEncodingJSON: the control socket's encoder writes
// what encoding/json writes, byte for byte.
func TestAppendJSONMatchesEncodingJSON(t *testing.T) {
	for name, d := range jsonDocs() {
		t.Run(name, func(t *testing.T) {
			want, err := json.Marshal(d)
			if err != nil {
				t.Fatal(err)
			}
			got := d.AppendJSON(nil)
			if !bytes.Equal(got, want) {
				i := 0
				for i < len(got) && i < len(want) && got[i] == want[i] {
					i++
				}
				t.Fatalf("differs at byte %d:\n got  %s\n want %s", i, got[max(i-80, 0):min(i+80, len(got))], want[max(i-80, 0):min(i+80, len(want))])
			}
		})
	}
}

// TestAppendJSONNaN: a number encoding/json refuses is written as null, so
// the answer stays a valid document.
func TestAppendJSONNaN(t *testing.T) {
	d := NewDoc(livetest.View())
	d.Host.UptimeS = math.NaN()
	d.Host.IntervalS = math.Inf(1)
	var back Doc
	if err := json.Unmarshal(d.AppendJSON(nil), &back); err != nil || back.Host.UptimeS != 0 {
		t.Errorf("NaN and Inf: %v, uptime %v", err, back.Host.UptimeS)
	}
}

// TestAppendJSONAllocs: into a buffer kept between requests, as the control
// socket does, encoding a document of eight GPUs allocates nothing.
func TestAppendJSONAllocs(t *testing.T) {
	d := NewDoc(live8(livetest.View()))
	buf := d.AppendJSON(nil)
	if n := testing.AllocsPerRun(100, func() { buf = d.AppendJSON(buf[:0]) }); n != 0 {
		t.Errorf("AppendJSON allocates %.0f times per document, want 0", n)
	}
}
