package report

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/sink"
	"github.com/gpu-telemetry/gpu-telemetry/snapshot"
)

// Options say which incident to report and how much around it.
type Options struct {
	Dir      string    // the logger's --log-dir
	Incident string    // a crash snapshot file: the incident it records
	At       time.Time // or a moment; zero: the most recent incident
	GPU      int       // one GPU index only; -1 all
	// Board, when set, is one board only, named by its UUID (or a prefix
	// of it) or its PCI bus id (reading.Selector): its rows and events at
	// whatever index it had. GPU is then ignored.
	Board  string
	Before time.Duration  // window before the incident
	After  time.Duration  // and after it
	Loc    *time.Location // for file names and printed times; nil means time.Local
	// Progress, when set, is called now and then while files are read, with
	// the file and how much of it is done (0..1).
	Progress func(file string, done float64)

	uuid string // the board Board names (pickBoard)
	open opener // how files are opened: nil is os.Open; tests fail some as a user without permission would
}

// wants reports whether event e is of the GPU or board the report is
// limited to (all when neither is set).
func (o Options) wants(e EventLine) bool {
	switch {
	case o.uuid != "":
		return strings.EqualFold(e.KV["uuid"], o.uuid)
	case o.GPU >= 0:
		return e.GPU == o.GPU
	}
	return true
}

// openFile opens a file of the log directory for reading (o.open, else
// sink.OpenRegular: a FIFO, a device or a directory is refused, never
// waited on or read without end).
func (o Options) openFile(name string) (*os.File, error) {
	if o.open != nil {
		return o.open(name)
	}
	return sink.OpenRegular(name)
}

// openDir opens a directory of the log directory (crashes/) for listing
// (o.open, else os.Open).
func (o Options) openDir(name string) (*os.File, error) {
	if o.open != nil {
		return o.open(name)
	}
	return os.Open(name)
}

// Incident is the moment the report is about.
type Incident struct {
	Time time.Time
	GPU  int    // -1 when not tied to one GPU (--at without --gpu)
	What string // "Xid 62: Internal micro-controller halt (nvml)"
}

// GPUData is one board's rows in the window, at one GPU index: two boards
// seen at one index (the indices moved at a restart) are two GPUData,
// their rows never joined.
type GPUData struct {
	Index int
	Board sink.Board // as its files' first line names it; only the index for files written before that line was
	Rows  []Row
	// Earlier: a file read has rows of this GPU before the window, so rows
	// that start inside it follow a gap, not the logger's start.
	Earlier bool
}

// Name is the GPU's index and its board, as the report shows them: "GPU 0
// (GPU-5a3c1e2f-..., serial 1791025012340, bus 00000000:01:00.0)", or the
// index alone for files written before they named their board.
func (g GPUData) Name() string {
	s := "GPU " + strconv.Itoa(g.Index)
	if g.Board.UUID == "" {
		return s
	}
	s += " (" + g.Board.UUID
	if g.Board.Serial != "" {
		s += ", serial " + g.Board.Serial
	}
	if g.Board.Bus != "" {
		s += ", bus " + g.Board.Bus
	}
	return s + ")"
}

// Report is everything the text and HTML forms show.
type Report struct {
	Dir      string
	Board    string // the board --gpu named by UUID or bus id (its UUID); "" otherwise
	Incident Incident
	// Headline names the incident by its worst events, as its last crash
	// snapshot does ("GPU 0: GSP RPC Timeout (Xid 119), then ...; started
	// with ..."); empty when no snapshot of it says.
	Headline   string
	Action     string         // the GPU's repair action its last crash snapshot names; "" when none does
	Files      []IncidentFile // the incident's crash snapshots and follow-ups, oldest first
	From, To   time.Time
	GPUs       []GPUData
	Timeline   []Entry
	Peaks      []Peak
	Precursors []string
	Read       []string // what was read: "gpu0-5a3c1e2f-deep-2026-11-30.csv: 700 rows"
	Skipped    []string // what was not, and why
	Loc        *time.Location

	climbs []*climb // the health counters' climbs in the window, for the precursors

	htmlDir string // while WriteHTMLFile writes: the page's directory, for its links
}

