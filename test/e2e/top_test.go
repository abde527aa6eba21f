package e2e

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/testutil"
)

// TestTopInTmux drives `gpu-telemetry top` in a real terminal (tmux, 80x24):
// the screen shows every GPU and the host lines, q quits and the terminal
// comes back (the pane's shell prompt, no alternate screen left).
func TestTopInTmux(t *testing.T) {
	t.Parallel()
	tmux := testutil.NeedTool(t, "tmux", "tmux")
	p := start(t, opts{scenario: "@hang"})
	p.waitForRows(0, 6, 10*time.Second)
	session := "gt-top-" + strconv.Itoa(os.Getpid())
	sock := t.TempDir() + "/tmux.sock"
	run := func(args ...string) string {
		out, err := exec.Command(tmux, append([]string{"-S", sock}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("tmux %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	// A shell in the pane, so that "the terminal is restored" can be seen.
	run("new-session", "-d", "-s", session, "-x", "80", "-y", "24", "sh")
	t.Cleanup(func() { exec.Command(tmux, "-S", sock, "kill-server").Run() })
	run("send-keys", "-t", session, "TERM=xterm-256color "+binPath+" top --socket "+p.socketPath()+"; echo top-exited-$?", "Enter")
	var screen string
	p.waitFor("top's screen", 10*time.Second, func() bool {
		screen = run("capture-pane", "-p", "-t", session)
		return strings.Contains(screen, "GPU 1 ") && strings.Contains(screen, "q quit")
	})
	lines := strings.Split(strings.TrimRight(screen, "\n"), "\n")
	if len(lines) > 24 || !strings.Contains(screen, "gpu-telemetry ") || !strings.Contains(screen, "GPU 0 ok") {
		t.Errorf("screen:\n%s", screen)
	}
	// hang.scn: GPU 1 hangs at 3 s; top shows it within about a second.
	p.waitFor("GPU 1 hung on top's screen", 10*time.Second, func() bool {
		screen = run("capture-pane", "-p", "-t", session)
		return strings.Contains(screen, "GPU 1 HUNG")
	})
	run("send-keys", "-t", session, "q")
	p.waitFor("top to exit and the shell to come back", 5*time.Second, func() bool {
		screen = run("capture-pane", "-p", "-t", session)
		return strings.Contains(screen, "top-exited-0")
	})
	if strings.Contains(screen, "q quit") {
		t.Errorf("top's screen left behind after q:\n%s", screen)
	}
	if alt := strings.TrimSpace(run("display-message", "-p", "-t", session, "#{alternate_on}")); alt != "0" {
		t.Errorf("alternate screen still on after q: %q", alt)
	}
	// Ctrl-C quits too, with the terminal restored.
	run("send-keys", "-t", session, "clear; "+binPath+" top --socket "+p.socketPath()+"; echo top-exited-again-$?", "Enter")
	p.waitFor("top's screen again", 10*time.Second, func() bool {
		return strings.Contains(run("capture-pane", "-p", "-t", session), "q quit")
	})
	run("send-keys", "-t", session, "C-c")
	p.waitFor("top to exit on Ctrl-C", 5*time.Second, func() bool {
		return strings.Contains(run("capture-pane", "-p", "-t", session), "top-exited-again-0")
	})
}
