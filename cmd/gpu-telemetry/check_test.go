package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/gpu-telemetry/gpu-telemetry/action"
	"github.com/gpu-telemetry/gpu-telemetry/internal/counters"
	"github.com/gpu-telemetry/gpu-telemetry/internal/testutil"
	"github.com/gpu-telemetry/gpu-telemetry/live"
	"github.com/gpu-telemetry/gpu-telemetry/live/control"
	"github.com/gpu-telemetry/gpu-telemetry/live/livetest"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// serveView serves v on a control socket of its own for the test's
// lifetime and returns the socket's path.
func serveView(t *testing.T, v live.View) string {
	t.Helper()
	// A short directory of its own: a unix socket path is limited to 107
	// bytes, and a subtest's TempDir is named after the subtest.
	dir, err := os.MkdirTemp("", "gt")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "control.sock")
	srv, err := control.Listen(control.Config{Path: sock, Counters: counters.New()}, livetest.Board(v))
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() { srv.Serve(ctx); close(served) }()
	t.Cleanup(func() { stop(); <-served })
	return sock
}

// checkGPU is a GPU answering with a fresh sample and healthy counters.
func checkGPU(now time.Time, index int, uuid string) live.GPU {
	g := live.GPU{Info: reading.GPU{Index: index, Name: "NVIDIA B200", BusID: fmt.Sprintf("00000000:%02X:00.0", 0x1b+index), UUID: uuid}}
	s := reading.Sample{GPU: index, Time: now.Add(-100 * time.Millisecond), Values: reading.Values{reading.TempC: reading.Some[uint64](60)}}
	g.Observe(&s, 100*time.Millisecond)
	g.HealthLevel = "ok"
	return g
}

// checkView is livetest's host (gpu-node-07) with GPUs made by gpus.
func checkView(gpus ...func(now time.Time) live.GPU) live.View {
	v := livetest.View()
	v.GPUs = nil
	for _, g := range gpus {
		v.GPUs = append(v.GPUs, g(v.Host.Now))
	}
	return v
}

const (
	uuid0 = "GPU-0f0e0d0c-0b0a-0908-0706-050403020100"
	uuid3 = "GPU-1a2b3c4d-5e6f-7081-92a3-b4c5d6e7f809"
)

func healthyGPU(index int, uuid string) func(time.Time) live.GPU {
	return func(now time.Time) live.GPU { return checkGPU(now, index, uuid) }
}

// The GPUs' actions are set as the monitor sets them (anomaly's repair
// action): check reports what the daemon decided, it decides nothing.

// xid79GPU fell off the bus 5 s before the document's time, after a warm
// reboot that did not recover it: a power cycle.
func xid79GPU(index int, uuid string) func(time.Time) live.GPU {
	return func(now time.Time) live.GPU {
		g := checkGPU(now, index, uuid)
		g.Xid(79, now.Add(-5*time.Second), "GPU has fallen off the bus")
		g.Action = action.Current{Action: action.PowerCycle, Reasons: []string{"Xid 79 GPU has fallen off the bus: warm reboot did not recover it"}}
		return g
	}
}

// startingGPU has not answered a sample since the daemon started: its
// action is not judged yet.
func startingGPU(index int, uuid string) func(time.Time) live.GPU {
	return func(time.Time) live.GPU {
		return live.GPU{Info: reading.GPU{Index: index, Name: "NVIDIA B200", UUID: uuid}}
	}
}

// hungGPU has been stuck in an NVML call for 12 s: a reset.
func hungGPU(index int, uuid string) func(time.Time) live.GPU {
	return func(now time.Time) live.GPU {
		g := checkGPU(now, index, uuid)
		g.Hung("nvmlDeviceGetTemperature", now.Add(-12*time.Second), livetest.Uptime-12*time.Second) // checkView's Host.Mono is livetest's
		g.Action = action.Current{Action: action.ResetGPU, Reasons: []string{"hung in nvmlDeviceGetTemperature"}}
		return g
	}
}

