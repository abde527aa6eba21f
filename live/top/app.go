package top

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/gdamore/tcell/v2"

	"github.com/gpu-telemetry/gpu-telemetry/live"
	"github.com/gpu-telemetry/gpu-telemetry/sink"
)

// View is one screen of top (gputop's tabs): each is one file, registered
// in Views. Render lays out the model in exactly width x height (at most
// height lines, each exactly width runes; the frame pads the rest).
// OnKey takes the keys the frame does not (arrows, PgUp/PgDn, Home/End, s,
// f, Enter) and reports whether it used the key. Data is what `e` exports.
type View interface {
	Name() string
	Key() tcell.Key // the F-key that shows it
	Render(m *Model, width, height int) []Line
	OnKey(m *Model, ev *tcell.EventKey) bool
	Data(m *Model) any
}

// Views are the views in Tab order; the first is shown at start.
func Views() []View {
	return []View{&overview{}, &detail{}, &procs{}, &events{}, &help{}}
}

// App is the terminal's state: the model, the views and which is shown,
// and the footer's note (where the last export went). It is driven by
// Apply (a fetch's result) and Key; Screen draws it. Run and the tests
// drive the same App.
type App struct {
	M     Model
	Views []View
	Cur   int
	Note  string
	// ExportDir is where `e` writes; "" is the current directory, else
	// $TMPDIR when that cannot be written.
	ExportDir string
	Now       func() time.Time

	held *result // the newest result while paused
}

// NewApp is an App on the registered views.
func NewApp() *App { return &App{Views: Views(), Now: time.Now} }

// Apply takes a fetch's result at time at: document d is applied (held
// while paused); an error err is shown with the last document kept.
func (a *App) Apply(d live.Doc, err error, at time.Time) {
	if a.M.Paused {
		a.held = &result{d, err, at}
		return
	}
	if err != nil {
		a.M.Err, a.M.Fetched = err, at
		return
	}
	a.M.Apply(d, at)
}

// Key handles one key; quit is true for q, Q, Esc and Ctrl-C.
func (a *App) Key(ev *tcell.EventKey) (quit bool) {
	v := a.Views[a.Cur]
	switch ev.Key() {
	case tcell.KeyCtrlC, tcell.KeyEscape:
		return true
	case tcell.KeyTab:
		a.Cur = (a.Cur + 1) % len(a.Views)
		return false
	case tcell.KeyBacktab:
		a.Cur = (a.Cur + len(a.Views) - 1) % len(a.Views)
		return false
	case tcell.KeyLeft:
		a.M.Step(-1)
		return false
	case tcell.KeyRight:
		a.M.Step(1)
		return false
	case tcell.KeyEnter:
		if v.OnKey(&a.M, ev) {
			return false
		}
		a.show("GPU")
		return false
	case tcell.KeyRune:
		switch r := ev.Rune(); {
		case r == 'q' || r == 'Q':
			return true
		case r == '?':
			a.show("Help")
		case r == ' ':
			a.pause()
		case r == 'e':
			a.export()
		case r >= '0' && r <= '9':
			a.selectGPU(int(r - '0'))
		default:
			v.OnKey(&a.M, ev)
		}
		return false
	}
	for i, w := range a.Views {
		if w.Key() == ev.Key() {
			a.Cur = i
			return false
		}
	}
	v.OnKey(&a.M, ev)
	return false
}

func (a *App) show(name string) {
	for i, v := range a.Views {
		if v.Name() == name {
			a.Cur = i
		}
	}
}

// selectGPU selects the GPU numbered index and shows its detail; a number
// no GPU has does nothing.
func (a *App) selectGPU(index int) {
	if a.M.Doc == nil {
		return
	}
	for _, g := range a.M.Doc.GPUs {
		if g.Index == index {
			a.M.Sel = index
			a.show("GPU")
		}
	}
}

func (a *App) pause() {
	a.M.Paused = !a.M.Paused
	if !a.M.Paused && a.held != nil {
		r := *a.held
		a.held = nil
		a.Apply(r.doc, r.err, r.at)
	}
}

// export writes the current view's data as JSON to a new file
// gpu-telemetry-top-<view>-<time>.json (never over an existing file or
// through a link: sink.Atomic.CreateNew), and names it on the footer.
func (a *App) export() {
	v := a.Views[a.Cur]
	now := a.Now()
	doc := map[string]any{"view": v.Name(), "time": now, "data": v.Data(&a.M)}
	if a.M.Doc != nil {
		doc["host"] = a.M.Doc.Host.Name
		doc["doc_time"] = a.M.Doc.Time
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		a.Note = "export failed: " + err.Error()
		return
	}
	base := "gpu-telemetry-top-" + strings.ToLower(v.Name()) + "-" + now.Format("20060102-150405")
	dirs := []string{a.ExportDir}
	if a.ExportDir == "" {
		dirs = []string{".", os.TempDir()}
	}
	for _, dir := range dirs {
		if abs, aerr := filepath.Abs(dir); aerr == nil {
			dir = abs // the footer names the file wherever top was started
		}
		var path string
		path, err = sink.Atomic{Perm: 0o600}.CreateNew(dir, base, ".json", append(b, '\n'))
		if path != "" {
			a.Note = "exported " + path
			return
		}
	}
	a.Note = "export failed: " + err.Error()
}

// Screen is the whole screen at width x height: the view, then the
// reason the daemon is not answering when it is not, then the footer.
func (a *App) Screen(width, height int) []Line {
	if width < 1 || height < 1 {
		return nil
	}
	var tail []Line
	if a.M.Err != nil {
		for _, l := range wrap("daemon not answering: "+a.M.Err.Error(), width, max(height/3, 1)) {
			tail = append(tail, Line{pad(l, width), SevCrit})
		}
	}
	tail = append(tail, Line{a.footer(width), SevBar})
	if len(tail) > height {
		tail = tail[len(tail)-height:]
	}
	room := height - len(tail)
	body := a.Views[a.Cur].Render(&a.M, width, room)
	if len(body) > room {
		body = body[:room]
	}
	for len(body) < room {
		body = append(body, Line{Text: strings.Repeat(" ", width)})
	}
	return append(body, tail...)
}

// footer names the views (the shown one in brackets) and the main keys,
// and says PAUSED, the last export and when the document is from; what
// does not fit drops, PAUSED and the export note last.
func (a *App) footer(width int) string {
	var segs []segment
	if a.M.Paused {
		segs = append(segs, segment{"PAUSED ", 0})
	}
	if a.Note != "" {
		segs = append(segs, segment{a.Note + " ", 0})
	}
	for i, v := range a.Views {
		t := tcell.KeyNames[v.Key()] + " " + v.Name()
		drop := 3 + i%2
		if i == a.Cur {
			t, drop = "["+t+"]", 1 // the view shown is named as long as q quit is
		}
		segs = append(segs, segment{t + " ", drop})
	}
	gpu := "-"
	if g := a.M.GPU(); g != nil {
		gpu = strconv.Itoa(g.Index)
	}
	segs = append(segs, segment{"←→ GPU " + gpu + " ", 2}, segment{"Tab ", 5}, segment{"s sort ", 6},
		segment{"Space pause ", 6}, segment{"e export ", 6}, segment{"? help ", 7}, segment{"q quit", 1})
	if a.M.Doc != nil {
		segs = append(segs, segment{"  " + a.M.Doc.Time.In(a.M.Fetched.Location()).Format("15:04:05"), 8})
	}
	return pad(fit(width, segs...), width)
}
