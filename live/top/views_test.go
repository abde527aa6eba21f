package top

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/gdamore/tcell/v2"

	"github.com/gpu-telemetry/gpu-telemetry/internal/testutil"
	"github.com/gpu-telemetry/gpu-telemetry/live"
)

// richDoc is fleet(n) with what the views draw beyond the overview: a
// minute of history per GPU, processes on GPUs 0 and 2 (one in a Slurm
// job; GPU 2's, of an older daemon, without their users), and events lines
// of GPUs 1 and 4 and of the host.
func richDoc(n int) live.Doc {
	d := fleet(n)
	for i := range d.GPUs {
		g := &d.GPUs[i]
		h := &live.HistoryDoc{StepS: 1, End: d.Time.Add(-time.Second)}
		for _, k := range chartKeys {
			vals := make([]*float64, 60)
			for s := range vals {
				if s == 30 && i == 0 {
					continue // a gap: an absent reading
				}
				v := 50 + 40*math.Sin(float64(s+i)/6)
				if k == "power_w" {
					v *= 7
				}
				vals[s] = &v
			}
			h.Series = append(h.Series, live.SeriesDoc{Key: k, Values: vals})
		}
		g.History = h
		if i == 0 || i == 2 {
			mem := func(m uint64) *uint64 { m <<= 20; return &m }
			pct := func(p uint32) *uint32 { return &p }
			at := d.Time.Add(-time.Second)
			g.Processes = &live.ProcsDoc{Status: "ok", ReadAt: &at, List: []live.ProcDoc{
				{PID: uint32(1000 + i), Type: "compute", MemBytes: mem(30000 + uint64(i)), SMUtil: pct(90), MemUtil: pct(40), Origin: "here",
					Name: "python", Cmdline: "python train.py --epochs 90", Job: &live.JobDoc{SlurmJob: "4242", SlurmStep: "0", Unit: "slurmstepd.scope"}},
				{PID: uint32(2000 + i), Type: "graphics", MemBytes: mem(512), SMUtil: pct(uint32(3 + i)), Origin: "here", Name: "Xorg", Cmdline: "/usr/lib/xorg/Xorg :0"},
				{PID: uint32(300 + i), Type: "compute", Origin: "other PID namespace"},
			}}
			if i == 0 {
				l := g.Processes.List
				l[0].User, l[0].UID = "svc-training-batch", pct(1001)
				l[1].User, l[1].UID = "root", pct(0)
			}
		}
	}
	for i := range 30 {
		gpu := []int{1, 4, 0}[i%3] % n
		level := []string{"critical", "warning", "info"}[i%3]
		d.Events = append(d.Events, fmt.Sprintf("time=2026-11-30T15:%02d:%02dZ host=gpu-node-07 uuid=GPU-%04d level=%s gpu=%d source=nvml type=Xid xid=%d",
			3, 59-i, gpu, level, gpu, []int{79, 119, 31}[i%3]))
	}
	d.Events = append(d.Events, "time=2026-11-30T15:00:00Z host=gpu-node-07 level=info gpu=? source=start type=start version=1.0")
	return d
}

// appFor is an App showing view name with d applied.
func appFor(d live.Doc, name string) *App {
	a := NewApp()
	a.Now = func() time.Time { return d.Time }
	a.Apply(d, nil, d.Time)
	a.show(name)
	return a
}

// sevMark is how a golden screen marks a line's Sev after the right edge.
var sevMark = map[Sev]string{SevNormal: "", SevDim: "dim", SevHead: "head", SevWarn: "WARN", SevCrit: "CRIT", SevSel: "sel", SevBar: "bar"}

func styledScreen(lines []Line) []byte {
	var b bytes.Buffer
	for _, l := range lines {
		b.WriteString(l.Text + "|" + sevMark[l.Sev] + "\n")
	}
	return b.Bytes()
}