// flaggedGPU had a detector's finding a minute ago: a warning, watched.
func flaggedGPU(index int, uuid string) func(time.Time) live.GPU {
	return func(now time.Time) live.GPU {
		g := checkGPU(now, index, uuid)
		k, _ := reading.FlagKindNamed("spur_throt")
		s := reading.Sample{GPU: index, Time: now.Add(-time.Minute), Values: reading.Values{reading.TempC: reading.Some[uint64](60)}}
		s.Flags.Add(reading.Flag{Kind: k, A: 20})
		g.Observe(&s, 100*time.Millisecond)
		g.Action = action.Current{Action: action.Watch, Reasons: []string{"spur_throt in the last 10 minutes"}}
		return g
	}
}

// rebootedGPU needs a power cycle long after its Xid: status, which looks
// at the last 10 minutes, says OK; check says critical.
func rebootedGPU(index int, uuid string) func(time.Time) live.GPU {
	return func(now time.Time) live.GPU {
		g := checkGPU(now, index, uuid)
		g.Action = action.Current{Action: action.PowerCycle, Reasons: []string{"Xid 79 in the previous boot: warm reboot did not recover it"}}
		return g
	}
}

// withMissing adds to v a board of the previous run (then GPU index) that
// is not enumerated now, with its action as the monitor judged it.
func withMissing(v live.View, index int, uuid string, a action.Action, reason string) live.View {
	v.Host.Missing = append(v.Host.Missing, live.MissingBoard{Index: index, UUID: uuid, Action: action.Current{Action: a, Reasons: []string{reason}}})
	return v
}

