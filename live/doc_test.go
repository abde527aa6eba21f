package live_test

import (
	"bytes"
	"encoding/json"
	"github.com/gpu-telemetry/gpu-telemetry/action"
	"strings"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/testutil"
	. "github.com/gpu-telemetry/gpu-telemetry/live"
	"github.com/gpu-telemetry/gpu-telemetry/live/livetest"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// TestAbsentCounterIsNA: a counter the document lacks (an older daemon, a
// renamed row) is absent, n/a in the text and in top, never 0.
func TestAbsentCounterIsNA(t *testing.T) {
	d := NewDoc(livetest.View())
	var kept []Counter
	for _, c := range d.Host.Counters {
		if c.Name != CounterRowsWritten && c.Name != CounterLogLinesDelayed {
			kept = append(kept, c)
		}
	}
	d.Host.Counters = kept
	if v, ok := d.Host.Counter(CounterRowsWritten); ok {
		t.Errorf("Counter(%s) = %d, ok; want absent", CounterRowsWritten, v)
	}
	var b bytes.Buffer
	if err := WriteText(&b, d); err != nil {
		t.Fatal(err)
	}
	testutil.Contains(t, "status", b.String(), "rows n/a written / 0 dropped", "log lines waiting 2 / n/a delayed")
}

func TestStatusTextAndJSONGolden(t *testing.T) {
	d := NewDoc(livetest.View())
	var b bytes.Buffer
	if err := WriteText(&b, d); err != nil {
		t.Fatal(err)
	}
	testutil.Golden(t, "status.txt", b.Bytes())
	j, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	testutil.Golden(t, "status.json", append(j, '\n'))
	// The document reads back as itself (status and top work from JSON).
	var back Doc
	if err := json.Unmarshal(j, &back); err != nil {
		t.Fatal(err)
	}
	var b2 bytes.Buffer
	WriteText(&b2, back)
	if b2.String() != b.String() {
		t.Errorf("text from the decoded JSON differs:\n%s", b2.String())
	}
	for _, want := range []string{`"schema_version": 2`, `"decoder_util_pct": null`, `"hung_s": 12`, `"state": "hung"`} {
		if !strings.Contains(string(j), want) {
			t.Errorf("JSON lacks %s", want)
		}
	}
}

// TestHungSIsOnTheMonotonicClock: hung_s (and the status line's stall) is
// the hang's age on the publisher's monotonic clock, as the repair judge
// weighs it: the wall clock stepped back 5 min or forward 1 h since the
// hang began (chrony's makestep) shows neither a negative hang nor an
// hour's.
func TestHungSIsOnTheMonotonicClock(t *testing.T) {
	for _, step := range []time.Duration{-5 * time.Minute, time.Hour} {
		v := livetest.View()
		v.Host.Now = v.Host.Now.Add(step)
		d := NewDoc(v)
		if g := d.GPUs[1]; g.HungS == nil || *g.HungS != 12 {
			t.Errorf("wall clock stepped %v: hung_s %v, want 12", step, g.HungS)
		}
		var b bytes.Buffer
		WriteText(&b, d)
		if !strings.Contains(b.String(), "hung 12.0s in nvmlDeviceGetTemperature") {
			t.Errorf("wall clock stepped %v: status text lacks hung 12.0s in nvmlDeviceGetTemperature:\n%s", step, b.String())
		}
	}
}

// TestProcessesInStatus: the status screen and document list each GPU's
// processes; a hung read keeps the last successful list and says so.
func TestProcessesInStatus(t *testing.T) {
	v := livetest.View()
	now := v.Host.Now
	good := &reading.Procs{GPU: 0, Time: now.Add(-800 * time.Millisecond), Status: reading.ProcOK, List: []reading.Process{
		{PID: 4242, Kind: reading.ProcCompute, MemBytes: reading.Some(uint64(30000) << 20), SMUtil: reading.Some(uint32(97)),
			MemUtil: reading.Some(uint32(41)), Origin: reading.ProcHere, Name: "python3", Cmdline: "python3 train.py",
			Workload: reading.Workload{Known: true, Unit: "slurmstepd.scope", SlurmJob: "4242", SlurmStep: "0"}},
		{PID: 77, Kind: reading.ProcGraphics, Origin: reading.ProcOtherNS},
	}}
	v.GPUs[0].Processes = good
	v.GPUs[1].Processes = &reading.Procs{GPU: 1, Status: reading.ProcHung, Err: "nvmlDeviceGetComputeRunningProcesses stuck", LastOK: good}
	d := NewDoc(v)
	var b bytes.Buffer
	WriteText(&b, d)
	text := b.String()
	testutil.Contains(t, "status text", text,
		"  processes: 2\n",
		"    pid 4242 compute  mem 30000 MiB  sm 97% membusy 41%  python3: python3 train.py  [slurm job 4242 step 0]\n",
		"    pid 77 graphics  mem n/a  sm n/a membusy n/a  (other PID namespace)\n",
		"; now no data (hung: nvmlDeviceGetComputeRunningProcesses stuck)\n",
	)
	j, _ := json.Marshal(d)
	for _, want := range []string{`"processes":{"status":"ok","read_at":`, `"pid":4242,"type":"compute","memory_bytes":31457280000,"sm_util_pct":97`, `"status":"hung","error":"nvmlDeviceGetComputeRunningProcesses stuck"`,
		`"job":{"unit":"slurmstepd.scope","container_id":"","pod_uid":"","slurm_job":"4242","slurm_step":"0"}`} {
		if !strings.Contains(string(j), want) {
			t.Errorf("JSON lacks %s:\n%s", want, j)
		}
	}
}

func TestCheck(t *testing.T) {
	base := livetest.View()
	now := base.Host.Now
	ok := func(v *View) { v.GPUs = v.GPUs[:1]; v.GPUs[0].FlagLast = [reading.NumFlagKinds]time.Time{} }
	tests := []struct {
		name   string
		change func(v *View)
		code   int
		reason string
	}{
		{"all answering, nothing recent", ok, CheckOK, ""},
		{"old anomaly flag", func(v *View) {
			ok(v)
			k, _ := reading.FlagKindNamed("spur_throt")
			v.GPUs[0].FlagLast[k] = now.Add(-11 * time.Minute)
		}, CheckOK, ""},
		{"recent anomaly flag", func(v *View) { v.GPUs = v.GPUs[:1] }, CheckWarning, "spur_throt"},
		{"disk paused", func(v *View) { ok(v); v.Host.DiskPaused = true }, CheckWarning, "disk paused"},
		{"rows dropped recently", func(v *View) { ok(v); v.Host.RowsDroppedRecent = 3 }, CheckWarning, "3 rows dropped"},
		{"rows dropped long ago", func(v *View) { ok(v); livetest.SetCounter(v, "rows_dropped", 3) }, CheckOK, ""},
		{"not started", func(v *View) { ok(v); v.GPUs[0].State = State{} }, CheckWarning, "not answering yet"},
		{"hung", nil, CheckCritical, "GPU 1 hung"},
		{"lost", func(v *View) { ok(v); v.GPUs[0].Lost(now) }, CheckCritical, "GPU 0 lost"},
		{"failing", func(v *View) { ok(v); v.GPUs[0].State = State{Kind: StateFailing, Err: "Unknown Error"} }, CheckCritical, "GPU 0 failing"},
		{"recent Xid", func(v *View) { ok(v); v.GPUs[0].Xid(79, now.Add(-9*time.Minute), "x") }, CheckCritical, "Xid 79"},
		{"old Xid", func(v *View) { ok(v); v.GPUs[0].Xid(79, now.Add(-11*time.Minute), "x") }, CheckOK, ""},
		{"recent recovery action", func(v *View) { ok(v); v.GPUs[0].Recovery(1, now.Add(-time.Minute), "GPU reset") }, CheckCritical, "recovery action 1"},
		// A board that a warm reboot did not bring back has no state or
		// Xid in this run: its action alone says it needs a power cycle.
		{"missing board to power-cycle", func(v *View) {
			ok(v)
			v.Host.Missing = []MissingBoard{{Index: 3, UUID: "GPU-dead", Action: action.Current{Action: action.PowerCycle, Reasons: []string{"warm reboot did not recover it (xid79 in the previous boot)"}}}}
		}, CheckCritical, "missing board GPU-dead power_cycle"},
		{"missing board watched", func(v *View) {
			ok(v)
			v.Host.Missing = []MissingBoard{{Index: 3, UUID: "GPU-dead", Action: action.Current{Action: action.Watch, Reasons: []string{"x"}}}}
		}, CheckWarning, "missing board GPU-dead watch"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := livetest.View()
			if tc.change != nil {
				tc.change(&v)
			}
			code, reasons := Check(NewDoc(v))
			if code != tc.code || !strings.Contains(strings.Join(reasons, ";"), tc.reason) {
				t.Errorf("code %d reasons %q, want %d with %q", code, reasons, tc.code, tc.reason)
			}
		})
	}
}