// TestViewScreens: every view at 80x24, 120x40 and 220x60 with 1, 8 and 16
// GPUs (some lost, hung, failing) is exactly the terminal's size, and
// matches its golden screen (go test -run TestViewScreens -update).
func TestViewScreens(t *testing.T) {
	for _, n := range []int{1, 8, 16} {
		d := richDoc(n)
		for _, v := range Views() {
			for _, size := range [][2]int{{80, 24}, {120, 40}, {220, 60}} {
				w, h := size[0], size[1]
				name := fmt.Sprintf("view-%s-%dgpus-%dx%d", strings.ToLower(v.Name()), n, w, h)
				t.Run(name, func(t *testing.T) {
					a := appFor(d, v.Name())
					a.M.Sel = d.GPUs[n-1].Index // the last GPU: lost, in every fleet
					lines := a.Screen(w, h)
					fitsLines(t, lines, w, h)
					testutil.Golden(t, name+".txt", styledScreen(lines))
				})
			}
		}
	}
}

func fitsLines(t *testing.T, lines []Line, w, h int) {
	t.Helper()
	if len(lines) != h {
		t.Fatalf("%d lines, want %d", len(lines), h)
	}
	for i, l := range lines {
		if n := utf8.RuneCountInString(l.Text); n != w {
			t.Fatalf("line %d is %d wide, want %d: %q", i, n, w, l.Text)
		}
	}
}

// TestViewsFitEverySize: every view at every size from 1x1 to 220x60,
// scrolled anywhere, is exactly the terminal's size; on the overview from
// 40x10 up every failing GPU is on the screen, drawn as critical.
func TestViewsFitEverySize(t *testing.T) {
	d := richDoc(16)
	for vi := range Views() {
		for w := 1; w <= 220; w += 13 {
			for h := 1; h <= 60; h += 4 {
				a := appFor(d, "")
				a.Cur = vi
				a.Key(runeKey('4')) // GPU 4 selected and its detail shown
				a.Cur = vi
				a.Views[vi].OnKey(&a.M, tcell.NewEventKey(tcell.KeyEnd, 0, tcell.ModNone))
				lines := a.Screen(w, h)
				fitsLines(t, lines, w, h)
				if vi != 0 || w < 40 || h < 10 {
					continue
				}
				all := make([]string, len(lines))
				for i, l := range lines {
					all[i] = l.Text
				}
				for _, g := range d.GPUs {
					if g.State == "ok" && g.Index != 4 {
						continue
					}
					gl := onScreen(all, g.Index)
					if gl == nil {
						t.Fatalf("%dx%d: GPU %d (%s) not on the screen:\n%s", w, h, g.Index, g.State, strings.Join(all, "\n"))
					}
				}
				for i, l := range lines {
					if strings.HasPrefix(l.Text, "GPU 12 HUNG") && l.Sev != SevCrit {
						t.Fatalf("%dx%d: hung GPU 12 drawn as %v", w, h, lines[i].Sev)
					}
				}
			}
		}
	}
}

// TestBufferSeedsAndAppends: the first document's History seeds a GPU's
// buffer, each later document appends one value (absent while the GPU is
// not answering), and the buffer holds BufferLen at most; the PCIe rate
// comes from two samples of the byte counters.
func TestBufferSeedsAndAppends(t *testing.T) {
	d := richDoc(1)
	d.GPUs[0] = fleet(2).GPUs[0] // answering, GPU-0000
	d.GPUs[0].History = richDoc(1).GPUs[0].History
	var m Model
	m.Apply(d, d.Time)
	uuid := d.GPUs[0].UUID
	if got := len(m.Series(uuid, "temperature_c")); got != 61 {
		t.Fatalf("after the first document: %d values, want 60 of history and 1 live", got)
	}
	if _, _, ok := m.PCIeRate(uuid); ok {
		t.Errorf("a PCIe rate from one sample")
	}
	m.Apply(d, d.Time) // the same document again: nothing added
	if got := len(m.Series(uuid, "temperature_c")); got != 61 {
		t.Fatalf("a repeated document was appended: %d", got)
	}
	lost := fleet(1).GPUs[0]
	lost.UUID = uuid
	for i := range BufferLen + 10 {
		n := d
		n.Time = d.Time.Add(time.Duration(i+1) * time.Second)
		n.GPUs = []live.GPUDoc{d.GPUs[0]}
		if i == BufferLen+9 {
			n.GPUs[0] = lost
		}
		st := n.Time.Add(-100 * time.Millisecond)
		n.GPUs[0].SampleTime = &st
		n.GPUs[0].History = nil
		n.GPUs[0].Readings = slices.Clone(n.GPUs[0].Readings)
		setReading(&n.GPUs[0], "pcie_tx_bytes", float64(i)*1e9)
		setReading(&n.GPUs[0], "pcie_rx_bytes", float64(i)*2e6)
		m.Apply(n, n.Time)
		if i == 1 {
			tx, rx, ok := m.PCIeRate(uuid)
			if !ok || tx != 1e9 || rx != 2e6 {
				t.Errorf("PCIe rate %v %v %v, want 1e9 and 2e6 a second", tx, rx, ok)
			}
		}
	}
	s := m.Series(uuid, "temperature_c")
	if s[len(s)-1] != nil || s[len(s)-2] == nil {
		t.Errorf("the lost GPU's last value is not absent, or the one before it is")
	}
	if got := len(m.Series(uuid, "temperature_c")); got != BufferLen {
		t.Errorf("%d values buffered, want %d", got, BufferLen)
	}
	if m.Series("GPU-none", "temperature_c") != nil {
		t.Errorf("a series for a GPU never seen")
	}
}

