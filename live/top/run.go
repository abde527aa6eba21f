package top

import (
	"context"
	"time"

	"github.com/gdamore/tcell/v2"

	"github.com/gpu-telemetry/gpu-telemetry/live"
)

// Refresh is how often the view asks the daemon.
const Refresh = time.Second

// Fetch returns the daemon's current status document.
type Fetch func() (live.Doc, error)

// Run shows the view on the terminal until q, Q, Esc or Ctrl-C (or ctx
// ends), then restores the terminal. Fetching runs on its own goroutine, so
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
	draw := func() {
		w, h := scr.Size()
		scr.Clear()
		for y, line := range Render(doc, last, at, w, h) {
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
				if e.Key() == tcell.KeyCtrlC || e.Key() == tcell.KeyEscape || e.Rune() == 'q' || e.Rune() == 'Q' {
					return nil
				}
			case *tcell.EventResize:
				scr.Sync()
				draw()
			}
		}
	}
}
