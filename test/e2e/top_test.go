package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/testutil"
)

// TestTopInTmux drives `gpu-telemetry top` in a real terminal (tmux, 80x24):
// the screen shows every GPU and the host lines, the hung GPU in colour,
// q quits and the terminal comes back (the pane's shell prompt, no
// alternate screen left); so does Ctrl-C.
func TestTopInTmux(t *testing.T) {
	t.Parallel()
	p, run, session := topInTmux(t, "@hang", 80, 24)
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
	// Colour by severity (no NO_COLOR here): the hung GPU is drawn in a
	// colour, the healthy one in the terminal's own; capture-pane -e keeps
	// the escapes.
	var hung, ok string
	p.waitFor("GPU 1 in a colour", 5*time.Second, func() bool {
		styled := run("capture-pane", "-p", "-e", "-t", session)
		hung, ok = fgAt(styled, "GPU 1 HUNG"), fgAt(styled, "GPU 0 ok")
		return hung != ""
	})
	if ok != "" {
		t.Errorf("GPU 1 HUNG in colour %s, GPU 0 ok in colour %s: want the healthy one uncoloured", hung, ok)
	}
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
	if alt := strings.TrimSpace(run("display-message", "-p", "-t", session, "#{alternate_on}")); alt != "0" {
		t.Errorf("alternate screen still on after Ctrl-C: %q", alt)
	}
}