// TestBufferCountsSeconds: the buffer holds a value a second, not a
// document: the seconds no document came for (a pause, fetches failing, a
// remote document missed) are gaps, at most the buffer's length, and a
// document of the same second is not appended twice; a later document
// with a History re-seeds the buffer from it.
func TestBufferCountsSeconds(t *testing.T) {
	d := fleet(2)
	d.GPUs = d.GPUs[:1]
	uuid := d.GPUs[0].UUID
	var m Model
	at := func(after time.Duration) live.Doc {
		n := d
		n.Time = d.Time.Add(after)
		return n
	}
	temps := func() []*float64 { return m.Series(uuid, "temperature_c") }
	m.Apply(at(0), d.Time)
	m.Apply(at(time.Second), d.Time)
	m.Apply(at(1300*time.Millisecond), d.Time) // the same second
	if got := temps(); len(got) != 2 || got[0] == nil || got[1] == nil {
		t.Fatalf("two documents a second apart, then one of the same second: %v", got)
	}
	m.Apply(at(5*time.Second+100*time.Millisecond), d.Time) // 3 s missed
	got := temps()
	if len(got) != 6 || got[2] != nil || got[3] != nil || got[4] != nil || got[5] == nil {
		t.Fatalf("after 4 s: %v, want 3 gaps then the value", got)
	}
	m.Apply(at(time.Hour), d.Time)
	got = temps()
	if len(got) != BufferLen || got[BufferLen-1] == nil || slices.ContainsFunc(got[:BufferLen-1], func(p *float64) bool { return p != nil }) {
		t.Fatalf("after an hour: %d values, want %d gaps and the value", len(got), BufferLen-1)
	}
	n := at(time.Hour + time.Minute)
	n.GPUs = slices.Clone(n.GPUs)
	n.GPUs[0].History = richDoc(1).GPUs[0].History
	n.GPUs[0].History.End = n.Time.Add(-time.Second)
	m.Apply(n, n.Time)
	if got := temps(); len(got) != 61 || got[0] == nil || got[60] == nil {
		t.Errorf("after a document with a minute of history: %d values, want 60 of history and 1 live", len(got))
	}
}

