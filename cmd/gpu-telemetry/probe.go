package main

import (
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/alecthomas/kong"
	"github.com/gpu-telemetry/gpu-telemetry/internal/counters"
	"github.com/gpu-telemetry/gpu-telemetry/sampler"
)

// ProbeCLI is `gpu-telemetry probe`: what each NVML call the logger makes
// costs on this host.
type ProbeCLI struct {
	Interval     Interval `help:"The interval to judge the costs against: seconds (0.1) or a Go duration (100ms); > 0 and at most 1h. Default: ${default}." default:"100ms"`
	GPU          []string `help:"GPUs to measure by index, UUID or PCI bus id, as the daemon's --gpu. Default: all GPUs." sep:","`
	Calls        int      `help:"Calls timed per NVML function and GPU, 10 to 100000. Default: ${default}." default:"200"`
	Deadline     Interval `help:"Time one call may take before its GPU is reported hung and left alone. Default: max(2 x interval, 1s), as the daemon." placeholder:"DURATION"`
	StartTimeout Interval `name:"start-timeout" help:"How long start-up waits for the driver and each GPU. Default: ${default}." default:"20s"`
}

// probeDescription is what `gpu-telemetry probe --help` says it does.
const probeDescription = "Measures what each NVML call the logger makes costs on this host (p50 and p99, each GPU alone and all GPUs at once) and prints the expected NVML time per tick and the driver calls per second at --interval. It only reads: no setting is changed. A GPU whose call does not return within --deadline, or that does not answer at start, is reported and left alone. Exit status: 0 measured, 1 no driver, no GPU, or a GPU that does not answer, 2 bad arguments."

// runProbe runs `gpu-telemetry probe`; it returns the exit status: 0
// measured, 1 no driver, no GPU, or a GPU that does not answer (hung, or
// silent at start: ProbeReport.Stuck), 2 bad arguments. The
// measurement is sampler.Probe, the text sampler.ProbeReport.Write.
func runProbe(args []string, stdout, stderr io.Writer) int {
	var cli ProbeCLI
	if code, ok := parseFlags(&cli, "gpu-telemetry probe", args, stdout, stderr,
		kong.Description(probeDescription)); !ok {
		return code
	}
	iv, deadline := cli.Interval, cli.Deadline
	switch {
	case iv <= 0 || time.Duration(iv) > time.Hour:
		fmt.Fprintln(stderr, "gpu-telemetry probe: --interval must be > 0 and at most 1h")
		return 2
	case cli.Calls < 10 || cli.Calls > 100000:
		fmt.Fprintln(stderr, "gpu-telemetry probe: --calls must be 10..100000")
		return 2
	case deadline < 0:
		fmt.Fprintln(stderr, "gpu-telemetry probe: --deadline must be >= 0")
		return 2
	}
	if deadline == 0 {
		deadline = Interval(max(2*time.Duration(iv), time.Second))
	}
	cfg := sampler.DefaultConfig(time.Duration(iv))
	cfg.Interval = 0 // no pacer: the probe times calls, it does not sample
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	host, err := sampler.Open(sampler.NewNVML(), sampler.OpenOptions{Select: cli.GPU, Config: cfg,
		Timeout: time.Duration(cli.StartTimeout), Logger: log, Counters: counters.New()})
	if err != nil {
		fmt.Fprintf(stderr, "gpu-telemetry probe: %v\n", err)
		return 1
	}
	rep := sampler.Probe(host, sampler.ProbeOptions{Calls: cli.Calls, Deadline: time.Duration(deadline),
		Interval: time.Duration(iv), SlowEvery: cfg.SlowEvery})
	if err := rep.Write(stdout); err != nil {
		fmt.Fprintf(stderr, "gpu-telemetry probe: %v\n", err)
		return 1
	}
	if len(rep.Stuck()) > 0 {
		return 1 // a call may still be inside the driver: do not wait for nvmlShutdown
	}
	host.Close(time.Duration(deadline))
	return 0
}
