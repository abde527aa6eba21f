package top

import (
	"bytes"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/gpu-telemetry/gpu-telemetry/internal/testutil"
	"github.com/gpu-telemetry/gpu-telemetry/live"
	"github.com/gpu-telemetry/gpu-telemetry/live/livetest"
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
	tests := []struct {
		name string
		doc  *live.Doc
		err  error
		w, h int
	}{
		{"80x24", &d, nil, 80, 24},
		{"200x50", &d, nil, 200, 50},
		{"8gpus-80x24", &many, nil, 80, 24},
		{"8gpus-200x50", &many, nil, 200, 50},
		{"no-daemon-80x24", nil, errors.New("dial unix /run/gpu-telemetry/control.sock: connect: no such file or directory"), 80, 24},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			lines := Render(tc.doc, tc.err, d.Time, tc.w, tc.h)
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
	out := strings.Join(Render(&d, nil, d.Time, 200, 50), "\n")
	testutil.Contains(t, "top", out, "rows 149000 dropped n/a", "overruns n/a")
}

// TestEverySizeFits: from 80x24 up (and below), nothing is wider or longer
// than the terminal; the hung GPU shows as hung, never with numbers.
func TestEverySizeFits(t *testing.T) {
	d := live.NewDoc(livetest.View())
	for w := 20; w <= 220; w += 7 {
		for h := 3; h <= 60; h += 5 {
			lines := Render(&d, nil, d.Time, w, h)
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
				if !strings.Contains(all, "GPU 0 ok") {
					t.Errorf("%dx%d: GPU 0 missing", w, h)
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
	_ = strconv.Itoa
	_ = time.Second
}
