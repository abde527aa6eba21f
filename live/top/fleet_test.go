package top

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/gdamore/tcell/v2"

	"github.com/gpu-telemetry/gpu-telemetry/action"
	"github.com/gpu-telemetry/gpu-telemetry/internal/testutil"
	"github.com/gpu-telemetry/gpu-telemetry/live"
	"github.com/gpu-telemetry/gpu-telemetry/live/livetest"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// hostDoc is the document of a host named name with n GPUs, each GPU 0 of
// livetest.View made healthy (41+i C, 300+10i W), and trouble:
//
//	"hung":   GPU 1 is livetest's hung GPU 1
//	"xid":    GPU 2 had an Xid 79 30 s ago (critical)
//	"reboot": GPU 3's action is reboot (critical: it drains)
//	"disk":   the disk is paused (a warning)
//	"":       none, and no incident
func hostDoc(name string, n int, trouble string) live.Doc {
	v := livetest.View()
	now := v.Host.Now
	v.Host.Identity.Host = name
	healthy, hung := v.GPUs[0], v.GPUs[1]
	healthy.HealthLevel, healthy.HealthReasons = "ok", nil
	healthy.FlagCount, healthy.FlagLast = [reading.NumFlagKinds]uint64{}, [reading.NumFlagKinds]time.Time{}
	v.GPUs = make([]live.GPU, n)
	for i := range v.GPUs {
		g := healthy
		s := g.Sample
		s.Values[reading.TempC] = reading.Some(uint64(41 + i))
		s.Values[reading.PowerMW] = reading.Some(uint64(300_000 + 10_000*i))
		s.Flags = reading.Flags{}
		g.Observe(&s, v.Host.Interval)
		switch {
		case trouble == "hung" && i == 1:
			g = hung
		case trouble == "xid" && i == 2:
			g.Xid(79, now.Add(-30*time.Second), "GPU has fallen off the bus")
		case trouble == "reboot" && i == 3:
			g.Action = action.Current{Action: action.Reboot, Reasons: []string{"row_remap_failure"}}
		}
		g.Info.Index = i
		v.GPUs[i] = g
	}
	switch trouble {
	case "disk":
		v.Host.DiskPaused = true
		fallthrough
	case "", "reboot":
		v.Host.LastIncident = live.Incident{}
	case "xid":
		v.Host.LastIncident = live.Incident{Time: now.Add(-30 * time.Second), GPU: 2, Reason: "XID_79"}
	}
	return live.NewDoc(v)
}

// fleetHosts are n hosts as the page knows them at now: a mix of every
// state, in an order that is not the page's.
func fleetHosts(n int) (hosts []HostState, now time.Time) {
	now = livetest.View().Host.Now.Add(time.Second)
	kinds := []string{"", "hung", "down", "", "xid", "disk", "", "stale", "reboot", "", "waiting", ""}
	if n == 1 {
		kinds = []string{"hung"}
	}
	if n == 3 {
		kinds = []string{"", "hung", "down"}
	}
	for i := range n {
		name := "gpu-node-" + strconv.Itoa(10+i)
		h := HostState{Name: name, At: now.Add(-time.Duration(i%3) * time.Second)}
		switch k := kinds[i%len(kinds)]; k {
		case "down":
			d := hostDoc(name, 8, "")
			h.Doc, h.Err = &d, errors.New(name+": ssh: connect to host "+name+" port 22: Connection refused (ssh exit status 255); again in 4s")
			h.At = now.Add(-40 * time.Second)
		case "stale":
			d := hostDoc(name, 8, "")
			h.Doc, h.At = &d, now.Add(-95*time.Second)
		case "waiting":
			h.At = time.Time{}
		default:
			d := hostDoc(name, 8, k)
			h.Doc = &d
		}
		hosts = append(hosts, h)
	}
	return hosts, now
}

func TestFleetGoldenScreens(t *testing.T) {
	for _, n := range []int{1, 3, 12} {
		for _, size := range [][2]int{{80, 24}, {220, 60}} {
			name := "hosts" + strconv.Itoa(n) + "-" + strconv.Itoa(size[0]) + "x" + strconv.Itoa(size[1])
			t.Run(name, func(t *testing.T) {
				hosts, now := fleetHosts(n)
				fs := RenderFleet(hosts, now, size[0], size[1], "")
				fitsFleet(t, fs.Lines, size[0], size[1])
				testutil.Golden(t, name+".txt", []byte(strings.Join(fs.Lines, "|\n")+"|\n")) // | marks the right edge
			})
		}
	}
}

