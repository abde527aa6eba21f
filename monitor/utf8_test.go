package monitor

import (
	"bytes"
	"encoding/json"
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
	i := r.m.gpus[0].info()
	for _, s := range []string{i.Name, i.Serial, i.VBIOS, i.UUID, r.m.host.System.DriverVersion} {
		if !utf8.ValidString(s) {
			t.Errorf("%q entered unsanitised", s)
		}
	}
	if i.Name != "NVIDIA \uFFFD H100" {
		t.Errorf("name %q, want the invalid bytes as U+FFFD", i.Name)
	}
	board := r.m.Board()
	var b bytes.Buffer
	if err := metrics.New(board).WriteText(&b); err != nil {
		t.Fatal(err)
	}
	if !utf8.Valid(b.Bytes()) {
		t.Errorf("/metrics is not valid UTF-8")
	}
	doc := live.NewDoc(board.View())
	if js := doc.AppendJSON(nil); !json.Valid(js) || !utf8.Valid(js) {
		t.Errorf("status JSON invalid:\n%s", js)
	}
	testutil.CheckMetrics(t, b.Bytes())
}
