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

// scrape renders the collector's output in the text exposition format.
func scrape(t *testing.T, b *live.Board) []byte {
	t.Helper()
	return scrapeCollector(t, New(b))
}

// scrapeCollector renders c's output in the text exposition format.
func scrapeCollector(t *testing.T, c *Collector) []byte {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
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
	got := scrape(t, livetest.Board(livetest.View()))
	testutil.Golden(t, "metrics.txt", got)
	// The hung GPU: state and stall, no stale readings, health unknown (3).
	for _, want := range []string{
		`gpu_telemetry_gpu_state{gpu="1",state="hung",uuid="GPU-bbbb"} 1`,
		`gpu_telemetry_health_verdict{gpu="1",uuid="GPU-bbbb"} 3`,
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

// TestStallIsOnTheMonotonicClock: the stall gauge is the hang's age on the
// publisher's monotonic clock, as the repair judge weighs it: the wall
// clock stepped back 5 min or forward 1 h since the hang began (chrony's
// makestep) shows neither a negative stall nor an hour's.
func TestStallIsOnTheMonotonicClock(t *testing.T) {
	for _, step := range []time.Duration{-5 * time.Minute, time.Hour} {
		v := livetest.View()
		v.Host.Now = v.Host.Now.Add(step)
		if got := string(scrape(t, livetest.Board(v))); !strings.Contains(got, `gpu_telemetry_stall_seconds{gpu="1",uuid="GPU-bbbb"} 12`+"\n") {
			t.Errorf("wall clock stepped %v: stall not 12 s:\n%s", step, grepLines(got, "stall_seconds"))
		}
	}
}

// grepLines is text's lines that contain s.
func grepLines(text, s string) string {
	var out []string
	for l := range strings.Lines(text) {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "")
}

// TestPromtoolCheckMetrics runs Debian's promtool over the output.
func TestPromtoolCheckMetrics(t *testing.T) {
	testutil.CheckMetrics(t, scrape(t, livetest.Board(livetest.View())))
}

func TestLint(t *testing.T) {
	problems, err := prom.CollectAndLint(New(livetest.Board(livetest.View())))
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
	if got := string(scrape(t, livetest.Board(v))); strings.Contains(got, "gpu_telemetry_nvml_tick_seconds ") {
		t.Errorf("unmeasured tick time exported:\n%s", got)
	}
	if got := string(scrape(t, livetest.Board(livetest.View()))); !strings.Contains(got, "gpu_telemetry_nvml_tick_seconds 0.0042\n") {
		t.Errorf("measured tick time missing")
	}
}

// TestNoLabelClashesWithPrometheus: no series of the logger has a label
// Prometheus (or a Kubernetes service discovery) sets on the target:
// instance, job, pod, namespace. Prometheus would rename the logger's own
// to exported_* and dashboards would read the wrong host. The host is the
// host label of gpu_telemetry_host_info.
func TestNoLabelClashesWithPrometheus(t *testing.T) {
	c := New(livetest.Board(livetest.View()))
	fams := append([]*metric{}, all...)
	for _, f := range c.counters {
		fams = append(fams, f)
	}
	for _, f := range fams {
		for _, l := range f.labels {
			switch l {
			case "instance", "job", "pod", "namespace":
				t.Errorf("%s has the label %s, which Prometheus or its Kubernetes discovery sets on the target", f.full, l)
			}
			if strings.HasPrefix(l, "exported_") || strings.HasPrefix(l, "__") {
				t.Errorf("%s has the reserved label name %s", f.full, l)
			}
		}
	}
	if got := string(scrape(t, livetest.Board(livetest.View()))); !strings.Contains(got, `gpu_telemetry_host_info{boot_id="9b1d3f5e-7a2c-4e6b-8d0f-1a3c5e7b9d2f",host="gpu-node-07",machine_id="4f0c8d6a2b7e4e1c9a3d5b7f1e2c4a6b"} 1`) {
		t.Errorf("no host_info series naming the host:\n%s", got)
	}
}

// TestWorkloadInfo: one gpu_workload_info series per distinct job on a
// GPU, from its last successful process read; processes of one job make
// one series, a process with no job makes none. gpu_processes counts the
// read's processes, and is absent for a GPU with no read. With NoWorkload
// (--metrics-no-workload) there is no gpu_workload_info series and no job
// in any label, and gpu_processes stays.
func TestWorkloadInfo(t *testing.T) {
	v := livetest.View()
	slurm := reading.Workload{Known: true, Unit: "slurmstepd.scope", SlurmJob: "4242", SlurmStep: "0"}
	v.GPUs[0].Processes = &reading.Procs{Status: reading.ProcOK, List: []reading.Process{
		{PID: 1, Origin: reading.ProcHere, Workload: slurm},
		{PID: 2, Origin: reading.ProcHere, Workload: slurm},
		{PID: 3, Origin: reading.ProcHere, Workload: reading.Workload{Known: true, PodUID: "0e3a1f2c-4b5d-4c6e-8f70-123456789abc", ContainerID: "4f1d"}},
		{PID: 4, Origin: reading.ProcHere, Workload: reading.Workload{Known: true, Unit: "sshd.service"}},
	}}
	got := string(scrape(t, livetest.Board(v)))
	testutil.Contains(t, "exposition", got, "\ngpu_telemetry_gpu_processes{gpu=\"0\",uuid=\"GPU-aaaa\"} 4\n")
	if strings.Contains(got, "gpu_telemetry_gpu_processes{gpu=\"1\"") {
		t.Errorf("a process count for a GPU with no process read:\n%s", got)
	}
	if n := strings.Count(got, "gpu_telemetry_gpu_workload_info{"); n != 2 {
		t.Errorf("%d gpu_workload_info series, want 2:\n%s", n, got)
	}
	testutil.Contains(t, "exposition", got,
		`gpu_telemetry_gpu_workload_info{container="",gpu="0",pod_uid="",slurm_job="4242",uuid="GPU-aaaa"} 1`,
		`gpu_telemetry_gpu_workload_info{container="4f1d",gpu="0",pod_uid="0e3a1f2c-4b5d-4c6e-8f70-123456789abc",slurm_job="",uuid="GPU-aaaa"} 1`)

	hidden := scrapeWith(t, v, NoWorkload())
	testutil.Contains(t, "exposition with NoWorkload", hidden, "\ngpu_telemetry_gpu_processes{gpu=\"0\",uuid=\"GPU-aaaa\"} 4\n")
	for _, leak := range []string{"gpu_telemetry_gpu_workload_info{", "4242", "0e3a1f2c", "4f1d"} {
		if strings.Contains(hidden, leak) {
			t.Errorf("with NoWorkload the exposition holds %q:\n%s", leak, hidden)
		}
	}
}

// The fan guard's series exist only with --fan-guard: holding 0 or 1, and
// the speed it commands while it holds the fans.
func TestFanGuardSeries(t *testing.T) {
	v := livetest.View()
	sp := 78
	v.GPUs[0].FanGuard = &live.FanGuard{State: "holding", Fans: []int{0, 1}, SpeedPct: &sp}
	v.GPUs[1].FanGuard = &live.FanGuard{State: "watching"}
	got := string(scrape(t, livetest.Board(v)))
	for _, want := range []string{`gpu_telemetry_fan_guard_holding{gpu="0",uuid="GPU-aaaa"} 1`, `gpu_telemetry_fan_guard_speed_ratio{gpu="0",uuid="GPU-aaaa"} 0.78`,
		`gpu_telemetry_fan_guard_holding{gpu="1",uuid="GPU-bbbb"} 0`} {
		if !strings.Contains(got, want+"\n") {
			t.Errorf("no %s", want)
		}
	}
	if strings.Contains(got, `gpu_telemetry_fan_guard_speed_ratio{gpu="1"`) {
		t.Error("a speed for a GPU whose fans are not held")
	}
	if off := string(scrape(t, livetest.Board(livetest.View()))); strings.Contains(off, "fan_guard_") {
		t.Error("fan guard series without --fan-guard")
	}
}