// mergeWindow: critical events on one GPU closer than this to the one before
// belong to the same incident (a crash floods 30 to 50 Xids within seconds).
const mergeWindow = 60 * time.Second

// Build reads the log directory and assembles the report. Errors are for
// what makes a report impossible (no directory, no incident, no rows in the
// window, a file the user may not read: events.log, crashes/, a CSV of the
// window), each saying what to do; damage that only loses part of the data
// is listed in Report.Skipped instead.
func Build(o Options) (*Report, error) {
	if o.Loc == nil {
		o.Loc = time.Local
	}
	if o.Before <= 0 {
		o.Before = 60 * time.Second
	}
	if o.After < 0 {
		o.After = 0
	}
	fi, err := os.Stat(o.Dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("log dir %s does not exist (give the logger's --log-dir with --log-dir)", o.Dir)
		}
		return nil, fmt.Errorf("log dir %s: %w", o.Dir, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("log dir %s is not a directory", o.Dir)
	}
	rep := &Report{Dir: o.Dir, Loc: o.Loc}
	// The directory is listed first: one the user may not read says so
	// before anything is concluded from its files.
	files, err := sink.ListDays(o.Dir, o.Loc)
	if err != nil {
		return nil, unreadable("log dir "+o.Dir, o.Dir, err)
	}

	// No incident is concluded from what could not be read: an events.log
	// or crashes/ the user may not read ends the report (unreadable).
	logs, skipped, err := eventLogs(o.Dir)
	if err != nil {
		return nil, err
	}
	rep.Skipped = append(rep.Skipped, skipped...)
	all, bad, long, err := readEvents(o.openFile, logs, time.Time{}, time.Time{})
	if err != nil {
		return nil, err
	}
	if bad > 0 {
		rep.Skipped = append(rep.Skipped, strconv.Itoa(bad)+" events.log lines that did not parse")
	}
	if long > 0 {
		rep.Skipped = append(rep.Skipped, fmt.Sprintf("%d events.log line(s) over %d KiB skipped unread", long, sink.MaxLine>>10))
	}
	if len(logs) > 0 {
		rep.Read = append(rep.Read, fmt.Sprintf("%d events.log file(s): %d events", len(logs), len(all)))
	}

	if len(files) == 0 {
		return nil, fmt.Errorf("no CSV files (gpu<N>-<board>-deep-<day>.csv[.gz]) in %s", o.Dir)
	}
	if o.Board != "" {
		if o.uuid, err = pickBoard(o.Board, files); err != nil {
			return nil, err
		}
		o.GPU = -1
		rep.Board = o.uuid
	}

	inc, err := findIncident(o, all)
	if err != nil {
		return nil, err
	}
	rep.Incident = inc
	if inc.GPU >= 0 {
		if rep.Files, rep.Headline, err = incidentFiles(o, inc.GPU, inc.Time); err != nil {
			return nil, err
		}
		rep.Action = lastAction(rep.Files)
	}
	rep.From, rep.To = inc.Time.Add(-o.Before), inc.Time.Add(o.After)

	// Files are read in parallel (one goroutine per file, at most one per
	// CPU): a day of 8 GPUs is 8 files, and decompressing them is most of
	// the work.
	type job struct {
		f    sink.CSVDay
		rows []Row
		st   readStats
		err  error
	}
	var jobs []*job
	var first, last time.Time
	for _, f := range files {
		if first.IsZero() || f.Day.Before(first) {
			first = f.Day
		}
		if f.Day.After(last) {
			last = f.Day
		}
		if (o.GPU >= 0 && f.GPU != o.GPU) || (o.uuid != "" && !boardIs(f, o.uuid)) || !overlaps(f, rep.From, rep.To) {
			continue
		}
		jobs = append(jobs, &job{f: f})
	}
	var pmu sync.Mutex
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	for _, j := range jobs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			name := filepath.Base(j.f.Path)
			var prog progressFunc
			if o.Progress != nil {
				prog = func(done, total int64) {
					if total > 0 {
						pmu.Lock()
						o.Progress(name, float64(done)/float64(total))
						pmu.Unlock()
					}
				}
			}
			th := newThinner(rep.From, rep.To)
			j.st, j.err = readWindow(o.openFile, j.f, rep.From, rep.To, prog, func(r Row) {
				th.add(r, func(r Row) { j.rows = append(j.rows, r) })
			})
		}()
	}
	wg.Wait()
	type key struct {
		gpu   int
		board string
	}
	byGPU := map[key]*GPUData{}
	for _, j := range jobs {
		name := filepath.Base(j.f.Path)
		if errors.Is(j.err, fs.ErrPermission) {
			// Not damage: the rows are there, for a user who may read them.
			return nil, unreadable(name, j.f.Path, j.err)
		}
		if j.err != nil {
			rep.Skipped = append(rep.Skipped, name+": "+j.err.Error())
			continue
		}
		k := key{j.f.GPU, j.f.Board}
		g := byGPU[k]
		if g == nil {
			g = &GPUData{Index: j.f.GPU, Board: sink.Board{Index: j.f.GPU}}
			byGPU[k] = g
		}
		if j.st.HasBoard {
			g.Board = j.st.Board
		}
		// A pause between the last row of one file and the first of the
		// next (a restart, midnight) is a gap too.
		if len(g.Rows) > 0 && len(j.rows) > 0 {
			d := j.rows[0].Time.Sub(g.Rows[len(g.Rows)-1].Time)
			if d >= gapThreshold(medianInterval(g.Rows)) {
				j.rows[0].Gap = d
			}
		}
		if len(g.Rows) == 0 {
			g.Rows = j.rows // no copy: a day's rows are the most memory the report holds
		} else {
			g.Rows = append(g.Rows, j.rows...)
		}
		j.rows = nil
		g.Earlier = g.Earlier || j.st.Before
		st := j.st
		rep.Read = append(rep.Read, fmt.Sprintf("%s: %d rows in the window", name, st.Rows))
		if st.Malformed > 0 {
			rep.Skipped = append(rep.Skipped, fmt.Sprintf("%s: %d malformed or cut line(s) skipped", name, st.Malformed))
		}
		if st.Long > 0 {
			rep.Skipped = append(rep.Skipped, fmt.Sprintf("%s: %d line(s) over %d KiB skipped unread", name, st.Long, sink.MaxLine>>10))
		}
		if st.Damage != "" {
			rep.Skipped = append(rep.Skipped, fmt.Sprintf("%s: damaged (%s); the rest of the file is unreadable", name, st.Damage))
		}
	}
	n := 0
	for _, g := range byGPU {
		sort.SliceStable(g.Rows, func(i, j int) bool { return g.Rows[i].Time.Before(g.Rows[j].Time) })
		n += len(g.Rows)
		if len(g.Rows) > 0 {
			rep.GPUs = append(rep.GPUs, *g)
		}
	}
	sort.Slice(rep.GPUs, func(i, j int) bool {
		a, b := rep.GPUs[i], rep.GPUs[j]
		if a.Index != b.Index {
			return a.Index < b.Index
		}
		return a.Rows[0].Time.Before(b.Rows[0].Time) // two boards at one index: in the order they were there
	})
	if n == 0 {
		return nil, fmt.Errorf("no rows between %s and %s in %s (the CSVs cover %s to %s); pick a time inside with --at",
			fmtTime(rep.From, o.Loc), fmtTime(rep.To, o.Loc), o.Dir, first.Format("2006-01-02"), last.Format("2006-01-02"))
	}

	rep.buildTimeline(all, o)
	rep.Peaks = peaks(rep.GPUs)
	rep.Precursors = precursors(rep)
	return rep, nil
}

