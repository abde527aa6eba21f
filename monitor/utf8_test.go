package monitor

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"testing"
	"unicode/utf8"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpu-telemetry/gpu-telemetry/internal/testutil"
	"github.com/gpu-telemetry/gpu-telemetry/live"
	"github.com/gpu-telemetry/gpu-telemetry/live/metrics"
	"github.com/gpu-telemetry/gpu-telemetry/sampler/fakenvml"
)

// TestInvalidUTF8FromTheDriver: a name, serial, VBIOS, UUID or driver
// version that is not valid UTF-8 (a failing board, a corrupt InfoROM) is
// made valid where it enters, so that neither /metrics (Prometheus refuses
// the whole scrape for one invalid label value) nor the status JSON breaks.
func TestInvalidUTF8FromTheDriver(t *testing.T) {
	lib := &fakenvml.Lib{InitRet: nvml.SUCCESS, Driver: "580.\xff95"}
	d := fakenvml.NewDev()
	d.Name, d.Serial, d.Vbios, d.UUID = "NVIDIA \xff\xfe H100", "16\xc3", "98.\xe2\x82", "GPU-\x80a"
	lib.Devs = append(lib.Devs, d)
	r := newRigOn(t, lib, nil)
	i := r.m.gpus[0].g.Info()
	for _, s := range []string{i.Name, i.Serial, i.VBIOS, i.UUID, r.m.host.System.DriverVersion} {
		if !utf8.ValidString(s) {
			t.Errorf("%q entered unsanitised", s)
		}
	}
	if i.Name != "NVIDIA \uFFFD H100" {
		t.Errorf("name %q, want the invalid bytes as U+FFFD", i.Name)
	}
	board := r.m.Board()
	h, err := metrics.New(board).Handler(nil)
	if err != nil {
		t.Fatal(err)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	if !utf8.Valid(w.Body.Bytes()) || !bytes.Contains(w.Body.Bytes(), []byte("model=\"NVIDIA \uFFFD H100\"")) {
		t.Errorf("/metrics is not valid UTF-8, or lacks the GPU's info series:\n%s", w.Body.Bytes())
	}
	if bytes.Contains(w.Body.Bytes(), []byte(`cause="gathering"} 1`)) {
		t.Errorf("a series was refused:\n%s", w.Body.Bytes())
	}
	js, err := json.Marshal(live.NewDoc(board.View()))
	if err != nil || !utf8.Valid(js) {
		t.Errorf("status JSON invalid (%v):\n%s", err, js)
	}
	testutil.CheckMetrics(t, w.Body.Bytes())
}