// TestCheckFormats: each format's exit status and answer for each state
// of a node, through the control socket as the daemon serves it. The
// table is the contract of each caller: nagios's statuses are status's;
// nhc's line is the drain reason; npd's message fits its 80 bytes.
func TestCheckFormats(t *testing.T) {
	gone := filepath.Join(t.TempDir(), "control.sock")
	type want struct {
		code int
		out  string // stdout contains this
	}
	for _, tc := range []struct {
		name   string
		view   live.View
		socket string // instead of the view's
		nagios want
		nhc    want
		npd    want
		json   want
	}{
		{
			name:   "healthy",
			view:   checkView(healthyGPU(0, uuid0), healthyGPU(1, "GPU-bbbb")),
			nagios: want{0, "OK\n"},
			nhc:    want{0, ""},
			npd:    want{0, "no GPU needs a repair action\n"},
			json:   want{0, `"healthy": true`},
		},
		{
			name:   "a warning is watched, and the node stays in service",
			view:   checkView(flaggedGPU(0, uuid0)),
			nagios: want{1, "WARNING: GPU 0 spur_throt in the last 10 minutes\ngpu-node-07 GPU 0 GPU-0f0e0d0c… spur_throt in the last 10 minutes: watch\n"},
			nhc:    want{0, ""},
			npd:    want{0, "no GPU needs a repair action\n"},
			json:   want{0, `"action": "watch"`},
		},
		{
			name:   "Xid 79 on GPU 3",
			view:   checkView(healthyGPU(0, uuid0), healthyGPU(1, "GPU-1"), healthyGPU(2, "GPU-2"), xid79GPU(3, uuid3)),
			nagios: want{2, "CRITICAL: GPU 3 Xid 79 in the last 10 minutes\ngpu-node-07 GPU 3 GPU-1a2b3c4d… Xid 79 GPU has fallen off the bus: power_cycle\n"},
			nhc:    want{1, "gpu-node-07 GPU 3 GPU-1a2b3c4d… Xid 79 GPU has fallen off the bus: power_cycle\n"},
			npd:    want{1, "gpu-node-07 GPU 3 GPU-1a2b3c4d… Xid 79 GPU has fallen off the bus: power_cycle\n"},
			json:   want{1, `"reason": "gpu-node-07 GPU 3 GPU-1a2b3c4d… Xid 79 GPU has fallen off the bus: power_cycle"`},
		},
		{
			name:   "a hung GPU and a fallen one: the line names the worst action, and counts the others",
			view:   checkView(hungGPU(0, uuid0), xid79GPU(3, uuid3)),
			nagios: want{2, "CRITICAL: GPU 0 hung; GPU 3 Xid 79 in the last 10 minutes\n"},
			nhc:    want{1, "gpu-node-07 GPU 3 GPU-1a2b3c4d… Xid 79 GPU has fallen off the bus: power_cycle (+1 more)\n"},
			npd:    want{1, "gpu-node-07 GPU 3 GPU-1a2b3c4d… Xid 79 GPU has fallen off the bus: power_cy…\n"},
			json:   want{1, `"action": "reset_gpu"`},
		},
		{
			name:   "an action that outlasts status's 10 minutes",
			view:   checkView(rebootedGPU(0, uuid0)),
			nagios: want{2, "CRITICAL: GPU 0 power_cycle\ngpu-node-07 GPU 0 GPU-0f0e0d0c… Xid 79 in the previous boot: power_cycle\n"},
			nhc:    want{1, "gpu-node-07 GPU 0 GPU-0f0e0d0c… Xid 79 in the previous boot: power_cycle\n"},
			npd:    want{1, "gpu-node-07 GPU 0 GPU-0f0e0d0c… Xid 79 in the previous boot: power_cycle\n"},
			json:   want{1, `"status": 2`},
		},
		{
			// Xid 79, a warm reboot, and the board is not enumerated
			// now: the main power-cycle case, known only by its UUID.
			name:   "a missing board that a warm reboot did not bring back",
			view:   withMissing(checkView(healthyGPU(0, uuid0)), 3, uuid3, action.PowerCycle, "warm reboot did not recover it (xid79 in the previous boot)"),
			nagios: want{2, "CRITICAL: missing board " + uuid3 + " power_cycle\ngpu-node-07 missing GPU-1a2b3c4d… warm reboot did not recover it (xid79 in the previous boot): power_cycle\n"},
			nhc:    want{1, "gpu-node-07 missing GPU-1a2b3c4d… warm reboot did not recover it (xid79 in the previous boot): power_cycle\n"},
			npd:    want{1, "gpu-node-07 missing GPU-1a2b3c4d… warm reboot did not recover it (xid79 in …\n"},
			json:   want{1, `"missing": true`},
		},
		{
			name:   "a missing board watched",
			view:   withMissing(checkView(healthyGPU(0, uuid0)), 3, uuid3, action.Watch, "x"),
			nagios: want{1, "WARNING: missing board " + uuid3 + " watch\n"},
			nhc:    want{0, ""},
			npd:    want{0, "no GPU needs a repair action\n"},
			json:   want{0, `"healthy": true`},
		},
		{
			// The daemon has just started: no action is known yet, so
			// the node is not called healthy (nor drained).
			name:   "a GPU not judged yet",
			view:   checkView(healthyGPU(0, uuid0), startingGPU(1, "GPU-1")),
			nagios: want{1, "WARNING: GPU 1 not answering yet\n"},
			nhc:    want{3, "gpu-telemetry is starting: GPU 1 not judged yet\n"},
			npd:    want{2, "gpu-telemetry is starting: GPU 1 not judged yet\n"},
			json:   want{3, `"error": "gpu-telemetry is starting: GPU 1 not judged yet"`},
		},
		{
			name:   "a GPU not judged yet and one that needs an action",
			view:   checkView(startingGPU(0, uuid0), xid79GPU(3, uuid3)),
			nagios: want{2, "CRITICAL: GPU 3 Xid 79 in the last 10 minutes"},
			nhc:    want{1, "gpu-node-07 GPU 3 GPU-1a2b3c4d… Xid 79 GPU has fallen off the bus: power_cycle\n"},
			npd:    want{1, "gpu-node-07 GPU 3 GPU-1a2b3c4d… Xid 79 GPU has fallen off the bus: power_cycle\n"},
			json:   want{1, `"healthy": false`},
		},
		{
			name:   "no daemon",
			socket: gone,
			nagios: want{3, "UNKNOWN: gpu-telemetry cannot ask the daemon at " + gone},
			nhc:    want{3, "gpu-telemetry cannot ask the daemon at " + gone},
			npd:    want{2, "gpu-telemetry cannot ask the daemon at "},
			json:   want{3, `"error": "gpu-telemetry cannot ask the daemon at ` + gone},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sock := tc.socket
			if sock == "" {
				sock = serveView(t, tc.view)
			}
			for format, w := range map[string]want{"nagios": tc.nagios, "nhc": tc.nhc, "npd": tc.npd, "json": tc.json} {
				var out, errb bytes.Buffer
				code := runCheck([]string{"--socket", sock, "--format", format}, &out, &errb)
				if code != w.code || !strings.Contains(out.String(), w.out) {
					t.Errorf("--format %s: exit %d, stdout\n%s\nwant exit %d and\n%s\n(stderr %q)", format, code, out.String(), w.code, w.out, errb.String())
				}
				if w.out == "" && out.Len() != 0 {
					t.Errorf("--format %s: a healthy node printed %q; NHC wants nothing", format, out.String())
				}
				checkContract(t, format, out.Bytes())
			}
		})
	}
}