// noise are event types left out of the timeline: they come by the dozen
// and tell nothing about a crash on their own.
var noise = map[string]bool{sink.TypeClock: true, sink.TypeClockBurst: true, sink.TypePState: true}

func (rep *Report) buildTimeline(all []EventLine, o Options) {
	// The rows at each index, of whichever board was there: an event's
	// values are those of the row at its moment.
	rows := map[int][]Row{}
	for _, g := range rep.GPUs {
		if len(rows[g.Index]) > 0 {
			rows[g.Index] = slices.SortedFunc(slices.Values(append(slices.Clip(rows[g.Index]), g.Rows...)),
				func(a, b Row) int { return a.Time.Compare(b.Time) })
		} else {
			rows[g.Index] = g.Rows
		}
		es := rowTimeline(g.Index, g.Rows)
		if len(es) > 0 && g.Board.UUID != "" {
			es[0].What += " of board " + g.Board.UUID // its START: which board the rows are
		}
		rep.Timeline = append(rep.Timeline, es...)
	}
	add := func(t time.Time, gpu int, what, marker string) {
		en := Entry{Time: t, GPU: gpu, Kind: KindEvent, What: what, Marker: marker}
		if r, ok := rowAt(rows[gpu], t); ok {
			en.Values = values(r)
		}
		rep.Timeline = append(rep.Timeline, en)
	}
	var steps []EventLine
	for _, e := range all {
		if noise[e.Type] || e.KV["duplicate_of"] != "" || !o.wants(e) {
			continue
		}
		if _, ok := counterStep(e); ok {
			if !e.Time.Before(rep.From) && !e.Time.After(rep.To) {
				steps = append(steps, e)
			}
			continue
		}
		t := e.Time
		what := e.describe()
		if t.Equal(rep.Incident.Time) && what == rep.Incident.What {
			continue // the incident line says it (also when the kernel's time places it a moment apart)
		}
		if kt, ok := kernelTime(rows[e.GPU], e.KV["ktime"]); ok && e.KV["ktime"] != "" {
			t = kt
			what += " [kernel time " + e.KV["ktime"] + "s]"
		}
		if t.Before(rep.From) || t.After(rep.To) {
			continue
		}
		add(t, e.GPU, what, eventMarker(e))
	}
	// A counter that grows step by step (SBEs every second) is one line per
	// climb, at its first step.
	rep.climbs = climbs(steps, rep.Incident.Time)
	for _, c := range rep.climbs {
		what := c.first.describe()
		if c.steps > 1 {
			what = "health " + c.summary()
		}
		add(c.first.Time, c.gpu, what, eventMarker(c.first))
	}
	inc := Entry{Time: rep.Incident.Time, GPU: rep.Incident.GPU, Kind: KindIncident, What: rep.Incident.What, Marker: "incident"}
	if r, ok := rowAt(rows[inc.GPU], inc.Time); ok {
		inc.Values = values(r)
	}
	rep.Timeline = append(rep.Timeline, inc)
	sort.SliceStable(rep.Timeline, func(i, j int) bool {
		a, b := rep.Timeline[i], rep.Timeline[j]
		if !a.Time.Equal(b.Time) {
			return a.Time.Before(b.Time)
		}
		if a.GPU != b.GPU {
			return a.GPU < b.GPU
		}
		if kindRank[a.Kind] != kindRank[b.Kind] {
			return kindRank[a.Kind] < kindRank[b.Kind]
		}
		return a.What < b.What
	})
}