// TestBufferClockStepsBack: document times are the daemon's wall clock;
// when it steps back an hour, the buffer starts again from the first
// document after the step (not dropping every document until the clock
// passes the old time), a History re-seeds it, and the PCIe rate of the
// counters before the step is not shown.
func TestBufferClockStepsBack(t *testing.T) {
	d := fleet(2)
	d.GPUs = d.GPUs[:1]
	uuid := d.GPUs[0].UUID
	var m Model
	at := func(t0 time.Time, i int) live.Doc {
		n := d
		n.Time = t0.Add(time.Duration(i) * time.Second)
		n.GPUs = slices.Clone(d.GPUs)
		g := &n.GPUs[0]
		st := n.Time.Add(-100 * time.Millisecond)
		g.SampleTime = &st
		g.Readings = slices.Clone(g.Readings)
		setReading(g, "pcie_tx_bytes", float64(i)*1e9)
		setReading(g, "pcie_rx_bytes", float64(i)*2e6)
		return n
	}
	temps := func() []*float64 { return m.Series(uuid, "temperature_c") }
	for i := range 5 {
		n := at(d.Time, i)
		m.Apply(n, n.Time)
	}
	if _, _, ok := m.PCIeRate(uuid); !ok || len(temps()) != 5 {
		t.Fatalf("before the step: %d values, PCIe rate %v; want 5 and a rate", len(temps()), ok)
	}
	back := d.Time.Add(-time.Hour)
	for i := range 30 {
		n := at(back, i)
		m.Apply(n, n.Time)
		if i == 0 {
			if tx, rx, ok := m.PCIeRate(uuid); ok {
				t.Errorf("after the step: PCIe rate %v %v of the counters before it", tx, rx)
			}
		}
	}
	if got := temps(); len(got) != 30 || slices.Contains(got, nil) {
		t.Fatalf("30 documents after the clock stepped back an hour: %d values (%v), want 30", len(got), got)
	}
	n := at(back, 31)
	n.GPUs[0].History = richDoc(1).GPUs[0].History
	n.GPUs[0].History.End = n.Time.Add(-time.Second)
	m.Apply(n, n.Time)
	if got := temps(); len(got) != 61 || got[0] == nil || got[60] == nil {
		t.Errorf("a document with a minute of history after the step: %d values, want 60 of history and 1 live", len(got))
	}
	late := at(back, 30) // a late document, not a step: nothing changes
	m.Apply(late, late.Time)
	if got := temps(); len(got) != 61 {
		t.Errorf("a document a second late restarted the buffer: %d values", len(got))
	}
}

// TestBufferSeedCountsSecondOnce: the daemon's History ends with the
// document's own second (its End is the document's time truncated to the
// second); the document's value is of that second, so seeding gives the
// history's values only, wherever in its second the document was made,
// and the next second's document appends one.
func TestBufferSeedCountsSecondOnce(t *testing.T) {
	for _, off := range []time.Duration{0, 300 * time.Millisecond, 500 * time.Millisecond, 700 * time.Millisecond, 990 * time.Millisecond} {
		d := fleet(2)
		d.GPUs = slices.Clone(d.GPUs[:1])
		uuid := d.GPUs[0].UUID
		d.GPUs[0].History = richDoc(1).GPUs[0].History
		d.GPUs[0].History.End = d.Time
		d.Time = d.Time.Add(off)
		var m Model
		m.Apply(d, d.Time)
		if got := len(m.Series(uuid, "temperature_c")); got != 60 {
			t.Errorf("document %v into the history's last second: %d values, want the 60 of history", off, got)
		}
		n := d
		n.GPUs = slices.Clone(d.GPUs)
		n.GPUs[0].History = nil
		n.Time = d.Time.Add(time.Second)
		m.Apply(n, n.Time)
		if got := m.Series(uuid, "temperature_c"); len(got) != 61 || got[60] == nil {
			t.Errorf("document %v: the next second's document: %d values, want 61", off, len(got))
		}
	}
}

func TestSpark(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	for _, tc := range []struct {
		vals []*float64
		n    int
		want string
	}{
		{[]*float64{f(0), f(50), f(100), nil, f(200), f(-5)}, 6, "▁▄█ █▁"},
		{[]*float64{f(100)}, 3, "  █"},
		{[]*float64{f(0), f(100), f(100)}, 2, "██"},
		{nil, 0, ""},
	} {
		if got := spark(tc.vals, tc.n, 0, 100); got != tc.want {
			t.Errorf("spark(%d values, %d) = %q, want %q", len(tc.vals), tc.n, got, tc.want)
		}
	}
}

