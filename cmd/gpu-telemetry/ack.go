package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/gpu-telemetry/gpu-telemetry/action"
	"github.com/gpu-telemetry/gpu-telemetry/live/control"
	"github.com/gpu-telemetry/gpu-telemetry/monitor"
)

// ackDescription is what `gpu-telemetry ack --help` says the command does.
const ackDescription = "Acknowledges a GPU's repair action on the running daemon, as root, over its control socket: " +
	"--action names the action acknowledged, which must be the GPU's current one (status shows it). " +
	"The ack is written to events.log (type=ACK) and to the board's state file; the GPU's action returns to none " +
	"(watch while a condition still holds) until a new event, and the boots before it no longer count towards inspect. " +
	"A board of the previous run that is not enumerated now (status's missing boards) is acknowledged by its UUID the same way. " +
	"Exit status: 0 acknowledged, 1 refused (not root, another action, no such GPU), 2 bad flags, 3 no daemon."

// AckCLI is `gpu-telemetry ack`.
type AckCLI struct {
	SocketFlag
	GPU    string `arg:"" help:"The GPU: its index, its UUID or the start of it (enough to name one); a board missing now (status's missing boards) by its UUID."`
	Action string `required:"" help:"The action acknowledged: the GPU's current one (reset_gpu, reboot, power_cycle, inspect, ...)."`
	Note   string `help:"What was done, for events.log and the board's state file (at most 128 bytes)."`
}

// runAck runs `gpu-telemetry ack`.
func runAck(args []string, stdout, stderr io.Writer) int {
	var cli AckCLI
	path, code, ok := socketFlags(&cli, "gpu-telemetry ack", ackDescription, 2, args, stdout, stderr)
	if !ok {
		return code
	}
	a, err := action.Parse(cli.Action)
	if err != nil {
		fmt.Fprintf(stderr, "gpu-telemetry ack: --action: %v\n", err)
		return 2
	}
	if len(cli.Note) > control.MaxNote {
		fmt.Fprintf(stderr, "gpu-telemetry ack: --note: %d bytes, at most %d\n", len(cli.Note), control.MaxNote)
		return 2
	}
	r, err := control.Ack(path, control.AckRequest{GPU: cli.GPU, Action: a, Note: cli.Note}, statusTimeout)
	if err != nil {
		if ae := (*control.AnswerError)(nil); errors.As(err, &ae) { // the daemon refused: why is its own
			fmt.Fprintf(stderr, "gpu-telemetry ack: %v\n", err)
			return 1
		}
		fmt.Fprintf(stderr, "gpu-telemetry ack: %s\n", whyNoAnswer(path, err))
		return 3
	}
	if r.Missing {
		fmt.Fprintf(stdout, "missing board %s (GPU %d of the previous run)", r.UUID, r.GPU)
	} else {
		fmt.Fprint(stdout, strings.TrimSpace(fmt.Sprintf("GPU %d %s", r.GPU, r.UUID))) // no UUID: not read yet
	}
	fmt.Fprintf(stdout, ": %s acknowledged; its action is now %s", r.Acked, r.Action)
	if len(r.Reasons) > 0 {
		fmt.Fprintf(stdout, " (%s)", strings.Join(r.Reasons, "; "))
	}
	fmt.Fprintln(stdout)
	return 0
}

// ackVia is the control socket's Acker over the monitor's Ack.
func ackVia(mon *monitor.Monitor) control.Acker {
	return func(req control.AckRequest, by string) (control.AckReply, error) {
		res, err := mon.Ack(req.GPU, req.Action, req.Note, by)
		if err != nil {
			return control.AckReply{}, err
		}
		return control.AckReply{GPU: res.GPU, Missing: res.Missing, UUID: res.UUID, Acked: res.Acked, Action: res.Now.Action, Reasons: res.Now.Reasons}, nil
	}
}