// kindRank orders entries of the same moment: the window's start first, the
// incident before the events that make it up, the end last.
var kindRank = map[EntryKind]int{KindStart: 0, KindIncident: 1, KindEvent: 2, KindFlagOff: 3, KindFlagOn: 4,
	KindFlag: 5, KindThrottle: 6, KindGap: 7, KindEndOfData: 8}

func eventMarker(e EventLine) string {
	switch e.Type {
	case sink.TypeXid, sink.TypeRecoveryAction:
		return "xid"
	case sink.TypeNVMLHung:
		return "hang"
	case sink.TypeGPULost, sink.TypeFallenOffBus:
		return "lost"
	case sink.TypeAER:
		return "aer"
	case sink.TypeTDPChange:
		return "flag"
	}
	if e.critical() {
		return "xid"
	}
	return ""
}

// findIncident picks the moment the report is about.
func findIncident(o Options, all []EventLine) (Incident, error) {
	if o.Incident != "" {
		h, ok, err := readHeader(o.openFile, o.Incident)
		if errors.Is(err, sink.ErrNotRegular) {
			return Incident{}, fmt.Errorf("--incident %s: %w", o.Incident, sink.ErrNotRegular)
		}
		if !ok {
			if n, ok2 := snapshot.ParseName(filepath.Base(o.Incident), o.Loc); ok2 && n.Kind == "crash" {
				return Incident{Time: n.Time, GPU: n.GPU, What: "crash snapshot " + filepath.Base(o.Incident)}, nil
			}
			return Incident{}, fmt.Errorf("--incident %s: not a readable crash snapshot (no Time: line in its header)", o.Incident)
		}
		if o.GPU >= 0 {
			h.GPUIndex = o.GPU
		}
		return Incident{Time: h.Time, GPU: h.GPUIndex, What: h.Reason}, nil
	}
	if !o.At.IsZero() {
		inc := Incident{Time: o.At, GPU: o.GPU, What: "the moment asked for (--at)"}
		return inc, nil
	}
	// The most recent incident: the first critical event of the last burst.
	var crit []EventLine
	for _, e := range all {
		if e.critical() && o.wants(e) {
			crit = append(crit, e)
		}
	}
	sort.SliceStable(crit, func(i, j int) bool { return crit[i].Time.Before(crit[j].Time) })
	if len(crit) > 0 {
		i := len(crit) - 1
		for i > 0 && crit[i].Time.Sub(crit[i-1].Time) < mergeWindow {
			i--
		}
		e := crit[i]
		return Incident{Time: e.Time, GPU: e.GPU, What: e.describe()}, nil
	}
	snaps, err := listSnapshots(o.openDir, o.Dir, o.Loc)
	if err != nil {
		return Incident{}, err
	}
	for i := len(snaps) - 1; i >= 0; i-- {
		s := snaps[i]
		if o.GPU >= 0 && s.GPU != o.GPU {
			continue
		}
		h, ok, err := readHeader(o.openFile, s.path)
		if err != nil {
			return Incident{}, err
		}
		if o.uuid != "" && (!ok || !strings.EqualFold(h.UUID, o.uuid)) {
			continue
		}
		if ok {
			return Incident{Time: h.Time, GPU: h.GPUIndex, What: h.Reason}, nil
		}
		return Incident{Time: s.Time, GPU: s.GPU, What: "crash snapshot " + filepath.Base(s.path)}, nil
	}
	return Incident{}, fmt.Errorf("no incident in %s (no critical event in events.log, no crash snapshot); name a moment with --at TIME", o.Dir)
}

// fmtTime prints a time for people, in loc, with milliseconds.
func fmtTime(t time.Time, loc *time.Location) string {
	return t.In(loc).Format("2006-01-02 15:04:05.000 MST")
}

// ParseAt reads --at: RFC 3339, or a local "2006-01-02 15:04:05[.000]"
// (a 'T' in place of the space is fine too).
func ParseAt(s string, loc *time.Location) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	for _, l := range []string{"2006-01-02 15:04:05.999999999", "2006-01-02T15:04:05.999999999", "2006-01-02 15:04", "2006-01-02T15:04"} {
		if t, err := time.ParseInLocation(l, s, loc); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("--at %q: want RFC 3339 (2026-11-30T19:08:17Z) or local 2026-11-30 19:08:17", s)
}
