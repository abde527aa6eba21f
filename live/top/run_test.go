package top

import (
	"math"
	"strings"
	"testing"

	"github.com/gdamore/tcell/v2"
)

func TestOnKey(t *testing.T) {
	sc := Screen{Scroll: 7, Page: 3}
	for _, tc := range []struct {
		name   string
		key    tcell.Key
		r      rune
		scroll int
		quit   bool
	}{
		{"up", tcell.KeyUp, 0, 6, false},
		{"down", tcell.KeyDown, 0, 8, false},
		{"page up", tcell.KeyPgUp, 0, 4, false},
		{"page down", tcell.KeyPgDn, 0, 10, false},
		{"home", tcell.KeyHome, 0, 0, false},
		{"end", tcell.KeyEnd, 0, math.MaxInt, false},
		{"q", tcell.KeyRune, 'q', 7, true},
		{"Q", tcell.KeyRune, 'Q', 7, true},
		{"escape", tcell.KeyEscape, 0, 7, true},
		{"ctrl-c", tcell.KeyCtrlC, 0, 7, true},
		{"another letter", tcell.KeyRune, 'x', 7, false},
		{"another key", tcell.KeyTab, 0, 7, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			scroll, quit := onKey(tcell.NewEventKey(tc.key, tc.r, tcell.ModNone), sc)
			if scroll != tc.scroll || quit != tc.quit {
				t.Errorf("onKey = %d, %v; want %d, %v", scroll, quit, tc.scroll, tc.quit)
			}
		})
	}
	// Never above the top, and a page of none still moves.
	for _, k := range []tcell.Key{tcell.KeyUp, tcell.KeyPgUp} {
		if s, _ := onKey(tcell.NewEventKey(k, 0, tcell.ModNone), Screen{Scroll: 1, Page: 5}); s != 0 {
			t.Errorf("%v from 1: %d, want 0", k, s)
		}
	}
	if s, _ := onKey(tcell.NewEventKey(tcell.KeyPgDn, 0, tcell.ModNone), Screen{}); s != 1 {
		t.Errorf("PgDn with no page: %d, want 1", s)
	}
}

// TestScrollKeys plays keys on 16 GPUs at 40x10 as the loop does (each key
// through onKey, then the screen drawn again at the position it gives):
// the GPUs in trouble stay at the top, the other GPUs move under them, and
// the lines around them count those above and below.
func TestScrollKeys(t *testing.T) {
	d := fleet(16)
	sc := Render(&d, nil, d.Time, 40, 10, 0)
	pinned := sc.Lines[:6]
	for _, step := range []struct {
		key  tcell.Key
		want []string // the lines under the pinned GPUs, as far as the footer
	}{
		{tcell.KeyDown, []string{"-- 1 more GPU above", "GPU 2 ok", "-- 8 more GPUs below"}},
		{tcell.KeyDown, []string{"-- 2 more GPUs above", "GPU 3 ok", "-- 7 more GPUs below"}},
		{tcell.KeyUp, []string{"-- 1 more GPU above", "GPU 2 ok", "-- 8 more GPUs below"}},
		{tcell.KeyUp, []string{"GPU 0 ok", "GPU 2 ok", "-- 8 more GPUs below"}},
		{tcell.KeyUp, []string{"GPU 0 ok", "GPU 2 ok", "-- 8 more GPUs below"}},
		{tcell.KeyPgDn, []string{"-- 2 more GPUs above", "GPU 3 ok", "-- 7 more GPUs below"}},
		{tcell.KeyEnd, []string{"-- 8 more GPUs above", "GPU 13 ok", "GPU 14 ok"}},
		{tcell.KeyDown, []string{"-- 8 more GPUs above", "GPU 13 ok", "GPU 14 ok"}},
		{tcell.KeyPgUp, []string{"-- 6 more GPUs above", "GPU 10 ok", "-- 3 more GPUs below"}},
		{tcell.KeyHome, []string{"GPU 0 ok", "GPU 2 ok", "-- 8 more GPUs below"}},
	} {
		scroll, _ := onKey(tcell.NewEventKey(step.key, 0, tcell.ModNone), sc)
		sc = Render(&d, nil, d.Time, 40, 10, scroll)
		fits(t, sc.Lines, 40, 10)
		screen := strings.Join(sc.Lines, "\n")
		if strings.Join(sc.Lines[:6], "\n") != strings.Join(pinned, "\n") {
			t.Fatalf("after %v the GPUs in trouble moved:\n%s", tcell.KeyNames[step.key], screen)
		}
		for i, w := range step.want {
			if !strings.HasPrefix(sc.Lines[6+i], w) {
				t.Fatalf("after %v line %d is %q, want %q...:\n%s", tcell.KeyNames[step.key], 6+i, sc.Lines[6+i], w, screen)
			}
		}
	}
}
