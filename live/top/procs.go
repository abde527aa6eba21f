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
// pid (s), one row highlighted (↑/↓). The document carries no user of a
// process, so there is no user column.
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
	// The job column is as wide as the longest job, at most a third of
	// what the fixed columns leave.
	jw := len("JOB")
	for _, r := range rows {
		jw = max(jw, len([]rune(orDash(r.Job.Workload().String()))))
	}
	jw = min(jw, max(width-procFixed, 0)/3)
	out = append(out, Line{pad(procCols("GPU", "PID", "TYPE", "MEM MiB", "SM%", "MEM%", "JOB", "COMMAND", jw), width), SevHead})
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
		l := Line{pad(procCols(strconv.Itoa(r.GPU), strconv.FormatUint(uint64(r.PID), 10), r.Type, mem,
			live.OptUint(r.SMUtil, ""), live.OptUint(r.MemUtil, ""), orDash(job), who, jw), width), SevNormal}
		if i == v.cursor {
			l.Sev = SevSel
		}
		out = append(out, l)
	}
	return out
}

// procFixed is the width of procCols' fixed columns.
const procFixed = 3 + 1 + 8 + 1 + 8 + 1 + 8 + 1 + 4 + 1 + 4 + 1

// procCols lays out one row: fixed columns, the job in jw runes, then the
// command.
func procCols(gpu, pid, typ, mem, sm, mu, job, cmdline string, jw int) string {
	return padL(gpu, 3) + " " + padL(pid, 8) + " " + pad(typ, 8) + " " + padL(mem, 8) + " " + padL(sm, 4) + " " + padL(mu, 4) + " " +
		pad(job, jw) + " " + cmdline
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
