package top

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/gpu-telemetry/gpu-telemetry/internal/testutil"
	"github.com/gpu-telemetry/gpu-telemetry/live"
	"github.com/gpu-telemetry/gpu-telemetry/live/livetest"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

func screen(lines []string) []byte {
	var b bytes.Buffer
	for _, l := range lines {
		b.WriteString(l + "|\n") // | marks the right edge
	}
	return b.Bytes()
}

func TestGoldenScreens(t *testing.T) {
	d := live.NewDoc(livetest.View())
	many := d
	many.GPUs = nil
	for i := range 8 {
		g := d.GPUs[i%2]
		g.Index = i
		many.GPUs = append(many.GPUs, g)
	}
	eight, sixteen := fleet(8), fleet(16)
	tests := []struct {
		name   string
		doc    *live.Doc
		err    error
		w, h   int
		scroll int
	}{
		{"80x24", &d, nil, 80, 24, 0},
		{"200x50", &d, nil, 200, 50, 0},
		{"8gpus-80x24", &many, nil, 80, 24, 0},
		{"8gpus-200x50", &many, nil, 200, 50, 0},
		{"no-daemon-80x24", nil, errors.New("dial unix /run/gpu-telemetry/control.sock: connect: no such file or directory"), 80, 24, 0},
		// Issue 35: GPU 7 lost, GPU 1 hung, GPU 4 after Xids 62, 45 and 119.
		{"fleet8-100x30", &eight, nil, 100, 30, 0},
		{"fleet8-80x24", &eight, nil, 80, 24, 0},
		{"fleet16-40x10", &sixteen, nil, 40, 10, 0},
		{"fleet16-40x10-scrolled", &sixteen, nil, 40, 10, 3},
		{"fleet16-40x10-end", &sixteen, nil, 40, 10, 1000},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			lines := Render(tc.doc, tc.err, d.Time, tc.w, tc.h, tc.scroll).Lines
			if len(lines) != tc.h {
				t.Fatalf("%d lines, want %d", len(lines), tc.h)
			}
			for i, l := range lines {
				if n := utf8.RuneCountInString(l); n != tc.w {
					t.Errorf("line %d is %d wide, want %d: %q", i, n, tc.w, l)
				}
			}
			testutil.Golden(t, tc.name+".txt", screen(lines))
		})
	}
}

// TestAbsentCounterIsNA: a counter the daemon's document lacks (an older
// daemon) shows n/a on top's host lines, never 0.
func TestAbsentCounterIsNA(t *testing.T) {
	d := live.NewDoc(livetest.View())
	var kept []live.Counter
	for _, c := range d.Host.Counters {
		if c.Name != live.CounterRowsDropped && c.Name != live.CounterTickOverruns {
			kept = append(kept, c)
		}
	}
	d.Host.Counters = kept
	out := strings.Join(Render(&d, nil, d.Time, 200, 50, 0).Lines, "\n")
	testutil.Contains(t, "top", out, "rows 149000 dropped n/a", "overruns n/a")
}

// TestEverySizeFits: from 80x24 up (and below), nothing is wider or longer
// than the terminal; the hung GPU shows as hung, never with numbers, and
// GPU 0, answering with a critical health verdict, as critical.
func TestEverySizeFits(t *testing.T) {
	d := live.NewDoc(livetest.View())
	for w := 20; w <= 220; w += 7 {
		for h := 3; h <= 60; h += 5 {
			lines := Render(&d, nil, d.Time, w, h, 0).Lines
			if len(lines) != h {
				t.Fatalf("%dx%d: %d lines", w, h, len(lines))
			}
			for _, l := range lines {
				if utf8.RuneCountInString(l) != w {
					t.Fatalf("%dx%d: line %q", w, h, l)
				}
			}
			if w >= MinWidth && h >= MinHeight {
				all := strings.Join(lines, "\n")
				if !strings.Contains(all, "GPU 1 HUNG") || strings.Contains(all, "65C") {
					t.Errorf("%dx%d: hung GPU not shown as hung (or with a stale temperature):\n%s", w, h, all)
				}
				if !strings.Contains(all, "GPU 0 CRITICAL") {
					t.Errorf("%dx%d: GPU 0 missing, or not critical", w, h)
				}
			}
		}
	}
}

