package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// actionDoc is the part of the status document the action tests read.
type actionDoc struct {
	GPUs []struct {
		Index  int    `json:"index"`
		UUID   string `json:"uuid"`
		State  string `json:"state"`
		Action struct {
			Name    string   `json:"name"`
			Reasons []string `json:"reasons"`
			Ack     *struct {
				Action string `json:"action"`
				Note   string `json:"note"`
				By     string `json:"by"`
			} `json:"ack"`
		} `json:"action"`
	} `json:"gpus"`
}

const actionUUID = "GPU-0a0a0a0a-1111-2222-3333-444455556666"

// waitAction waits until GPU 0's action in status --json is want and
// returns its reasons.
func waitAction(t *testing.T, p *proc, want string) []string {
	t.Helper()
	var reasons []string
	p.waitFor("the control socket", 20*time.Second, func() bool { _, err := os.Stat(p.socketPath()); return err == nil })
	p.waitFor("GPU 0's action "+want, 20*time.Second, func() bool {
		_, d, _ := statusAs[actionDoc](t, p.socketPath())
		if len(d.GPUs) == 0 || d.GPUs[0].Action.Name != want {
			return false
		}
		reasons = d.GPUs[0].Action.Reasons
		return true
	})
	return reasons
}

// rebootBoard plays a reboot for the board's state file: the boot the
// logger recorded becomes an earlier boot (the kernel's boot id is the
// host's own, which a test cannot change).
func rebootBoard(t *testing.T, dir, earlier string) {
	t.Helper()
	p := filepath.Join(dir, "action-"+actionUUID+".json")
	var h map[string]any
	if err := json.Unmarshal([]byte(readFile(t, p)), &h); err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	boot, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	cur := strings.TrimSpace(string(boot))
	found := false
	for _, b := range h["boots"].([]any) {
		if m := b.(map[string]any); m["boot_id"] == cur {
			m["boot_id"], found = earlier, true
		}
	}
	if !found {
		t.Fatalf("the state file has no record of this boot %q:\n%s", cur, readFile(t, p))
	}
	b, _ := json.Marshal(h)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// The repair action across restarts of the logger and (played) reboots
// of the host, on the simulated driver: Xid 79 asks for a reboot; the
// same Xid after two reboots escalates to inspect (the default
// --inspect-after-boots); a board whose previous boot ended in Xid 79 and
// that has not answered once in this boot (lost from its first sample)
// asks for a power cycle, "warm reboot did not recover it"; an ack by root returns it to watch (it is still lost), written to
// events.log and the state file; an ack of another action or of no GPU is
// refused.
func TestRepairActionAcrossBoots(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	xid79 := "gpus 2\ngpu 0 uuid " + actionUUID + "\nat 1s gpu 0 xid 79\n"
	for i, want := range []string{"reboot", "reboot", "inspect"} {
		p := start(t, opts{scenario: xid79, dir: dir, kmsg: true})
		reasons := waitAction(t, p, want)
		if !strings.Contains(strings.Join(reasons, "; "), "Xid 79") {
			t.Errorf("boot %d: reasons %q", i+1, reasons)
		}
		if want == "inspect" && !strings.Contains(reasons[0], "the same in 2 earlier boots") {
			t.Errorf("boot %d: the escalation does not say why: %q", i+1, reasons)
		}
		p.stop()
		if ev := events(dir); !strings.Contains(ev, "uuid="+actionUUID) || !strings.Contains(ev, "type=ACTION action="+want+" from=none") {
			t.Errorf("boot %d: no ACTION line for %s:\n%s", i+1, want, ev)
		}
		rebootBoard(t, dir, "earlier-boot-"+string(rune('1'+i)))
	}

	// Lost from the first sample, its UUID still read: it never came back
	// (one that answered first came back, and a loss later is itself).
	lost := "gpus 2\ngpu 0 uuid " + actionUUID + "\ngpu 0 fail nvmlDeviceGetTemperature lost\n"
	p := start(t, opts{scenario: lost, dir: dir})
	reasons := waitAction(t, p, "power_cycle")
	if !strings.HasPrefix(reasons[0], "warm reboot did not recover it") {
		t.Errorf("power cycle reasons %q", reasons)
	}
	for _, args := range [][]string{
		{"ack", "0", "--action", "reboot", "--socket", p.socketPath()},
		{"ack", "7", "--action", "power_cycle", "--socket", p.socketPath()},
	} {
		if code, out, errOut := runTool(t, nil, args...); code != 1 {
			t.Errorf("%s: exit %d, want 1 (refused)\n%s%s", strings.Join(args, " "), code, out, errOut)
		}
	}
	code, out, errOut := runTool(t, nil, "ack", actionUUID, "--action", "power_cycle", "--note", "cold boot, reseated", "--socket", p.socketPath())
	if code != 0 || !strings.Contains(out, "power_cycle acknowledged; its action is now watch") {
		t.Fatalf("ack: exit %d\n%s%s", code, out, errOut)
	}
	waitAction(t, p, "watch")
	p.stop()
	ev := events(dir)
	if !strings.Contains(ev, `type=ACK action=power_cycle by=root note="cold boot, reseated"`) || !strings.Contains(ev, "type=ACTION action=watch from=power_cycle") {
		t.Errorf("events.log after the ack:\n%s", ev)
	}
	if s := readFile(t, filepath.Join(dir, "action-"+actionUUID+".json")); !strings.Contains(s, `"note": "cold boot, reseated"`) {
		t.Errorf("the state file lacks the ack:\n%s", s)
	}
}

// missingDoc is the status document's missing boards.
type missingDoc struct {
	Host struct {
		MissingBoards []struct {
			Index  int    `json:"index"`
			UUID   string `json:"uuid"`
			Action struct {
				Name    string   `json:"name"`
				Reasons []string `json:"reasons"`
			} `json:"action"`
		} `json:"missing_boards"`
	} `json:"host"`
}

// A board whose boot ended in Xid 79 and that is not enumerated after the
// reboot (RmInitAdapter failed: the driver did not take it) is a power
// cycle: in the status document's missing_boards and its text, and an
// ACTION line by its UUID; ack, given the start of its UUID, clears it.
func TestRepairActionOfAMissingBoard(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := start(t, opts{scenario: "gpus 2\ngpu 0 uuid " + actionUUID + "\nat 1s gpu 0 xid 79\n", dir: dir, kmsg: true})
	waitAction(t, p, "reboot")
	p.stop()
	rebootBoard(t, dir, "earlier-boot-1")

	// After the reboot only the other board answers: it is GPU 0 now.
	p = start(t, opts{scenario: "gpus 1\n", dir: dir})
	p.waitFor("the control socket", 20*time.Second, func() bool { _, err := os.Stat(p.socketPath()); return err == nil })
	// The other board of the first run is missing too, with no history:
	// not enumerated, it asks for a reboot.
	var d missingDoc
	p.waitFor("the missing boards' actions", 20*time.Second, func() bool {
		_, d, _ = statusAs[missingDoc](t, p.socketPath())
		return len(d.Host.MissingBoards) == 2
	})
	for _, b := range d.Host.MissingBoards {
		switch {
		case b.UUID != actionUUID:
			if b.Index != 1 || b.Action.Name != "reboot" {
				t.Errorf("the other missing board %+v", b)
			}
		case b.Index != 0 || b.Action.Name != "power_cycle" || !strings.HasPrefix(b.Action.Reasons[0], "warm reboot did not recover it"):
			t.Errorf("missing board %+v", b)
		}
	}
	if code, out := status(t, "--socket", p.socketPath()); !strings.Contains(out, "missing board "+actionUUID+" (GPU 0 in the previous run): action power_cycle") {
		t.Errorf("status (exit %d) does not show the missing board:\n%s", code, out)
	}
	// check drains for it in every format, naming the board by its UUID.
	short := actionUUID[:len("GPU-")+8] + "…"
	for _, c := range []struct {
		format string
		code   int
		want   string
	}{
		{"nagios", 2, "missing board " + actionUUID + " power_cycle"},
		{"nhc", 1, "missing " + short + " warm reboot did not recover it"},
		{"npd", 1, "missing " + short + " warm reboot did not recover it"},
		{"json", 1, `"missing": true`},
	} {
		if code, out, errOut := runTool(t, nil, "check", "--format", c.format, "--socket", p.socketPath()); code != c.code || !strings.Contains(out, c.want) {
			t.Errorf("check --format %s: exit %d, want %d with %q:\n%s%s", c.format, code, c.code, c.want, out, errOut)
		}
	}
	// Once it is power cycled, ack clears it, named by the start of its UUID.
	code, out, errOut := runTool(t, nil, "ack", actionUUID[:12], "--action", "power_cycle", "--note", "reseated", "--socket", p.socketPath())
	if code != 0 || !strings.Contains(out, "missing board "+actionUUID+" (GPU 0 of the previous run): power_cycle acknowledged; its action is now watch") {
		t.Fatalf("ack of the missing board: exit %d\n%s%s", code, out, errOut)
	}
	p.waitFor("the missing board's action after the ack", 20*time.Second, func() bool {
		_, d, _ = statusAs[missingDoc](t, p.socketPath())
		for _, b := range d.Host.MissingBoards {
			if b.UUID == actionUUID {
				return b.Action.Name == "watch"
			}
		}
		return false
	})
	// Watched now: check no longer drains for it (only for the other
	// missing board).
	if code, out, errOut := runTool(t, nil, "check", "--format", "nhc", "--socket", p.socketPath()); code != 1 || strings.Contains(out, short) {
		t.Errorf("check --format nhc after the missing board's ack: exit %d, want 1 without %s:\n%s%s", code, short, out, errOut)
	}
	p.stop()
	ev := events(dir)
	if !strings.Contains(ev, "uuid="+actionUUID) || !strings.Contains(ev, "type=ACTION prev_gpu=0 action=power_cycle from=none") {
		t.Errorf("no ACTION line for the missing board:\n%s", ev)
	}
	if !strings.Contains(ev, "type=ACK prev_gpu=0 action=power_cycle by=root note=reseated") || !strings.Contains(ev, "type=ACTION prev_gpu=0 action=watch from=power_cycle") {
		t.Errorf("events.log after the missing board's ack:\n%s", ev)
	}
	if s := readFile(t, filepath.Join(dir, "action-"+actionUUID+".json")); !strings.Contains(s, `"note": "reseated"`) {
		t.Errorf("the missing board's state file lacks the ack:\n%s", s)
	}
}