// TestFleetWorstFirst: the hosts in trouble come first, the worst first
// (no link, a GPU hung, critical, warning), each kind in the order given.
func TestFleetWorstFirst(t *testing.T) {
	hosts, now := fleetHosts(12)
	fs := RenderFleet(hosts, now, 220, 60, "")
	want := []string{"gpu-node-12", "gpu-node-17", "gpu-node-20", "gpu-node-11", "gpu-node-14", "gpu-node-18", "gpu-node-15",
		"gpu-node-10", "gpu-node-13", "gpu-node-16", "gpu-node-19", "gpu-node-21"}
	if strings.Join(fs.Order, " ") != strings.Join(want, " ") {
		t.Errorf("order %v\nwant  %v", fs.Order, want)
	}
	for i, w := range []string{"NO LINK", "STALE", "WAITING", "FAILING", "CRITICAL", "CRITICAL", "WARNING", "ok"} {
		if l := fs.Lines[2+i]; !strings.Contains(l, w) {
			t.Errorf("line %d %q: want %s", 2+i, l, w)
		}
	}
	testutil.Contains(t, "the hung host's line", fs.Lines[5], "7/8", "GPU 1 hung 12.0s in nvmlDeviceGetTemperature", "48C")
	testutil.Contains(t, "the Xid's host's line", fs.Lines[6], "7/8", "GPU 2 Xid 79 in the last 10 minutes", "15:03:35 GPU 2 XID_79")
	testutil.Contains(t, "the rebooting host's line", fs.Lines[7], "8/8", "GPU 3 action reboot")
	testutil.Contains(t, "the unreachable host's line", fs.Lines[2], "Connection refused", " 40s ")
}

// TestFleetEverySizeFits: from 1x1 to 220x60, nothing is wider or longer
// than the terminal, and the selected host is on the page when a line is.
func TestFleetEverySizeFits(t *testing.T) {
	hosts, now := fleetHosts(12)
	for w := 1; w <= 220; w += 9 {
		for h := 1; h <= 60; h += 4 {
			fs := RenderFleet(hosts, now, w, h, "gpu-node-21")
			fitsFleet(t, fs.Lines, w, h)
			if h >= 4 && w >= 20 && !strings.Contains(strings.Join(fs.Lines, "\n"), "> gpu-node-2") {
				t.Fatalf("%dx%d: the selected host is not on the page:\n%s", w, h, strings.Join(fs.Lines, "\n"))
			}
		}
	}
}

func fitsFleet(t *testing.T, lines []string, w, h int) {
	t.Helper()
	if len(lines) != h {
		t.Fatalf("%dx%d: %d lines", w, h, len(lines))
	}
	for i, l := range lines {
		if utf8.RuneCountInString(l) != w {
			t.Fatalf("%dx%d: line %d is %d wide: %q", w, h, i, utf8.RuneCountInString(l), l)
		}
	}
}

func TestOnFleetKey(t *testing.T) {
	order := []string{"a", "b", "c"}
	for _, tc := range []struct {
		name       string
		key        tcell.Key
		r          rune
		sel        string
		next, open string
		quit       bool
	}{
		{"down", tcell.KeyDown, 0, "a", "b", "", false},
		{"j", tcell.KeyRune, 'j', "b", "c", "", false},
		{"down at the end", tcell.KeyDown, 0, "c", "c", "", false},
		{"up", tcell.KeyUp, 0, "c", "b", "", false},
		{"up at the top", tcell.KeyUp, 0, "a", "a", "", false},
		{"home", tcell.KeyHome, 0, "c", "a", "", false},
		{"end", tcell.KeyEnd, 0, "a", "c", "", false},
		{"enter", tcell.KeyEnter, 0, "b", "b", "b", false},
		{"enter with none selected", tcell.KeyEnter, 0, "", "a", "a", false},
		{"gone host", tcell.KeyDown, 0, "zz", "b", "", false},
		{"q", tcell.KeyRune, 'q', "b", "b", "", true},
		{"escape", tcell.KeyEscape, 0, "b", "b", "", true},
		{"ctrl-c", tcell.KeyCtrlC, 0, "b", "b", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			next, open, quit := onFleetKey(tcell.NewEventKey(tc.key, tc.r, tcell.ModNone), order, tc.sel)
			if next != tc.next || open != tc.open || quit != tc.quit {
				t.Errorf("onFleetKey = %q, %q, %v; want %q, %q, %v", next, open, quit, tc.next, tc.open, tc.quit)
			}
		})
	}
}
