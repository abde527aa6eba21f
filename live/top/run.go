package top

import (
	"context"
	"math"
	"time"

	"github.com/gdamore/tcell/v2"

	"github.com/gpu-telemetry/gpu-telemetry/live"
)

// Refresh is how often the view asks the daemon.
const Refresh = time.Second

// Fetch returns the daemon's current status document.
type Fetch func() (live.Doc, error)

// Run shows the view on the terminal until q, Q, Esc or Ctrl-C (or ctx
// ends), then restores the terminal; the arrow keys, PgUp, PgDn, Home and
// End scroll the GPUs that do not fit (onKey). Fetching runs on its own goroutine, so
// a slow answer never stalls the keyboard.
func Run(ctx context.Context, fetch Fetch) error {
	scr, err := tcell.NewScreen()
	if err != nil {
		return err
	}
	if err := scr.Init(); err != nil {
		return err
	}
	defer scr.Fini()
	return loop(ctx, scr, fetch)
}

type result struct {
	doc live.Doc
	err error
	at  time.Time
}

func loop(ctx context.Context, scr tcell.Screen, fetch Fetch) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	results := make(chan result, 1)
	go func() {
		t := time.NewTicker(Refresh)
		defer t.Stop()
		for {
			d, err := fetch()
			select {
			case results <- result{d, err, time.Now()}:
			case <-ctx.Done():
				return
			}
			select {
			case <-t.C:
			case <-ctx.Done():
				return
			}
		}
	}()
	events := make(chan tcell.Event, 8)
	quit := make(chan struct{})
	go scr.ChannelEvents(events, quit)
	defer close(quit)

	var doc *live.Doc
	var last error
	var at time.Time
	var shown Screen // the last screen drawn: where the scrolling stands
	draw := func() {
		w, h := scr.Size()
		scr.Clear()
		shown = Render(doc, last, at, w, h, shown.Scroll)
		for y, line := range shown.Lines {
			for x, r := range []rune(line) {
				scr.SetContent(x, y, r, nil, tcell.StyleDefault)
			}
		}
		scr.Show()
	}
	draw()
	for {
		select {
		case <-ctx.Done():
			return nil
		case r := <-results:
			last, at = r.err, r.at
			if r.err == nil {
				d := r.doc
				doc = &d
			}
			draw()
		case ev, ok := <-events:
			if !ok {
				return nil
			}
			switch e := ev.(type) {
			case *tcell.EventKey:
				scroll, quit := onKey(e, shown)
				if quit {
					return nil
				}
				if scroll != shown.Scroll {
					shown.Scroll = scroll
					draw()
				}
			case *tcell.EventResize:
				scr.Sync()
				draw()
			}
		}
	}
}

// onKey is what a key does on screen sc: quit (q, Q, Esc, Ctrl-C), or
// scroll the GPUs that do not fit by one (Up, Down), by a page (PgUp, PgDn)
// or to either end (Home, End). The position it returns may be past the
// end; Render holds it to the last page.
func onKey(e *tcell.EventKey, sc Screen) (scroll int, quit bool) {
	page := max(sc.Page, 1)
	switch e.Key() {
	case tcell.KeyCtrlC, tcell.KeyEscape:
		return sc.Scroll, true
	case tcell.KeyRune:
		return sc.Scroll, e.Rune() == 'q' || e.Rune() == 'Q'
	case tcell.KeyUp:
		return max(sc.Scroll-1, 0), false
	case tcell.KeyDown:
		return sc.Scroll + 1, false
	case tcell.KeyPgUp:
		return max(sc.Scroll-page, 0), false
	case tcell.KeyPgDn:
		return sc.Scroll + page, false
	case tcell.KeyHome:
		return 0, false
	case tcell.KeyEnd:
		return math.MaxInt, false
	}
	return sc.Scroll, false
}