// TestEverySizeFitsWithTrouble: 16 GPUs, 6 of them in trouble, at every
// size from 1x1 to 220x60 and scrolled anywhere: nothing is wider or longer
// than the terminal, and from 30x10 up (room for the 6 and a scrolled
// window) each of the 6 is on the screen with its state and last Xid.
func TestEverySizeFitsWithTrouble(t *testing.T) {
	d := fleet(16)
	for w := 1; w <= 220; w += 7 {
		for h := 1; h <= 60; h++ {
			for _, scroll := range []int{0, 5, math.MaxInt} {
				lines := Render(&d, nil, d.Time, w, h, scroll).Lines
				if len(lines) != h {
					t.Fatalf("%dx%d: %d lines", w, h, len(lines))
				}
				for _, l := range lines {
					if utf8.RuneCountInString(l) != w {
						t.Fatalf("%dx%d scrolled to %d: line %q", w, h, scroll, l)
					}
				}
				if w < 30 || h < 10 {
					continue
				}
				for _, g := range d.GPUs {
					if rankOf(g, d.Time) == rankOther {
						continue
					}
					gl := strings.Join(onScreen(lines, g.Index), "\n")
					if !strings.Contains(gl, "Xid "+strconv.FormatUint(g.LastXid.Code, 10)) {
						t.Fatalf("%dx%d scrolled to %d: GPU %d or its Xid missing:\n%s", w, h, scroll, g.Index, strings.Join(lines, "\n"))
					}
				}
			}
		}
	}
}

func TestBar(t *testing.T) {
	for _, tc := range []struct {
		v, l float64
		w    int
		want string
	}{{50, 100, 12, "[#####-----]"}, {0, 0, 6, "[----]"}, {200, 100, 6, "[####]"}, {1, 100, 2, ""}} {
		if got := bar(tc.v, tc.l, tc.w); got != tc.want {
			t.Errorf("bar(%v,%v,%d) = %q, want %q", tc.v, tc.l, tc.w, got, tc.want)
		}
	}
}

// fleet is a document of n GPUs, most answering and healthy, some in
// trouble, each lost or hung one after an Xid 79: of one GPU, GPU 0 is lost;
// of two, GPU 0 is answering after Xids 62, 45 and 119 (the GSP crash story
// before the GPU falls off the bus) and GPU 1 hung (livetest's GPU 1); of 8,
// GPU 1 hung, GPU 4 after those Xids and GPU 7 lost; of 16, GPU 9 failing,
// GPU 12 hung and GPU 15 lost too. The GPUs carry the GPU view's readings
// of a recent driver (JPEG/OFA, BAR1, maximum clocks, temperature
// thresholds, fan policies, GSP), but GPU 1 (livetest's, hung) and, of 8
// or more, GPU 2 (answering): those have a driver without them (n/a).
func fleet(n int) live.Doc {
	v := livetest.View()
	now := v.Host.Now
	healthy, hung := v.GPUs[0], v.GPUs[1]
	healthy.HealthLevel, healthy.HealthReasons = "ok", nil
	healthy.FlagCount, healthy.FlagLast = [reading.NumFlagKinds]uint64{}, [reading.NumFlagKinds]time.Time{}
	oldDriver := healthy
	recentDriver(&healthy)
	v.GPUs = make([]live.GPU, n)
	for i := range v.GPUs {
		g := healthy
		switch {
		case n >= 8 && i == 2:
			g = oldDriver
		case n == 1 && i == 0, n >= 8 && i == 7, n == 16 && i == 15:
			g.Xid(79, now.Add(-4*time.Second), "GPU has fallen off the bus")
			g.Observe(&reading.Sample{GPU: i, Time: now.Add(-3 * time.Second), Status: reading.StatusLost}, v.Host.Interval)
		case i == 1, n == 16 && i == 12:
			g = hung
		case n == 2 && i == 0, n >= 8 && i == 4:
			g.Xid(62, now.Add(-30*time.Second), "Internal micro-controller halt")
			g.Xid(45, now.Add(-29*time.Second), "Preemptive cleanup, due to previous errors")
			g.Xid(119, now.Add(-20*time.Second), "GSP RPC Timeout")
			s := g.Sample
			s.Time, s.Values[reading.GPUUtil], s.Flags = now.Add(-100*time.Millisecond), reading.Some[uint64](90), reading.Flags{}
			s.Flags.Add(reading.Flag{Kind: reading.FlagXid, A: 119})
			g.Observe(&s, v.Host.Interval)
		case n == 16 && i == 9:
			g.Xid(62, now.Add(-8*time.Second), "Internal micro-controller halt")
			g.Observe(&reading.Sample{GPU: i, Time: now.Add(-5 * time.Second), Status: reading.StatusFailed, Err: "Unknown Error"}, v.Host.Interval)
		}
		g.Info.Index = i
		g.Info.BusID = fmt.Sprintf("00000000:%02X:00.0", 0x10+i)
		g.Info.UUID = fmt.Sprintf("GPU-%04d", i)
		v.GPUs[i] = g
	}
	return live.NewDoc(v)
}

