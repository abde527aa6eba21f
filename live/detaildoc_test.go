package live_test

import (
	"encoding/json"
	"strings"
	"testing"

	. "github.com/gpu-telemetry/gpu-telemetry/live"
	"github.com/gpu-telemetry/gpu-telemetry/live/livetest"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// TestDocCarriesGSPPolicyAndUser: the GSP firmware's version and mode
// (enabled or disabled, the default flag left to the system information),
// each fan's control policy as its number, and each process's user and uid
// reach the status document; where the driver or /proc did not give them
// they are absent (the GSP fields and the user left out, the policy null).
func TestDocCarriesGSPPolicyAndUser(t *testing.T) {
	v := livetest.View()
	g := &v.GPUs[0]
	g.Info.GSPVersion, g.Info.GSPMode = "580.95.05", "enabled (default)"
	g.Sample.Fans[1].Policy = reading.Some[uint32](reading.FanPolicyManual)
	g.Processes = &reading.Procs{GPU: 0, Time: g.Sample.Time, Status: reading.ProcOK, List: []reading.Process{
		{PID: 100, Origin: reading.ProcHere, Name: "python3", UID: reading.Some[uint32](1001), User: "alice"},
		{PID: 200, Origin: reading.ProcGone},
	}}
	d := NewDoc(v)
	g0, g1 := d.GPUs[0], d.GPUs[1]
	if g0.GSPVersion != "580.95.05" || g0.GSPMode != "enabled" {
		t.Errorf("GSP: %q %q, want 580.95.05 enabled", g0.GSPVersion, g0.GSPMode)
	}
	if p := g0.Fans[1]["policy"]; p == nil || *p != reading.FanPolicyManual {
		t.Errorf("fan 1 policy %v, want 1 (manual)", p)
	}
	if p, ok := g0.Fans[0]["policy"]; !ok || p != nil {
		t.Errorf("fan 0 policy %v (present %v), want null", p, ok)
	}
	l := g0.Processes.List
	if l[0].User != "alice" || l[0].UID == nil || *l[0].UID != 1001 || l[1].User != "" || l[1].UID != nil {
		t.Errorf("processes: %+v", l)
	}
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	js := string(b)
	for _, want := range []string{`"gsp_firmware_version":"580.95.05","gsp_firmware_mode":"enabled"`, `"user":"alice","uid":1001`, `"policy":1`} {
		if !strings.Contains(js, want) {
			t.Errorf("JSON lacks %s", want)
		}
	}
	if g1.GSPVersion != "" || g1.GSPMode != "" || strings.Count(js, "gsp_firmware_version") != 1 {
		t.Errorf("GPU 1 without GSP facts: %q %q, or the key written for it", g1.GSPVersion, g1.GSPMode)
	}
	var back Doc
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.GPUs[0].GSPMode != "enabled" || back.GPUs[0].Processes.List[0].User != "alice" {
		t.Errorf("read back: %q %+v", back.GPUs[0].GSPMode, back.GPUs[0].Processes.List[0])
	}
}
