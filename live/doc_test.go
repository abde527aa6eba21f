package live_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/testutil"
	. "github.com/gpu-telemetry/gpu-telemetry/live"
	"github.com/gpu-telemetry/gpu-telemetry/live/livetest"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

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
	for _, want := range []string{`"schema_version": 1`, `"decoder_util_pct": null`, `"hung_s": 12`, `"state": "hung"`} {
		if !strings.Contains(string(j), want) {
			t.Errorf("JSON lacks %s", want)
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
		{"old anomaly flag", func(v *View) { ok(v); v.GPUs[0].FlagLast[reading.FlagSpurThrot] = now.Add(-11 * time.Minute) }, CheckOK, ""},
		{"recent anomaly flag", func(v *View) { v.GPUs = v.GPUs[:1] }, CheckWarning, "spur_throt"},
		{"disk paused", func(v *View) { ok(v); v.Host.DiskPaused = true }, CheckWarning, "disk paused"},
		{"rows dropped recently", func(v *View) { ok(v); v.Host.RowsDroppedRecent = 3 }, CheckWarning, "3 rows dropped"},
		{"rows dropped long ago", func(v *View) { ok(v); v.Host.RowsDropped = 3 }, CheckOK, ""},
		{"not started", func(v *View) { ok(v); v.GPUs[0].State = State{} }, CheckWarning, "not answering yet"},
		{"hung", nil, CheckCritical, "GPU 1 hung"},
		{"lost", func(v *View) { ok(v); v.GPUs[0].Lost(now) }, CheckCritical, "GPU 0 lost"},
		{"failing", func(v *View) { ok(v); v.GPUs[0].State = State{Kind: StateFailing, Err: "Unknown Error"} }, CheckCritical, "GPU 0 failing"},
		{"recent Xid", func(v *View) { ok(v); v.GPUs[0].Xid(79, now.Add(-9*time.Minute), "x") }, CheckCritical, "Xid 79"},
		{"old Xid", func(v *View) { ok(v); v.GPUs[0].Xid(79, now.Add(-11*time.Minute), "x") }, CheckOK, ""},
		{"recent recovery action", func(v *View) { ok(v); v.GPUs[0].Recovery(1, now.Add(-time.Minute), "GPU reset") }, CheckCritical, "recovery action 1"},
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

// BenchmarkStatusAnswer is what the control socket does per status request
// for eight GPUs: build the document from a view and encode it into a
// buffer kept between requests.
func BenchmarkStatusAnswer(b *testing.B) {
	v := live8(livetest.View())
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		d := NewDoc(v)
		buf = d.AppendJSON(buf[:0])
	}
}

// BenchmarkStatusAnswerEncodingJSON is the same through encoding/json, the
// reference AppendJSON replaces.
func BenchmarkStatusAnswerEncodingJSON(b *testing.B) {
	v := live8(livetest.View())
	b.ReportAllocs()
	for b.Loop() {
		if _, err := json.Marshal(NewDoc(v)); err != nil {
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
	j := string(d.AppendJSON(nil))
	if !strings.Contains(j, `"tick_nvml_s":null,"last_gpu_late_s":null`) {
		t.Errorf("unmeasured pacer times not null:\n%s", j)
	}
}