// recentDriver gives g what a recent driver reads beyond livetest's GPU 0.
func recentDriver(g *live.GPU) {
	g.Info.GSPVersion, g.Info.GSPMode = "580.95.05", "enabled (default)"
	s := &g.Sample
	for id, v := range map[reading.ID]uint64{
		reading.JpgUtil: 12, reading.OfaUtil: 3, reading.BAR1UsedBytes: 2 << 30, reading.BAR1TotalBytes: 128 << 30,
		reading.VRAMReservedBytes: 512 << 20, reading.MaxGraphicsMHz: 1980, reading.MaxSMMHz: 1980, reading.MaxMemMHz: 2619,
		reading.ShutdownTempC: 92, reading.SlowdownTempC: 89, reading.PCIeMaxGen: 5, reading.PCIeMaxWidth: 16, reading.PCIeGPUMaxGen: 5,
	} {
		s.Values[id] = reading.Some(v)
	}
	s.Fans[0].Policy = reading.Some[uint32](reading.FanPolicyAuto)
	s.Fans[1].Policy = reading.Some[uint32](reading.FanPolicyManual)
}

// onScreen returns the lines of GPU index's line or block on a screen (its
// line, and the indented lines under it), nil when it is not there.
func onScreen(lines []string, index int) []string {
	head := "GPU " + strconv.Itoa(index) + " "
	for i, l := range lines {
		if strings.HasPrefix(l, head) {
			j := i + 1
			for j < len(lines) && strings.HasPrefix(lines[j], "  ") {
				j++
			}
			return lines[i:j]
		}
	}
	return nil
}

// TestTroubleAlwaysOnScreen (issue 35): at every size from 40x10 to 220x60
// and with 1 to 16 GPUs, every GPU that is lost, hung or failing is on the
// first screen with its state and its last Xid, and the GPU answering after
// Xids 62, 45 and 119 is too, as CRITICAL (never ok); the others are all
// reachable by scrolling, a line saying how many are below when some are.
func TestTroubleAlwaysOnScreen(t *testing.T) {
	for _, size := range [][2]int{{40, 10}, {80, 24}, {100, 30}, {120, 40}, {220, 60}} {
		w, h := size[0], size[1]
		for _, n := range []int{1, 2, 8, 16} {
			t.Run(strconv.Itoa(w)+"x"+strconv.Itoa(h)+"-"+strconv.Itoa(n)+"gpus", func(t *testing.T) {
				d := fleet(n)
				sc := Render(&d, nil, d.Time, w, h, 0)
				fits(t, sc.Lines, w, h)
				all := strings.Join(sc.Lines, "\n")
				for _, g := range d.GPUs {
					want := strings.ToUpper(g.State)
					if g.State == "ok" {
						if g.LastXid == nil {
							continue
						}
						want = "CRITICAL"
					}
					gl := strings.Join(onScreen(sc.Lines, g.Index), "\n")
					if !strings.HasPrefix(gl, "GPU "+strconv.Itoa(g.Index)+" "+want) || !strings.Contains(gl, "Xid "+strconv.FormatUint(g.LastXid.Code, 10)) {
						t.Errorf("GPU %d (%s, Xid %d) not on screen with its state and Xid:\n%s", g.Index, want, g.LastXid.Code, all)
					}
				}
				seen := map[int]bool{}
				for range n {
					for _, g := range d.GPUs {
						if onScreen(sc.Lines, g.Index) != nil {
							seen[g.Index] = true
						}
					}
					if len(seen) == n {
						break
					}
					if !strings.Contains(strings.Join(sc.Lines, "\n"), "GPUs below") && !strings.Contains(strings.Join(sc.Lines, "\n"), "GPU below") {
						t.Fatalf("GPUs %v of %d seen, and no line says more are below:\n%s", seen, n, strings.Join(sc.Lines, "\n"))
					}
					sc = Render(&d, nil, d.Time, w, h, sc.Scroll+sc.Page)
					fits(t, sc.Lines, w, h)
				}
				if len(seen) != n {
					t.Errorf("scrolling page by page shows %d of %d GPUs", len(seen), n)
				}
			})
		}
	}
}

// fits fails the test unless lines are exactly h lines of exactly w.
func fits(t *testing.T, lines []string, w, h int) {
	t.Helper()
	if len(lines) != h {
		t.Fatalf("%d lines, want %d", len(lines), h)
	}
	for i, l := range lines {
		if n := utf8.RuneCountInString(l); n != w {
			t.Fatalf("line %d is %d wide, want %d: %q", i, n, w, l)
		}
	}
}