// TestProcsSort: s cycles memory, SM share, pid; absent values sort last;
// f keeps the selected GPU's only.
func TestProcsSort(t *testing.T) {
	a := appFor(richDoc(8), "Processes")
	v := a.Views[a.Cur].(*procs)
	pids := func() string {
		var s []string
		for _, r := range v.rows(&a.M) {
			s = append(s, strconv.Itoa(r.GPU)+":"+strconv.FormatUint(uint64(r.PID), 10))
		}
		return strings.Join(s, " ")
	}
	for _, want := range []string{
		"2:1002 0:1000 0:2000 2:2002 0:300 2:302",
		"0:1000 2:1002 2:2002 0:2000 0:300 2:302",
		"0:300 2:302 0:1000 2:1002 0:2000 2:2002",
		"2:1002 0:1000 0:2000 2:2002 0:300 2:302",
	} {
		if got := pids(); got != want {
			t.Errorf("sorted by %s: %s, want %s", procSorts[v.sort].name, got, want)
		}
		a.Key(runeKey('s'))
	}
	a.M.Sel = 2
	a.Key(runeKey('f'))
	if got := pids(); got != "2:1002 2:2002 2:302" {
		t.Errorf("GPU 2 only: %s", got)
	}
}

// TestEventsFilter: f keeps the selected GPU's events lines.
func TestEventsFilter(t *testing.T) {
	a := appFor(richDoc(8), "Events")
	v := a.Views[a.Cur].(*events)
	if got := len(v.lines(&a.M)); got != 31 {
		t.Fatalf("%d lines, want 31", got)
	}
	a.M.Sel = 4
	a.Key(runeKey('f'))
	ls := v.lines(&a.M)
	if len(ls) != 10 {
		t.Fatalf("GPU 4: %d lines, want 10", len(ls))
	}
	for _, l := range ls {
		if !strings.Contains(l, "gpu=4 ") {
			t.Errorf("not GPU 4's: %s", l)
		}
	}
}

// setReading sets reading key of g through the document's JSON, as a
// daemon would send it.
func setReading(g *live.GPUDoc, key string, v float64) {
	b, _ := json.Marshal(g)
	var m map[string]any
	json.Unmarshal(b, &m)
	m[key] = v
	b, _ = json.Marshal(m)
	if err := json.Unmarshal(b, g); err != nil {
		panic(err)
	}
}

func TestPerSecond(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	v := []*float64{f(1), nil, f(3), f(4)}
	text := func(p []*float64) string {
		var s []string
		for _, x := range p {
			if x == nil {
				s = append(s, "-")
			} else {
				s = append(s, strconv.FormatFloat(*x, 'f', -1, 64))
			}
		}
		return strings.Join(s, " ")
	}
	for _, tc := range []struct {
		step float64
		want string
	}{{1, "1 - 3 4"}, {2, "1 1 - - 3 3 4 4"}, {0.5, "- 4"}, {0, ""}, {-1, ""}} {
		if got := text(perSecond(v, tc.step)); got != tc.want {
			t.Errorf("step %v: %q, want %q", tc.step, got, tc.want)
		}
	}
}

// TestGPUViewOldDriver: an answering GPU whose driver lacks the newer
// readings (richDoc's GPU 2: no JPEG/OFA, BAR1, maximum clocks, temperature
// thresholds, fan policy, GSP firmware) shows each as n/a, never 0; its
// processes, from a daemon without their users, show the user as -.
func TestGPUViewOldDriver(t *testing.T) {
	d := richDoc(8)
	a := appFor(d, "GPU")
	a.M.Sel = 2
	lines := a.Screen(120, 40)
	fitsLines(t, lines, 120, 40)
	testutil.Golden(t, "view-gpu-olddriver-8gpus-120x40.txt", styledScreen(lines))
	var all []string
	for _, l := range lines {
		all = append(all, l.Text)
	}
	testutil.Contains(t, "GPU view", strings.Join(all, "\n"), "JPEG n/a  OFA n/a", "reserved n/a  BAR1 n/a of n/a",
		"graphics 1980/n/a MHz", "slowdown n/a  shutdown n/a", "policy n/a", "firmware n/a  mode n/a", "gen 5/n/a")
	a = appFor(d, "Processes")
	a.Views[a.Cur].OnKey(&a.M, runeKey('f'))
	a.M.Sel = 2
	var procs []string
	for _, l := range a.Screen(120, 40) {
		procs = append(procs, l.Text)
	}
	testutil.Contains(t, "processes of GPU 2", strings.Join(procs, "\n"), "  2     1002 -    compute")
}
