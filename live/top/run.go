package top

import (
	"context"
	"math"
	"os"
	"time"

	"github.com/gdamore/tcell/v2"

	"github.com/gpu-telemetry/gpu-telemetry/live"
)

// Refresh is how often the view asks the daemon.
const Refresh = time.Second

// Fetch returns the source's current status document: the local daemon's
// control socket, or a remote host's stream (top --host). Any source that
// gives one document a call plugs in here; the views cannot tell them
// apart. It is called about once a Refresh, on its own goroutine.
type Fetch func() (live.Doc, error)

// Run shows the views on the terminal until q, Q, Esc or Ctrl-C (or ctx
// ends), then restores the terminal (App.Key says what each key does).
// Fetching runs on its own goroutine, so a slow answer never stalls the
// keyboard.
func Run(ctx context.Context, fetch Fetch) error { return RunApp(ctx, fetch, NewApp()) }

// RunApp is Run showing app: NewApp's, or one with views added (a fleet
// page appends its View to app.Views).
func RunApp(ctx context.Context, fetch Fetch, app *App) error {
	return withScreen(func(scr tcell.Screen) error { return loop(ctx, scr, fetch, app) })
}

// withScreen takes the terminal, runs show on it and restores the terminal
// when show returns (or panics).
func withScreen(show func(tcell.Screen) error) error {
	scr, err := tcell.NewScreen()
	if err != nil {
		return err
	}
	if err := scr.Init(); err != nil {
		return err
	}
	defer scr.Fini()
	return show(scr)
}

// result is one fetch: a document, or why there is none.
type result struct {
	doc live.Doc
	err error
	at  time.Time
}

// loop runs app on scr until a key quits or ctx ends.
func loop(ctx context.Context, scr tcell.Screen, fetch Fetch, app *App) error {
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

	styles := stylesFor(scr)
	draw := func() {
		w, h := scr.Size()
		scr.Clear()
		for y, l := range app.Screen(w, h) {
			for x, r := range []rune(l.Text) {
				scr.SetContent(x, y, r, nil, styles[l.Sev])
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
			app.Apply(r.doc, r.err, r.at)
			draw()
		case ev, ok := <-events:
			if !ok {
				return nil
			}
			switch e := ev.(type) {
			case *tcell.EventKey:
				if app.Key(e) {
					return nil
				}
				draw()
			case *tcell.EventResize:
				scr.Sync()
				draw()
			}
		}
	}
}

// stylesFor are the styles of each Sev on scr: colours by severity, or on
// a monochrome terminal (fewer than 8 colours) and under NO_COLOR (any
// value, https://no-color.org) only bold, dim and reverse.
func stylesFor(scr tcell.Screen) map[Sev]tcell.Style {
	d := tcell.StyleDefault
	mono := map[Sev]tcell.Style{SevNormal: d, SevDim: d.Dim(true), SevHead: d.Bold(true), SevWarn: d.Bold(true),
		SevCrit: d.Bold(true).Underline(true), SevSel: d.Reverse(true), SevBar: d.Reverse(true)}
	if _, no := os.LookupEnv("NO_COLOR"); no || scr.Colors() < 8 {
		return mono
	}
	mono[SevDim] = d.Foreground(tcell.ColorGray)
	mono[SevHead] = d.Bold(true).Foreground(tcell.ColorTeal)
	mono[SevWarn] = d.Foreground(tcell.ColorYellow)
	mono[SevCrit] = d.Bold(true).Foreground(tcell.ColorRed)
	mono[SevBar] = d.Background(tcell.ColorNavy).Foreground(tcell.ColorWhite)
	return mono
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