// The status check's "in the last 10 minutes" (and the status screens' recent
// flags) is decided on the ages the daemon measured on its monotonic clock
// (age_s), not by comparing wall times the daemon stamped before and after a
// wall-clock step (NTP, chrony, an RTC corrected after boot): the wall clock
// stepping an hour forward a minute after an Xid must not clear the critical
// state at once, nor a step back keep it an hour longer. Each case is a
// document as the daemon sends it; one without ages (an older daemon) is
// judged on its wall times.
func TestCheckAcrossAWallClockStep(t *testing.T) {
	at := time.Date(2026, 11, 30, 15, 0, 0, 0, time.UTC) // the event, on the wall clock
	kinds := []struct {
		name string
		gpu  func(event string) string // the GPU's fields carrying the event
		code int
	}{
		{"Xid", func(e string) string { return `"last_xid":{"code":79,"time":` + e + `}` }, CheckCritical},
		{"recovery action", func(e string) string { return `"last_recovery_action":{"code":1,"time":` + e + `}` }, CheckCritical},
		{"anomaly flag", func(e string) string { return `"flags":[{"kind":"spur_throt","count":1,"last":` + e + `}]` }, CheckWarning},
	}
	cases := []struct {
		name   string
		doc    time.Duration // the document's time after the event, on the wall clock
		age    string        // its age_s field, "" for none
		recent bool
	}{
		{"the wall clock stepped an hour forward a minute after it", time.Hour + time.Minute, `,"age_s":60`, true},
		{"the wall clock stepped an hour back 15 minutes after it", -time.Hour + 15*time.Minute, `,"age_s":900`, false},
		{"no age (an older daemon), a minute after it", time.Minute, "", true},
		{"no age (an older daemon), 15 minutes after it", 15 * time.Minute, "", false},
	}
	for _, k := range kinds {
		for _, c := range cases {
			t.Run(k.name+"/"+c.name, func(t *testing.T) {
				js := `{"schema_version":2,"time":"` + at.Add(c.doc).Format(time.RFC3339Nano) + `","host":{"disk":"ok"},` +
					`"gpus":[{"index":0,"state":"ok",` + k.gpu(`"`+at.Format(time.RFC3339Nano)+`"`+c.age) + `}]}`
				var d Doc
				if err := json.Unmarshal([]byte(js), &d); err != nil {
					t.Fatal(err)
				}
				want := CheckOK
				if c.recent {
					want = k.code
				}
				if code, reasons := Check(d); code != want {
					t.Errorf("check %d %q, want %d, for %s", code, reasons, want, js)
				}
				if k.name == "anomaly flag" {
					if f := RecentFlags(d.GPUs[0], d.Time, 10*time.Minute); (len(f) > 0) != c.recent {
						t.Errorf("recent flags %q, want recent %v, for %s", f, c.recent, js)
					}
				}
			})
		}
	}
}