// topInTmux starts a logger playing scenario and, once it wrote a few
// rows, `gpu-telemetry top` asking it in a tmux server of the test's own:
// one session of width x height running sh, where "top-exited-<status>"
// shows when top ends; env (NAME=VALUE words) is top's environment beside
// TERM=xterm-256color. run runs a tmux command on that server (failing the
// test when it fails) and returns its output.
func topInTmux(t *testing.T, scenario string, width, height int, env ...string) (p *proc, run func(args ...string) string, session string) {
	tmux := testutil.NeedTool(t, "tmux", "tmux")
	p = start(t, opts{scenario: scenario})
	p.waitForRows(0, 6, 10*time.Second)
	session = "gt-top-" + strconv.Itoa(os.Getpid())
	sock := t.TempDir() + "/tmux.sock"
	run = func(args ...string) string {
		out, err := exec.Command(tmux, append([]string{"-S", sock}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("tmux %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	// A shell in the pane, so that "the terminal is restored" can be seen.
	// In a directory of the test's own: top's exports are written there.
	run("new-session", "-d", "-c", t.TempDir(), "-s", session, "-x", strconv.Itoa(width), "-y", strconv.Itoa(height), "sh")
	t.Cleanup(func() { exec.Command(tmux, "-S", sock, "kill-server").Run() })
	run("send-keys", "-t", session, strings.Join(append(env, "TERM=xterm-256color "+binPath+" top --socket "+p.socketPath()+"; echo top-exited-$?"), " "), "Enter")
	return p, run, session
}

// TestTopScrollsInTmux (issue 35): 8 GPUs in a terminal of 80x10 do not
// fit; top shows the first ones above a line counting the rest, and the
// keys a terminal sends for Down, End, Up, PgUp, PgDn and Home scroll them; made
// taller (a resize), every GPU fits and the line goes.
func TestTopScrollsInTmux(t *testing.T) {
	t.Parallel()
	p, run, session := topInTmux(t, "@healthy-8gpu", 80, 10)
	screenShows := func(what string, want ...string) string {
		var screen string
		p.waitFor(what, 10*time.Second, func() bool {
			screen = run("capture-pane", "-p", "-t", session)
			for _, w := range want {
				if !strings.Contains(screen, w) {
					return false
				}
			}
			return true
		})
		return screen
	}
	// 10 lines: 4 host lines, GPUs 0 to 3, the line for the 4 below, the footer.
	screen := screenShows("the first GPUs and a line for the rest", "GPU 0 ok", "GPU 3 ok", "-- 4 more GPUs below", "q quit")
	if strings.Contains(screen, "GPU 4 ") || strings.Contains(screen, "above") {
		t.Errorf("first screen:\n%s", screen)
	}
	run("send-keys", "-t", session, "Down")
	screenShows("one GPU down after Down", "-- 1 more GPU above", "GPU 1 ok", "GPU 3 ok", "-- 4 more GPUs below")
	run("send-keys", "-t", session, "End")
	screen = screenShows("the last GPUs after End", "-- 4 more GPUs above", "GPU 4 ok", "GPU 7 ok")
	if strings.Contains(screen, "GPU 3 ") || strings.Contains(screen, "below") {
		t.Errorf("after End:\n%s", screen)
	}
	run("send-keys", "-t", session, "Up")
	screenShows("one GPU up after Up", "-- 3 more GPUs above", "GPU 3 ok", "GPU 5 ok", "-- 2 more GPUs below")
	run("send-keys", "-t", session, "PPage")
	screenShows("a page (3 GPUs) up after PgUp", "GPU 0 ok", "GPU 3 ok", "-- 4 more GPUs below")
	run("send-keys", "-t", session, "NPage")
	screenShows("a page (4 GPUs) down after PgDn", "-- 4 more GPUs above", "GPU 4 ok", "GPU 7 ok")
	run("send-keys", "-t", session, "Home")
	screenShows("the first GPUs after Home", "GPU 0 ok", "GPU 3 ok", "-- 4 more GPUs below")
	run("resize-window", "-t", session, "-x", "80", "-y", "24")
	screen = screenShows("every GPU once the terminal is taller", "GPU 0 ok", "GPU 7 ok")
	if strings.Contains(screen, "more GPU") {
		t.Errorf("a line for hidden GPUs on a screen where all fit:\n%s", screen)
	}
	run("send-keys", "-t", session, "q")
	screenShows("top to exit", "top-exited-0")
}

// TestTopViewsInTmux (issue 40) drives top's views in a real terminal
// (120x40) against the daemon on 8 simulated GPUs: Enter and a GPU's
// number show its detail, ←/→ select another GPU, the F-keys, Tab and
// Shift-Tab switch views, ? and F1 show the help, Space pauses (the screen
// holds still while the daemon goes on) and resumes, e exports the view
// as JSON to a new file in the current directory named on the footer, q
// quits.
func TestTopViewsInTmux(t *testing.T) {
	t.Parallel()
	p, run, session := topInTmux(t, "@healthy-8gpu", 120, 40)
	screenShows := func(what string, want ...string) string {
		t.Helper()
		var screen string
		p.waitFor(what, 10*time.Second, func() bool {
			screen = run("capture-pane", "-p", "-t", session)
			for _, w := range want {
				if !strings.Contains(screen, w) {
					return false
				}
			}
			return true
		})
		return screen
	}
	detailOf := func(key, gpu string) {
		t.Helper()
		run("send-keys", "-t", session, key)
		p.waitFor("GPU "+gpu+"'s detail after "+key, 10*time.Second, func() bool {
			screen := run("capture-pane", "-p", "-t", session)
			return strings.HasPrefix(screen, "GPU "+gpu+"  ok") && strings.Contains(screen, "[F3 GPU]")
		})
	}
	screenShows("the overview", "[F2 Overview]", "GPU 7 ok")
	detailOf("Enter", "0") // the first GPU is selected at start
	detailOf("3", "3")
	screenShows("GPU 3's detail", "Engines", "PCIe", "GSP-RM internals")
	detailOf("Right", "4")
	detailOf("Left", "3")
	run("send-keys", "-t", session, "F4")
	screenShows("the processes", "[F4 Processes]", "sorted by memory", "←→ GPU 3")
	run("send-keys", "-t", session, "s")
	screenShows("sorted by SM", "sorted by sm")
	run("send-keys", "-t", session, "Tab")
	screenShows("the events after Tab", "[F5 Events]", "events on all GPUs")
	run("send-keys", "-t", session, "BTab")
	screenShows("the processes after Shift-Tab", "[F4 Processes]")
	detailOf("BTab", "3")
	run("send-keys", "-t", session, "F5")
	screenShows("the events after F5", "[F5 Events]")
	run("send-keys", "-t", session, "?")
	screenShows("the help after ?", "[F1 Help]", "What public NVML cannot give")
	detailOf("F3", "3")
	run("send-keys", "-t", session, "F1")
	screenShows("the help after F1", "[F1 Help]", "Space            pause")
	run("send-keys", "-t", session, "Tab")
	screenShows("the overview after Tab from the last view", "[F2 Overview]")

	// Space pauses: the screen holds still while the daemon goes on.
	run("send-keys", "-t", session, "Space")
	screenShows("paused", "PAUSED")
	var paused string
	p.waitFor("the paused screen to settle", 5*time.Second, func() bool {
		prev := paused
		paused = run("capture-pane", "-p", "-t", session)
		return paused == prev
	})
	since := time.Now()
	p.waitFor("the daemon's document 2 s newer than the pause", 10*time.Second, func() bool {
		_, out, _ := runTool(t, nil, "status", "--socket", p.socketPath(), "--json")
		var d struct {
			Time time.Time `json:"time"`
		}
		return json.Unmarshal([]byte(out), &d) == nil && d.Time.After(since.Add(2*time.Second))
	})
	if now := run("capture-pane", "-p", "-t", session); now != paused {
		t.Errorf("the screen changed while paused:\n%s\nnow:\n%s", paused, now)
	}
	held := footerTime(paused)
	run("send-keys", "-t", session, "Space")
	p.waitFor("new documents after Space again", 10*time.Second, func() bool {
		screen := run("capture-pane", "-p", "-t", session)
		return !strings.Contains(screen, "PAUSED") && footerTime(screen) != held && footerTime(screen) != ""
	})

	run("send-keys", "-t", session, "e")
	dir := strings.TrimSpace(run("display-message", "-p", "-t", session, "#{pane_current_path}"))
	screen := screenShows("the export named", "exported "+filepath.Join(dir, "gpu-telemetry-top-overview-"))
	i := strings.Index(screen, "exported ")
	name := strings.Fields(screen[i+len("exported "):])[0]
	b, err := os.ReadFile(name)
	var export struct {
		View string `json:"view"`
		Host string `json:"host"`
		Data struct {
			GPUs []struct {
				Index int    `json:"index"`
				UUID  string `json:"uuid"`
			} `json:"gpus"`
		} `json:"data"`
	}
	if err != nil || json.Unmarshal(b, &export) != nil || export.View != "Overview" || len(export.Data.GPUs) != 8 ||
		export.Host == "" || !strings.HasPrefix(export.Data.GPUs[7].UUID, "GPU-") {
		t.Errorf("export %s (%v): %+v\n%.300s", name, err, export, b)
	}
	run("send-keys", "-t", session, "q")
	screenShows("top to exit", "top-exited-0")
}

// footerTime is the time of the document shown, at the end of the
// footer (the screen's last line), "" when it is not there.
func footerTime(screen string) string {
	lines := strings.Split(strings.TrimRight(screen, "\n "), "\n")
	f := strings.Fields(lines[len(lines)-1])
	if len(f) == 0 {
		return ""
	}
	if t := f[len(f)-1]; len(t) == 8 && t[2] == ':' && t[5] == ':' {
		return t
	}
	return ""
}

// TestTopNoColorInTmux (issue 40): with NO_COLOR set (https://no-color.org)
// top draws no colour at all, not even for a hung GPU: capture-pane -e
// shows no colour escape (bold, underline and reverse remain). On 80x24
// the GPU detail and the help scroll (Up, Down, PgUp, PgDn, Home, End);
// Esc quits with the terminal restored.
func TestTopNoColorInTmux(t *testing.T) {
	t.Parallel()
	p, run, session := topInTmux(t, "@hang", 80, 24, "NO_COLOR=1")
	var styled string
	p.waitFor("GPU 1 hung on top's screen", 15*time.Second, func() bool {
		styled = run("capture-pane", "-p", "-e", "-t", session)
		return strings.Contains(styled, "GPU 1 HUNG") && strings.Contains(styled, "q quit")
	})
	if c := sgrColours(styled); len(c) > 0 {
		t.Errorf("colour escapes %q on the screen under NO_COLOR:\n%q", c, styled)
	}
	// On 24 lines the GPU detail and the help are longer than the screen:
	// End shows their last lines, Up, Down, PgUp, PgDn and Home move them
	// (paused, so that the lines compared do not change meanwhile).
	shows := func(what string, ok func(screen string) bool) {
		t.Helper()
		var screen string
		p.waitFor(what, 10*time.Second, func() bool {
			screen = run("capture-pane", "-p", "-t", session)
			return ok(screen)
		})
	}
	run("send-keys", "-t", session, "Space")
	shows("paused", func(s string) bool { return strings.Contains(s, "PAUSED") })
	for _, v := range []struct{ key, first, last string }{
		{"1", "GPU 1  hung", "GSP-RM internals"},
		{"F1", "gpu-telemetry top: keys", "never 0."},
	} {
		run("send-keys", "-t", session, v.key)
		top := func(s string) bool { return strings.HasPrefix(s, v.first) && !strings.Contains(s, v.last) }
		shows("the top of the view after "+v.key, top)
		run("send-keys", "-t", session, "End")
		shows("the end of the view after End", func(s string) bool { return !strings.HasPrefix(s, v.first) && strings.Contains(s, v.last) })
		end := strings.Split(run("capture-pane", "-p", "-t", session), "\n")[0]
		run("send-keys", "-t", session, "Up")
		shows("a line up after Up", func(s string) bool { return strings.Split(s, "\n")[1] == end })
		run("send-keys", "-t", session, "Down")
		shows("a line down after Down", func(s string) bool { return strings.Split(s, "\n")[0] == end })
		run("send-keys", "-t", session, "PPage")
		shows("a page up (10 lines) after PgUp", func(s string) bool {
			at := slices.Index(strings.Split(s, "\n"), end)
			return at >= 1 && at <= 10 && !strings.Contains(s, v.last)
		})
		run("send-keys", "-t", session, "NPage")
		shows("a page down after PgDn", func(s string) bool { return strings.HasPrefix(s, end) })
		run("send-keys", "-t", session, "Home")
		shows("the top of the view after Home", top)
	}
	run("send-keys", "-t", session, "Escape")
	p.waitFor("top to exit on Esc", 5*time.Second, func() bool {
		return strings.Contains(run("capture-pane", "-p", "-t", session), "top-exited-0")
	})
	if alt := strings.TrimSpace(run("display-message", "-p", "-t", session, "#{alternate_on}")); alt != "0" {
		t.Errorf("alternate screen still on after Esc: %q", alt)
	}
}

// sgr is one SGR escape (ESC [ params m), its parameters in group 1.
var sgr = regexp.MustCompile(`\x1b\[([0-9;:]*)m`)

// sgrColours are the colour parameters of the SGR escapes in s: a
// foreground or background colour (30-37, 38;..., 40-47, 48;..., 90-97,
// 100-107), not the defaults (39, 49).
func sgrColours(s string) []string {
	var out []string
	for _, m := range sgr.FindAllStringSubmatch(s, -1) {
		ps := strings.FieldsFunc(m[1], func(r rune) bool { return r == ';' || r == ':' })
		for i := 0; i < len(ps); i++ {
			n, _ := strconv.Atoi(ps[i])
			switch {
			case n == 38 || n == 48:
				out = append(out, strings.Join(ps[i:], ";"))
				i = len(ps)
			case n >= 30 && n <= 37, n >= 40 && n <= 47, n >= 90 && n <= 97, n >= 100 && n <= 107:
				out = append(out, ps[i])
			}
		}
	}
	return out
}

// fgAt is the foreground colour (its SGR parameters; "" for the
// terminal's own) of the text between two escapes of the styled capture s
// where text first occurs; "" also when no such piece holds text.
func fgAt(s, text string) string {
	fg, last := "", 0
	for _, loc := range append(sgr.FindAllStringSubmatchIndex(s, -1), []int{len(s), len(s), len(s), len(s)}) {
		if strings.Contains(s[last:loc[0]], text) {
			return fg
		}
		last = loc[1]
		ps := strings.FieldsFunc(s[loc[2]:loc[3]], func(r rune) bool { return r == ';' || r == ':' })
		if len(ps) == 0 {
			fg = ""
		}
		for i := 0; i < len(ps); i++ {
			switch n, _ := strconv.Atoi(ps[i]); {
			case n == 0 || n == 39:
				fg = ""
			case n >= 30 && n <= 37, n >= 90 && n <= 97:
				fg = ps[i]
			case n == 38:
				fg, i = strings.Join(ps[i:], ";"), len(ps)
			case n == 48:
				i = len(ps)
			}
		}
	}
	return ""
}

// procScenario has three GPUs with a process each, whose orders by
// memory, SM share and pid all differ, and a run of Xids on GPU 1 for the
// events.
const procScenario = `gpus 3
gpu all util_gpu 50
gpu 0 proc 7001 mem 100 sm 90 memutil 5
gpu 1 proc 7002 mem 5000 sm 10 memutil 5
gpu 2 proc 7003 mem 2000 sm 50 memutil 5
at 1 gpu 1 xid 31 repeat 12 over 2s
`

// TestTopProcessesAndEventsInTmux (issue 40) drives the Processes and
// Events views of top in a real terminal against the daemon on simulated
// GPUs: s changes the order of the processes (memory, SM share, pid), e
// exports them in that order as JSON, ↑/↓ PgUp/PgDn Home/End move the
// highlighted row (Enter shows its GPU), f keeps the selected GPU's; in
// the events, f keeps the selected GPU's lines, ←/→ select another GPU,
// and the scroll keys move through the lines while Space holds them.
func TestTopProcessesAndEventsInTmux(t *testing.T) {
	t.Parallel()
	_, run, session := topInTmux(t, procScenario, 120, 40)
	var screen string
	shows := func(what string, ok func(screen string) bool) {
		t.Helper()
		for end := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			if screen = run("capture-pane", "-p", "-t", session); ok(screen) {
				return
			}
			if time.Now().After(end) {
				t.Fatalf("gave up waiting for %s:\n%s", what, screen)
			}
		}
	}
	has := func(want ...string) func(string) bool {
		return func(s string) bool {
			return !slices.ContainsFunc(want, func(w string) bool { return !strings.Contains(s, w) })
		}
	}
	order := func(pids ...string) func(string) bool {
		return func(s string) bool { return slices.Equal(procPIDs(s), pids) }
	}
	run("send-keys", "-t", session, "F4")
	shows("the processes by memory", order("7002", "7003", "7001"))
	if !strings.Contains(screen, "sorted by memory") {
		t.Errorf("processes by memory:\n%s", screen)
	}
	run("send-keys", "-t", session, "s")
	shows("the processes by SM share", order("7001", "7003", "7002"))
	run("send-keys", "-t", session, "s")
	shows("the processes by pid", order("7001", "7002", "7003"))
	if !strings.Contains(screen, "sorted by pid") {
		t.Errorf("processes by pid:\n%s", screen)
	}
	run("send-keys", "-t", session, "e")
	var export struct {
		View string `json:"view"`
		Data []struct {
			GPU int    `json:"gpu"`
			PID uint32 `json:"pid"`
		} `json:"data"`
	}
	shows("the export named", has("exported "))
	b, err := os.ReadFile(strings.Fields(screen[strings.Index(screen, "exported ")+len("exported "):])[0])
	if err != nil || json.Unmarshal(b, &export) != nil || export.View != "Processes" || len(export.Data) != 3 ||
		export.Data[0].PID != 7001 || export.Data[1].PID != 7002 || export.Data[2].PID != 7003 || export.Data[2].GPU != 2 {
		t.Errorf("export of the processes (%v): %+v\n%.500s", err, export, b)
	}
	// The highlighted row, in pid order: GPU 0's, 1's, 2's; Enter shows
	// the detail of its GPU, F4 comes back to the row. (The export's note
	// takes the footer's room: the views' names are not on it.)
	for _, step := range []struct{ key, gpu string }{
		{"Home", "0"}, {"Down", "1"}, {"End", "2"}, {"Up", "1"}, {"PPage", "0"}, {"NPage", "2"},
	} {
		run("send-keys", "-t", session, step.key, "Enter")
		shows("GPU "+step.gpu+"'s detail after "+step.key+" and Enter", func(s string) bool {
			return strings.HasPrefix(s, "GPU "+step.gpu+"  ") && strings.Contains(s, "\nEngines")
		})
		run("send-keys", "-t", session, "F4")
		shows("the processes", has("processes on all GPUs"))
	}
	run("send-keys", "-t", session, "f")
	shows("GPU 2's process only", has("1 processes on GPU 2"))
	if !slices.Equal(procPIDs(screen), []string{"7003"}) {
		t.Errorf("GPU 2's processes:\n%s", screen)
	}

	// Events: each GPU's health baseline and GPU 1's Xids, newest first,
	// held (Space) once there are more than 6.
	run("send-keys", "-t", session, "F5")
	shows("the events", func(s string) bool {
		n, _ := strconv.Atoi(strings.Fields(s + " x")[0])
		return strings.Contains(s, " events on all GPUs") && n > 6 && strings.Contains(s, "gpu=0 ") && strings.Contains(s, "gpu=1 ")
	})
	run("send-keys", "-t", session, "Space")
	shows("paused", has("PAUSED"))
	run("send-keys", "-t", session, "Left") // GPU 1, after GPU 2
	run("send-keys", "-t", session, "f")
	shows("GPU 1's events", has("events on GPU 1", "gpu=1 "))
	if strings.Contains(screen, "gpu=0 ") || strings.Contains(screen, "gpu=2 ") {
		t.Errorf("a line not of GPU 1's in its events:\n%s", screen)
	}
	run("send-keys", "-t", session, "Left")
	shows("GPU 0's events", has("events on GPU 0", "gpu=0 "))
	if strings.Contains(screen, "gpu=1 ") {
		t.Errorf("GPU 1's line in GPU 0's events:\n%s", screen)
	}
	run("send-keys", "-t", session, "f")
	shows("the events on all GPUs", has("events on all GPUs", "gpu=1 ", "gpu=2 "))
	all := eventLines(screen)
	// On 8 lines (the head and the footer, 6 lines of events) they scroll.
	run("resize-window", "-t", session, "-x", "120", "-y", "8")
	shows("the newest events", func(s string) bool { return slices.Equal(eventLines(s), all[:6]) })
	for _, step := range []struct {
		key   string
		first int
	}{{"Down", 1}, {"End", len(all) - 6}, {"Up", len(all) - 7}, {"PPage", max(len(all)-17, 0)}, {"Home", 0}, {"NPage", min(10, len(all)-6)}} {
		run("send-keys", "-t", session, step.key)
		shows("the events from line "+strconv.Itoa(step.first)+" after "+step.key, func(s string) bool {
			return slices.Equal(eventLines(s), all[step.first:step.first+6])
		})
	}
	run("send-keys", "-t", session, "q")
	shows("top to exit", has("top-exited-0"))
}

// procPIDs are the pids of the process rows on a Processes screen, in
// their order.
func procPIDs(screen string) []string {
	var pids []string
	rows := false
	for _, l := range strings.Split(screen, "\n") {
		f := strings.Fields(l)
		switch {
		case len(f) > 1 && f[0] == "GPU" && f[1] == "PID":
			rows = true
		case rows && len(f) > 1:
			if _, err := strconv.Atoi(f[0]); err != nil {
				return pids
			}
			pids = append(pids, f[1])
		default:
			rows = false
		}
	}
	return pids
}

// eventLines are the events.log lines on an Events screen.
func eventLines(screen string) []string {
	var out []string
	for _, l := range strings.Split(screen, "\n") {
		if strings.HasPrefix(l, "time=") {
			out = append(out, strings.TrimRight(l, " "))
		}
	}
	return out
}
