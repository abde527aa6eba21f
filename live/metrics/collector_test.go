package metrics

import (
	"bytes"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	prom "github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"

	"github.com/gpu-telemetry/gpu-telemetry/internal/testutil"
	"github.com/gpu-telemetry/gpu-telemetry/live"
	"github.com/gpu-telemetry/gpu-telemetry/live/livetest"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

func board(v live.View) *live.Board {
	var slots []*live.Slot
	for _, g := range v.GPUs {
		sl := live.NewSlot(g.Info)
		sl.Update(func(p *live.GPU) { *p = g })
		slots = append(slots, sl)
	}
	return live.NewBoard(slots, func() live.Host { return v.Host })
}

// scrape renders the collector's output in the text exposition format.
func scrape(t *testing.T, b *live.Board) []byte {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(New(b)); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	enc := expfmt.NewEncoder(&out, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			t.Fatal(err)
		}
	}
	// The Go version is the toolchain's: masked for the golden file.
	return bytes.ReplaceAll(out.Bytes(), []byte(`goversion="`+runtime.Version()+`"`), []byte(`goversion="GO"`))
}

func TestMetricsGolden(t *testing.T) {
	got := scrape(t, board(livetest.View()))
	testutil.Golden(t, "metrics.txt", got)
	// The hung GPU: state and stall, no stale readings.
	for _, want := range []string{
		`gpu_telemetry_gpu_state{gpu="1",state="hung",uuid="GPU-bbbb"} 1`,
		`gpu_telemetry_stall_seconds{gpu="1",uuid="GPU-bbbb"} 12`,
		`gpu_telemetry_temperature_celsius{gpu="0",uuid="GPU-aaaa"} 71`,
		`gpu_telemetry_xids_total{gpu="1",uuid="GPU-bbbb",xid="79"} 1`,
	} {
		if !strings.Contains(string(got), want+"\n") {
			t.Errorf("missing %s", want)
		}
	}
	if strings.Contains(string(got), `gpu_telemetry_temperature_celsius{gpu="1"`) {
		t.Errorf("hung GPU exports a stale temperature")
	}
}

// TestPromtoolCheckMetrics runs Debian's promtool over the output.
func TestPromtoolCheckMetrics(t *testing.T) {
	testutil.CheckMetrics(t, scrape(t, board(livetest.View())))
}

func TestLint(t *testing.T) {
	problems, err := prom.CollectAndLint(New(board(livetest.View())))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
}

// TestTickNVMLAbsentUntilMeasured: no nvml_tick_seconds sample before the
// pacer measured a tick (absent is not zero).
func TestTickNVMLAbsentUntilMeasured(t *testing.T) {
	v := livetest.View()
	v.Host.Pacer.TickNVML = reading.Opt[time.Duration]{}
	if got := string(scrape(t, board(v))); strings.Contains(got, "gpu_telemetry_nvml_tick_seconds ") {
		t.Errorf("unmeasured tick time exported:\n%s", got)
	}
	if got := string(scrape(t, board(livetest.View()))); !strings.Contains(got, "gpu_telemetry_nvml_tick_seconds 0.0042\n") {
		t.Errorf("measured tick time missing")
	}
}