// live8 is v with eight GPUs (copies of its two).
func live8(v View) View {
	for i := 2; i < 8; i++ {
		g := v.GPUs[i%2]
		g.Info.Index = i
		v.GPUs = append(v.GPUs, g)
	}
	return v
}

// BenchmarkStatusAnswer is what the control socket does per status request
// for eight GPUs: build the document from a view and encode it with
// encoding/json into a buffer kept between requests.
func BenchmarkStatusAnswer(b *testing.B) {
	v := live8(livetest.View())
	var buf bytes.Buffer
	b.ReportAllocs()
	for b.Loop() {
		d := NewDoc(v)
		buf.Reset()
		if err := json.NewEncoder(&buf).Encode(&d); err != nil {
			b.Fatal(err)
		}
	}
}

// TestPacerUnmeasured: before the pacer measured a tick, its times are
// absent (n/a, null), not 0.
func TestPacerUnmeasured(t *testing.T) {
	v := livetest.View()
	v.Host.Pacer.TickNVML, v.Host.Pacer.LastLate = reading.Opt[time.Duration]{}, reading.Opt[time.Duration]{}
	d := NewDoc(v)
	var b bytes.Buffer
	if err := WriteText(&b, d); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "tick n/a in the driver, last GPU n/a late") {
		t.Errorf("unmeasured pacer times not n/a:\n%s", b.String())
	}
	js, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	if j := string(js); !strings.Contains(j, `"tick_nvml_s":null,"last_gpu_late_s":null`) {
		t.Errorf("unmeasured pacer times not null:\n%s", j)
	}
}