// checkContract holds an answer to what its format's reader can take:
// nhc and npd one line, npd at most 80 bytes of whole characters, json
// one document.
func checkContract(t *testing.T, format string, out []byte) {
	t.Helper()
	switch format {
	case "nhc", "npd":
		if bytes.Count(out, []byte("\n")) > 1 {
			t.Errorf("--format %s: more than one line: %q", format, out)
		}
		if msg := bytes.TrimSuffix(out, []byte("\n")); format == "npd" && (len(msg) > npdMaxOutput || !utf8.Valid(msg)) {
			t.Errorf("--format npd: message of %d bytes (valid UTF-8: %v), want at most %d: %q", len(msg), utf8.Valid(msg), npdMaxOutput, msg)
		}
	case "json":
		var d checkDoc
		if err := json.Unmarshal(out, &d); err != nil || d.SchemaVersion == 0 {
			t.Errorf("--format json: not a check document (%v): %s", err, out)
		}
	}
}

// TestCheckNPDCutsTo80Bytes: a long host name and two-byte characters cut
// on a character boundary, ending in "…", within NPD's 80 bytes.
func TestCheckNPDCutsTo80Bytes(t *testing.T) {
	v := checkView(xid79GPU(3, uuid3))
	v.Host.Identity.Host = "gpu-node-007.rack-12.row-b.datacenter-north.example.org"
	var out bytes.Buffer
	if code := runCheck([]string{"--socket", serveView(t, v), "--format", "npd"}, &out, &out); code != 1 {
		t.Fatalf("exit %d, want 1: %s", code, out.String())
	}
	checkContract(t, "npd", out.Bytes())
	if msg := strings.TrimSuffix(out.String(), "\n"); !strings.HasPrefix(msg, "gpu-node-007.rack-12") || !strings.HasSuffix(msg, "…") {
		t.Errorf("message %q: want the host first and an ellipsis where it was cut", msg)
	}
	for n := 1; n < 12; n++ {
		s := strings.Repeat("é", n)
		if got := cut(s, 5); len(got) > 5 || !utf8.ValidString(got) {
			t.Errorf("cut(%q, 5) = %q", s, got)
		}
	}
}

// TestCheckNPDAction: each action's NPD rule (--action) is NonOK only
// when a GPU's action is that one; the others stay OK, so that one rule
// per action raises its own event.
func TestCheckNPDAction(t *testing.T) {
	sock := serveView(t, checkView(healthyGPU(0, uuid0), xid79GPU(3, uuid3)))
	for _, tc := range []struct {
		action string
		code   int
		out    string
	}{
		{"power_cycle", 1, "GPU 3 GPU-1a2b3c4d… Xid 79"},
		{"reboot", 0, "no GPU needs reboot"},
		{"inspect", 0, "no GPU needs inspect"},
	} {
		var out, errb bytes.Buffer
		if code := runCheck([]string{"--socket", sock, "--format", "npd", "--action", tc.action}, &out, &errb); code != tc.code || !strings.Contains(out.String(), tc.out) {
			t.Errorf("--action %s: exit %d, %q; want %d and %q (stderr %q)", tc.action, code, out.String(), tc.code, tc.out, errb.String())
		}
	}
}

