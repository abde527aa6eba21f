package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/sampler"
)

const probeUsage = `usage: gpu-telemetry probe [--interval 100ms] [--gpu SEL] [--calls 200] [--deadline D]
Measures what each NVML call the logger makes costs on this host (p50 and p99,
each GPU alone and all GPUs at once) and prints the expected NVML time per tick
and the driver calls per second at --interval. It only reads: no setting is
changed. Every call runs under --deadline (default max(2 x interval, 1s), as
the daemon); a GPU whose call does not return in time is reported and left
alone. Exit status: 0 measured, 1 no driver, no GPU or a GPU hung, 2 bad
arguments.
`

// runProbe runs `gpu-telemetry probe`; it returns the exit status. The
// measurement is sampler.Probe, the text sampler.ProbeReport.Write.
func runProbe(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("probe", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var iv, deadline, start Interval = Interval(100 * time.Millisecond), 0, Interval(20 * time.Second)
	var gpus string
	fs.Var(&ivFlag{&iv}, "interval", "")
	fs.Var(&ivFlag{&deadline}, "deadline", "")
	fs.Var(&ivFlag{&start}, "start-timeout", "")
	fs.StringVar(&gpus, "gpu", "", "")
	calls := fs.Int("calls", 200, "")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, probeUsage)
			return 0
		}
		fmt.Fprintf(stderr, "gpu-telemetry probe: %v\n%s", err, probeUsage)
		return 2
	}
	switch {
	case fs.NArg() > 0:
		fmt.Fprintf(stderr, "gpu-telemetry probe: unexpected argument %q\n%s", fs.Arg(0), probeUsage)
		return 2
	case iv <= 0 || time.Duration(iv) > time.Hour:
		fmt.Fprintln(stderr, "gpu-telemetry probe: --interval must be > 0 and at most 1h")
		return 2
	case *calls < 10 || *calls > 100000:
		fmt.Fprintln(stderr, "gpu-telemetry probe: --calls must be 10..100000")
		return 2
	case deadline < 0:
		fmt.Fprintln(stderr, "gpu-telemetry probe: --deadline must be >= 0")
		return 2
	}
	if deadline == 0 {
		deadline = Interval(max(2*time.Duration(iv), time.Second))
	}
	var sel []string
	if gpus != "" {
		sel = strings.Split(gpus, ",")
	}
	cfg := sampler.DefaultConfig(time.Duration(iv))
	cfg.Interval = 0 // no pacer: the probe times calls, it does not sample
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	host, err := sampler.Open(sampler.NewNVML(), sampler.OpenOptions{Select: sel, Config: cfg,
		Timeout: time.Duration(start), Logger: log})
	if err != nil {
		fmt.Fprintf(stderr, "gpu-telemetry probe: %v\n", err)
		return 1
	}
	rep := sampler.Probe(host, sampler.ProbeOptions{Calls: *calls, Deadline: time.Duration(deadline),
		Interval: time.Duration(iv), SlowEvery: cfg.SlowEvery})
	if err := rep.Write(stdout); err != nil {
		fmt.Fprintf(stderr, "gpu-telemetry probe: %v\n", err)
		return 1
	}
	for _, h := range rep.Hung {
		if h != "" {
			return 1 // a call is still inside the driver: do not wait for nvmlShutdown
		}
	}
	host.Close(time.Duration(deadline))
	return 0
}

// ivFlag lets flag parse an Interval (seconds or a Go duration).
type ivFlag struct{ v *Interval }

func (f *ivFlag) String() string {
	if f.v == nil {
		return ""
	}
	return time.Duration(*f.v).String()
}
func (f *ivFlag) Set(s string) error { return f.v.UnmarshalText([]byte(s)) }
