package top

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gdamore/tcell/v2"

	"github.com/gpu-telemetry/gpu-telemetry/live"
)

func runeKey(r rune) *tcell.EventKey { return tcell.NewEventKey(tcell.KeyRune, r, tcell.ModNone) }

// shownScreen is a simulated screen that keeps the text of what it last
// showed, read on the loop's goroutine: the simulation's own contents
// are not safe to read while the loop draws.
type shownScreen struct {
	tcell.SimulationScreen
	mu   sync.Mutex
	text string
}

func (s *shownScreen) Show() {
	s.SimulationScreen.Show()
	t := contents(s.SimulationScreen)
	s.mu.Lock()
	s.text = t
	s.mu.Unlock()
}

func (s *shownScreen) shown() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.text
}

// sim runs the loop on a simulated 120x40 terminal against a source that
// gives doc, and returns the screen, a way to wait for text on it, and the
// loop's result.
func sim(t *testing.T, doc live.Doc, app *App) (*shownScreen, func(string), <-chan error) {
	t.Helper()
	scr := &shownScreen{SimulationScreen: tcell.NewSimulationScreen("UTF-8")}
	if err := scr.Init(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(scr.Fini)
	scr.SetSize(120, 40)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	done := make(chan error, 1)
	go func() { done <- loop(ctx, scr, func() (live.Doc, error) { return doc, nil }, app) }()
	wait := func(want string) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			got := scr.shown()
			if strings.Contains(got, want) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%q never on the screen:\n%s", want, got)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	return scr, wait, done
}

func contents(scr tcell.SimulationScreen) string {
	cells, w, _ := scr.GetContents()
	var b strings.Builder
	for i, c := range cells {
		if len(c.Runes) > 0 {
			b.WriteRune(c.Runes[0])
		} else {
			b.WriteByte(' ')
		}
		if (i+1)%w == 0 {
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// TestKeysOnTheTerminal drives the loop as an operator would: switch
// views by F-key and Tab, select a GPU by number and by arrows, sort the
// processes, pause, export (valid JSON of the view, in a new file named
// on the footer), quit.
func TestKeysOnTheTerminal(t *testing.T) {
	d := richDoc(8)
	app := NewApp()
	app.ExportDir = t.TempDir()
	scr, wait, done := sim(t, d, app)
	wait("[F2 Overview]")
	wait("GPU 7 LOST")

	scr.InjectKey(tcell.KeyF4, 0, tcell.ModNone)
	wait("6 processes on all GPUs  sorted by memory")
	scr.InjectKey(tcell.KeyRune, 's', tcell.ModNone)
	wait("sorted by sm")
	scr.InjectKey(tcell.KeyRune, 's', tcell.ModNone)
	wait("sorted by pid")

	scr.InjectKey(tcell.KeyRune, '4', tcell.ModNone)
	wait("[F3 GPU]")
	wait("GPU 4  ok")
	scr.InjectKey(tcell.KeyRight, 0, tcell.ModNone)
	wait("GPU 5  ok")
	scr.InjectKey(tcell.KeyLeft, 0, tcell.ModNone)
	scr.InjectKey(tcell.KeyLeft, 0, tcell.ModNone)
	wait("GPU 3  ok")

	scr.InjectKey(tcell.KeyTab, 0, tcell.ModNone)
	wait("[F4 Processes]")
	scr.InjectKey(tcell.KeyBacktab, 0, tcell.ModNone)
	scr.InjectKey(tcell.KeyBacktab, 0, tcell.ModNone)
	wait("[F2 Overview]")
	scr.InjectKey(tcell.KeyF5, 0, tcell.ModNone)
	wait("31 events on all GPUs")
	scr.InjectKey(tcell.KeyRune, '?', tcell.ModNone)
	wait("What public NVML cannot give")

	scr.InjectKey(tcell.KeyRune, ' ', tcell.ModNone)
	wait("PAUSED")
	scr.InjectKey(tcell.KeyF4, 0, tcell.ModNone)
	scr.InjectKey(tcell.KeyRune, 'e', tcell.ModNone)
	wait("exported ")
	files, _ := filepath.Glob(filepath.Join(app.ExportDir, "gpu-telemetry-top-processes-*.json"))
	if len(files) != 1 {
		t.Fatalf("export files %v", files)
	}
	if !strings.Contains(scr.shown(), "exported "+files[0]) {
		t.Errorf("the footer does not name %s:\n%s", files[0], scr.shown())
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		View string    `json:"view"`
		Data []ProcRow `json:"data"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("export is not JSON: %v\n%s", err, b)
	}
	if got.View != "Processes" || len(got.Data) != 6 || got.Data[0].PID != 300 {
		t.Errorf("export: view %q, %d rows (first %+v)", got.View, len(got.Data), got.Data)
	}
	scr.InjectKey(tcell.KeyRune, ' ', tcell.ModNone)
	scr.InjectKey(tcell.KeyRune, 'q', tcell.ModNone)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("q did not quit")
	}
}

// TestQuitKeys: q, Q, Esc and Ctrl-C quit from any view.
func TestQuitKeys(t *testing.T) {
	for _, ev := range []*tcell.EventKey{runeKey('q'), runeKey('Q'),
		tcell.NewEventKey(tcell.KeyEscape, 0, tcell.ModNone), tcell.NewEventKey(tcell.KeyCtrlC, 0, tcell.ModNone)} {
		for i := range Views() {
			a := appFor(richDoc(2), "")
			a.Cur = i
			if !a.Key(ev) {
				t.Errorf("%s on %s did not quit", ev.Name(), a.Views[i].Name())
			}
		}
	}
}

// TestPauseHoldsDocuments: while paused a new document is held, not
// shown; resuming shows the newest.
func TestPauseHoldsDocuments(t *testing.T) {
	d := richDoc(2)
	a := appFor(d, "Overview")
	a.Key(runeKey(' '))
	later := d
	later.Time = d.Time.Add(time.Minute)
	a.Apply(later, nil, later.Time)
	if !a.M.Doc.Time.Equal(d.Time) {
		t.Fatalf("a document applied while paused")
	}
	if !strings.Contains(a.footer(200), "PAUSED") {
		t.Errorf("footer without PAUSED: %s", a.footer(200))
	}
	a.Key(runeKey(' '))
	if !a.M.Doc.Time.Equal(later.Time) {
		t.Errorf("the held document not applied on resume")
	}
}

// TestExportNeverFollowsALink: a link planted at the export's name is left
// alone; the export takes the next free name.
func TestExportNeverFollowsALink(t *testing.T) {
	d := richDoc(2)
	a := appFor(d, "Overview")
	a.ExportDir = t.TempDir()
	target := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(target, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	planted := filepath.Join(a.ExportDir, "gpu-telemetry-top-overview-"+d.Time.Format("20060102-150405")+".json")
	if err := os.Symlink(target, planted); err != nil {
		t.Fatal(err)
	}
	a.Key(runeKey('e'))
	if b, _ := os.ReadFile(target); string(b) != "keep" {
		t.Fatalf("the export wrote through the link: %q", b)
	}
	path := strings.TrimPrefix(a.Note, "exported ")
	b, err := os.ReadFile(path)
	if err != nil || path == planted || !json.Valid(b) {
		t.Fatalf("export %q: %v (valid JSON %v)", a.Note, err, json.Valid(b))
	}
}

// TestExportEveryView: e on every view writes valid JSON naming the view,
// with its data, to a new file each time.
func TestExportEveryView(t *testing.T) {
	dir := t.TempDir()
	for _, v := range Views() {
		a := appFor(richDoc(8), v.Name())
		a.ExportDir = dir
		a.Key(runeKey('e'))
		path, ok := strings.CutPrefix(a.Note, "exported ")
		if !ok {
			t.Fatalf("%s: %s", v.Name(), a.Note)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var got map[string]json.RawMessage
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("%s: not JSON: %v", v.Name(), err)
		}
		if string(got["view"]) != `"`+v.Name()+`"` || len(got["data"]) < 3 {
			t.Errorf("%s: view %s, data %.40s", v.Name(), got["view"], got["data"])
		}
	}
	if files, _ := os.ReadDir(dir); len(files) != len(Views()) {
		t.Errorf("%d files for %d exports", len(files), len(Views()))
	}
}

// TestEnterOnAProcess shows the detail of the highlighted process's GPU.
func TestEnterOnAProcess(t *testing.T) {
	a := appFor(richDoc(8), "Processes")
	a.Key(tcell.NewEventKey(tcell.KeyDown, 0, tcell.ModNone)) // the second row: GPU 0's pid 1000
	a.Key(tcell.NewEventKey(tcell.KeyEnter, 0, tcell.ModNone))
	if a.Views[a.Cur].Name() != "GPU" || a.M.Sel != 0 {
		t.Errorf("after Enter: view %s, GPU %d; want GPU, 0", a.Views[a.Cur].Name(), a.M.Sel)
	}
}

// monoScreen is a terminal of two colours.
type monoScreen struct{ tcell.SimulationScreen }

func (monoScreen) Colors() int { return 2 }

// TestStyles: severities are coloured on a colour terminal (the
// simulation's 256 colours); under NO_COLOR (any value) and on a
// monochrome terminal there is no colour, only bold, dim and reverse.
func TestStyles(t *testing.T) {
	scr := tcell.NewSimulationScreen("UTF-8")
	if err := scr.Init(); err != nil {
		t.Fatal(err)
	}
	defer scr.Fini()
	t.Setenv("NO_COLOR", "")
	os.Unsetenv("NO_COLOR")
	if fg, _, _ := stylesFor(scr)[SevCrit].Decompose(); fg != tcell.ColorRed {
		t.Errorf("critical drawn in %v on a colour terminal", fg)
	}
	plain := func(what string, styles map[Sev]tcell.Style) {
		for sev, st := range styles {
			if fg, bg, _ := st.Decompose(); fg != tcell.ColorDefault || bg != tcell.ColorDefault {
				t.Errorf("%s: severity %d in colour %v on %v", what, sev, fg, bg)
			}
		}
		if _, _, attr := styles[SevSel].Decompose(); attr&tcell.AttrReverse == 0 {
			t.Errorf("%s: the highlighted row is not reversed", what)
		}
	}
	plain("monochrome", stylesFor(monoScreen{scr}))
	t.Setenv("NO_COLOR", "")
	plain("NO_COLOR", stylesFor(scr))
}