// TestCheckGolden pins each format's whole answer for livetest's node
// (GPU 0 critical health, GPU 1 hung after an Xid 79).
func TestCheckGolden(t *testing.T) {
	v := livetest.View()
	v.GPUs[0].Action = action.Current{Action: action.DrainAndReset, Reasons: []string{"health critical: remap_pending"}}
	v.GPUs[1].Action = action.Current{Action: action.Reboot, Reasons: []string{"Xid 79 GPU has fallen off the bus: NVIDIA's resolution RESTART_BM", "hung in nvmlDeviceGetTemperature"}}
	sock := serveView(t, v)
	for _, f := range checkFormats {
		var out, errb bytes.Buffer
		code := runCheck([]string{"--socket", sock, "--format", f.name}, &out, &errb)
		testutil.Golden(t, "check/"+f.name+".txt", fmt.Appendf(out.Bytes(), "exit %d\n", code))
	}
}

// TestCheckArguments: bad flags are one line and the usage status each
// contract allows: 2, but 3 (UNKNOWN) for nagios, where 2 is CRITICAL;
// a --format that names no contract is 2; json answers in JSON.
func TestCheckArguments(t *testing.T) {
	gone := filepath.Join(t.TempDir(), "control.sock")
	checkCLI(t, runCheck, []cliCase{
		{"help", []string{"--help"}, 0, "Usage: gpu-telemetry check", ""},
		{"unknown flag, nagios", []string{"--verbose"}, 3, "", "unknown flag --verbose"},
		{"unknown flag, nhc", []string{"--format", "nhc", "--verbose"}, 2, "", "unknown flag --verbose"},
		{"unknown flag, npd", []string{"--verbose", "--format=npd"}, 2, "", "unknown flag --verbose"},
		{"unknown flag, json", []string{"--format", "json", "--verbose"}, 2, `"error": "gpu-telemetry check: unknown flag --verbose`, "unknown flag --verbose"},
		{"bad format", []string{"--format", "icinga"}, 2, "", `--format must be one of "nagios","nhc","npd","json" but got "icinga"`},
		{"format without a value", []string{"--format"}, 3, "", "--format: expected string value"},
		{"argument", []string{"--format", "npd", "now"}, 2, "", "unexpected argument now"},
		{"socket off", []string{"--format", "nhc", "--socket", "none"}, 2, "", "needs the daemon's socket path"},
		{"action without npd", []string{"--action", "reboot"}, 3, "", "--action is for --format npd"},
		{"unknown action", []string{"--format", "npd", "--action", "reboot_now"}, 2, "", `--action "reboot_now": one of recover_fabric, reset_gpu, drain_and_reset, reboot, power_cycle, inspect`},
		{"an action that drains nothing", []string{"--format", "npd", "--action", "watch"}, 2, "", `--action "watch": one of recover_fabric,`},
		{"no daemon", []string{"--socket", gone, "--format", "nhc"}, 3, "gpu-telemetry cannot ask the daemon at " + gone, "no socket there"},
	})
}

// A check older than the daemon it asks reads an action it does not know
// (a newer daemon's) as it came and as one that drains, rather than
// answering unknown because the document did not decode.
func TestCheckNewerAction(t *testing.T) {
	b, err := json.Marshal(live.NewDoc(checkView(healthyGPU(0, uuid0), hungGPU(3, uuid3))))
	if err != nil {
		t.Fatal(err)
	}
	b = bytes.Replace(b, []byte(`"name":"reset_gpu"`), []byte(`"name":"quarantine_board"`), 1)
	var d live.Doc
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("the document with a newer action does not decode: %v", err)
	}
	for _, f := range []string{"nhc", "npd", "json"} {
		var out bytes.Buffer
		r := newCheckResult(d)
		format := lookupFormat(f)
		if code := format.exit(format.write(&out, r), r); code != 1 || !strings.Contains(out.String(), "quarantin") { // npd cuts to 80 bytes
			t.Errorf("%s: exit %d, %q; want 1 naming quarantine_board", f, code, out.String())
		}
	}
	if r := newCheckResult(d); r.code != live.CheckCritical {
		t.Errorf("nagios status %d, want critical", r.code)
	}
}
