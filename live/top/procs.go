package top

import (
	"cmp"
	"slices"
	"strconv"

	"github.com/gdamore/tcell/v2"

	"github.com/gpu-telemetry/gpu-telemetry/live"
)

// procs is every process on every GPU (or, with f, on the selected one),
// from the daemon's slow-tier process read: sortable by memory, SM share or
// pid (s), one row highlighted (↑/↓). Below procWide columns the type and
// memory-busy columns are left out, so the user, job and command keep room.
type procs struct {
	sort   int // index in procSorts
	cursor int
	top    int // the first row on the screen
	only   bool
}

// ProcRow is one process as the view shows and exports it.
type ProcRow struct {
	GPU int `json:"gpu"`
	live.ProcDoc
}

// procSorts are the orders s cycles through.
var procSorts = []struct {
	name string
	cmp  func(a, b ProcRow) int
}{
	{"memory", func(a, b ProcRow) int { return cmp.Compare(deref64(b.MemBytes), deref64(a.MemBytes)) }},
	{"sm", func(a, b ProcRow) int { return cmp.Compare(deref32(b.SMUtil), deref32(a.SMUtil)) }},
	{"pid", func(a, b ProcRow) int { return cmp.Compare(a.PID, b.PID) }},
}

func deref64(p *uint64) int64 {
	if p == nil {
		return -1 // absent sorts last
	}
	return int64(*p)
}

func deref32(p *uint32) int64 {
	if p == nil {
		return -1
	}
	return int64(*p)
}

func (*procs) Name() string   { return "Processes" }
func (*procs) Key() tcell.Key { return tcell.KeyF4 }

// Data is the rows in the view's order.
func (v *procs) Data(m *Model) any { return v.rows(m) }

func (v *procs) rows(m *Model) []ProcRow {
	rows := []ProcRow{}
	if m.Doc == nil {
		return rows
	}
	for _, g := range m.Doc.GPUs {
		if g.Processes == nil || v.only && g.Index != m.Sel {
			continue
		}
		for _, p := range g.Processes.List {
			rows = append(rows, ProcRow{g.Index, p})
		}
	}
	by := procSorts[v.sort].cmp
	slices.SortStableFunc(rows, func(a, b ProcRow) int { return cmp.Or(by(a, b), cmp.Compare(a.GPU, b.GPU), cmp.Compare(a.PID, b.PID)) })
	return rows
}

// OnKey: s sorts, f filters, ↑/↓ PgUp/PgDn Home/End move the highlighted
// row; Enter selects the row's GPU (App then shows its detail).
func (v *procs) OnKey(m *Model, ev *tcell.EventKey) bool {
	if ev.Key() == tcell.KeyEnter {
		if rows := v.rows(m); v.cursor < len(rows) {
			m.Sel = rows[v.cursor].GPU
		}
		return false
	}
	if ev.Key() == tcell.KeyRune {
		switch ev.Rune() {
		case 's':
			v.sort = (v.sort + 1) % len(procSorts)
		case 'f':
			v.only = !v.only
		default:
			return false
		}
		return true
	}
	return scrollKey(&v.cursor, ev)
}

func (v *procs) Render(m *Model, width, height int) []Line {
	rows := v.rows(m)
	scope := "all GPUs"
	if v.only {
		scope = "GPU " + strconv.Itoa(m.Sel)
	}
	out := []Line{{pad(strconv.Itoa(len(rows))+" processes on "+scope+"  sorted by "+procSorts[v.sort].name+
		"  (s sort, f all GPUs/selected, ↑/↓ move)", width), SevHead}}
	if m.Doc != nil {
		for _, g := range m.Doc.GPUs {
			if v.only && g.Index != m.Sel {
				continue
			}
			switch p := g.Processes; {
			case p == nil:
				out = append(out, Line{pad("GPU "+strconv.Itoa(g.Index)+": no process reader", width), SevDim})
			case p.Status != "ok":
				out = append(out, Line{pad("GPU "+strconv.Itoa(g.Index)+": processes "+p.Status+" "+p.Error, width), SevWarn})
			}
		}
	}
	// The user and job columns are as wide as their longest value, the
	// user's at most maxUserWidth, the job's at most a third of what the
	// fixed columns leave.
	c := procLayout{wide: width >= procWide, uw: len("USER"), jw: len("JOB")}
	for _, r := range rows {
		c.uw = max(c.uw, len([]rune(orDash(r.User))))
		c.jw = max(c.jw, len([]rune(orDash(r.Job.Workload().String()))))
	}
	c.uw = min(c.uw, maxUserWidth)
	c.jw = min(c.jw, max(width-c.fixed(), 0)/3)
	out = append(out, Line{pad(c.row("GPU", "PID", "USER", "TYPE", "MEM MiB", "SM%", "MEM%", "JOB", "COMMAND"), width), SevHead})
	room := height - len(out)
	if room <= 0 {
		return out[:max(height, 0)]
	}
	v.cursor = min(max(v.cursor, 0), max(len(rows)-1, 0))
	v.top = min(max(v.top, v.cursor-room+1), v.cursor)
	for i := v.top; i < len(rows) && i < v.top+room; i++ {
		r := rows[i]
		mem := "n/a"
		if r.MemBytes != nil {
			mem = strconv.FormatUint(*r.MemBytes>>20, 10)
		}
		who := r.Name
		if r.Cmdline != "" {
			who = r.Cmdline
		}
		if who == "" {
			who = "(" + r.Origin + ")"
		}
		job := r.Job.Workload().String()
		l := Line{pad(c.row(strconv.Itoa(r.GPU), strconv.FormatUint(uint64(r.PID), 10), orDash(r.User), r.Type, mem,
			live.OptUint(r.SMUtil, ""), live.OptUint(r.MemUtil, ""), orDash(job), who), width), SevNormal}
		if i == v.cursor {
			l.Sev = SevSel
		}
		out = append(out, l)
	}
	return out
}

// procWide is the narrowest screen that shows every column; below it the
// type and memory-busy columns are left out first.
const procWide = 100

// maxUserWidth bounds the user column (a longer name is cut).
const maxUserWidth = 12

// procLayout is the process table's columns at one width: all of them when
// wide, the user column uw runes, the job jw.
type procLayout struct {
	wide   bool
	uw, jw int
}

// fixed is the width of the columns before the job.
func (c procLayout) fixed() int {
	n := 3 + 1 + 8 + 1 + c.uw + 1 + 8 + 1 + 4 + 1
	if c.wide {
		n += 8 + 1 + 4 + 1
	}
	return n
}

// row lays out one row: the fixed columns, the job, then the command.
func (c procLayout) row(gpu, pid, user, typ, mem, sm, mu, job, cmdline string) string {
	s := padL(gpu, 3) + " " + padL(pid, 8) + " " + pad(user, c.uw) + " "
	if c.wide {
		s += pad(typ, 8) + " "
	}
	s += padL(mem, 8) + " " + padL(sm, 4) + " "
	if c.wide {
		s += padL(mu, 4) + " "
	}
	return s + pad(job, c.jw) + " " + cmdline
}

// padL is s right-aligned in width runes (cut when longer).
func padL(s string, width int) string {
	if n := len([]rune(s)); n < width {
		return pad("", width-n) + s
	}
	return cut(s, width)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
