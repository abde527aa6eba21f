package top

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gdamore/tcell/v2"

	"github.com/gpu-telemetry/gpu-telemetry/live"
)

// The fleet page (`top --host A --host B ...`, issue 40): one line per
// host, the worst first, so that a host in trouble is on the first lines
// however many are watched; Enter opens the selected host's own view (the
// same view as `top` on that host), whose q or Esc comes back here.

// HostState is what the fleet page knows of one host: the latest document
// (nil before the first), when it arrived, and why the connection is down
// (nil while it delivers).
type HostState struct {
	Name string
	Doc  *live.Doc
	At   time.Time
	Err  error
}

// The ranks of hosts on the fleet page, the worst first.
const (
	hostUnreachable = iota // no document now: connection down, or stale
	hostFailing            // a GPU hung, lost or failing
	hostCritical           // a critical reason (Xid, recovery, missing board) or a draining action
	hostWarning
	hostOK
)

var hostWords = [...]string{"NO LINK", "FAILING", "CRITICAL", "WARNING", "ok"}

// hostRow is one host as the page shows it.
type hostRow struct {
	name  string
	rank  int
	state string // hostWords, or "STALE"
	gpus  string // ok/total
	worst string // the worst GPU and why, or why there is no document
	temp  string // the hottest GPU
	power string // every GPU's power together
	inc   string // the last incident
	age   string // how old the document is
}

// FleetScreen is one drawn fleet page: its lines, and the hosts in the
// order shown (the worst first), which the keys move over.
type FleetScreen struct {
	Lines []string
	Order []string
}

// RenderFleet lays out the fleet page at width x height at time now, the
// host named sel selected ("" or absent: the first).
func RenderFleet(hosts []HostState, now time.Time, width, height int, sel string) FleetScreen {
	if width < 1 || height < 1 {
		return FleetScreen{}
	}
	rows := make([]hostRow, len(hosts))
	nameW := len("HOST")
	for i, h := range hosts {
		rows[i] = newHostRow(h, now)
		nameW = max(nameW, utf8.RuneCountInString(h.Name))
	}
	nameW = min(nameW, 24)
	slices.SortStableFunc(rows, func(a, b hostRow) int { return a.rank - b.rank })
	fs := FleetScreen{Order: make([]string, len(rows))}
	at := 0
	trouble := 0
	for i, r := range rows {
		fs.Order[i] = r.name
		if r.name == sel {
			at = i
		}
		if r.rank < hostWarning {
			trouble++
		}
	}
	title := fit(width,
		segment{"gpu-telemetry top: " + strconv.Itoa(len(hosts)) + " host" + plural(len(hosts)), 0},
		segment{", " + strconv.Itoa(trouble) + " in trouble", 0},
		segment{"  " + now.Format("15:04:05"), 1},
	)
	// Numbers in fixed columns before the texts, which take the rest:
	// the worst GPU's 44 runes, then the last incident, when both fit.
	fixed := 2 + nameW + 2 + 8 + 2 + 5 + 2 + 4 + 2 + 6 + 2 + 4 + 2
	worstW := max(width-fixed, 0)
	incW := 0
	if worstW >= 44+2+24 {
		worstW, incW = 44, worstW-44-2
	}
	line := func(mark string, r hostRow) string {
		s := mark + pad(r.name, nameW) + "  " + pad(r.state, 8) + "  " + padLeft(r.gpus, 5) + "  " +
			padLeft(r.temp, 4) + "  " + padLeft(r.power, 6) + "  " + padLeft(r.age, 4) + "  "
		switch {
		case r.rank == hostUnreachable:
			s += r.worst // why the link is down, over both columns
		case incW > 0:
			s += pad(r.worst, worstW) + "  " + r.inc
		default:
			s += r.worst
		}
		return cut(s, width)
	}
	head := line("  ", hostRow{rank: hostOK, name: "HOST", state: "STATE", gpus: "GPUS", temp: "TEMP", power: "POWER", age: "AGE",
		worst: "WORST GPU", inc: "LAST INCIDENT"})
	foot := []string{cut("Up/Down select  Enter open the host's view  q quit", width)}
	room := height - 2 - len(foot)
	// The window of hosts holds the selected one.
	from := 0
	if room > 0 && at >= room {
		from = at - room + 1
	}
	body := []string{title, head}
	for i := from; i < len(rows) && i < from+max(room, 0); i++ {
		mark := "  "
		if i == at {
			mark = "> "
		}
		body = append(body, line(mark, rows[i]))
	}
	fs.Lines = finish(body, foot, width, height)
	return fs
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// padLeft cuts s to width runes, aligned right.
func padLeft(s string, width int) string {
	s = cut(s, width)
	return strings.Repeat(" ", width-utf8.RuneCountInString(s)) + s
}

func newHostRow(h HostState, now time.Time) hostRow {
	r := hostRow{name: h.Name, gpus: "-", temp: "-", power: "-", inc: "-", age: "-"}
	if !h.At.IsZero() {
		r.age = ageText(now.Sub(h.At))
	}
	d := h.Doc
	stale := d != nil && now.Sub(h.At) > StaleAfter
	down := d == nil || h.Err != nil || stale
	if down {
		r.rank, r.state = hostUnreachable, hostWords[hostUnreachable]
		switch {
		case h.Err != nil:
			r.worst = strings.TrimPrefix(h.Err.Error(), h.Name+": ")
		case d == nil:
			r.state, r.worst = "WAITING", "connecting"
		default:
			r.state, r.worst = "STALE", "no document for "+ageText(now.Sub(h.At))
		}
		if d == nil {
			return r
		}
	}
	docNow := d.Time
	ok, hottest, havePower := 0, -1.0, false
	power := 0.0
	worst, worstRank := -1, rankOther+1
	for i, g := range d.GPUs {
		rk := rankOf(g, docNow)
		if rk == rankOther {
			ok++
		}
		if rk < worstRank || rk == worstRank && worst >= 0 && g.Action.Name.Drains() && !d.GPUs[worst].Action.Name.Drains() {
			worst, worstRank = i, rk
		}
		if g.State == live.StateAnswering.String() {
			if t, has := g.Reading("temperature_c").Num(); has {
				hottest = max(hottest, t)
			}
			if p, has := g.Reading("power_w").Num(); has {
				power, havePower = power+p, true
			}
		}
	}
	r.gpus = strconv.Itoa(ok) + "/" + strconv.Itoa(len(d.GPUs)+d.Host.GPUsMissing)
	if hottest >= 0 {
		r.temp = strconv.FormatFloat(hottest, 'f', 0, 64) + "C"
	}
	if havePower {
		r.power = strconv.FormatFloat(power, 'f', 0, 64) + "W"
	}
	if in := d.Host.LastIncident; in != nil {
		r.inc = in.Time.In(now.Location()).Format("15:04:05") + " GPU " + strconv.Itoa(in.GPU) + " " + in.Reason
	}
	if down {
		return r // the reason the link is down stays in the worst column
	}
	code, reasons := live.Check(*d)
	drains := false
	for _, g := range d.GPUs {
		drains = drains || g.Action.Name.Drains()
	}
	switch {
	case worstRank == rankFailing:
		r.rank = hostFailing
	case code == live.CheckCritical || drains:
		r.rank = hostCritical
	case code == live.CheckWarning:
		r.rank = hostWarning
	default:
		r.rank = hostOK
	}
	r.state = hostWords[r.rank]
	r.worst = "-"
	switch {
	case worst >= 0 && worstRank < rankOther:
		g := d.GPUs[worst]
		r.worst = "GPU " + strconv.Itoa(g.Index) + " " + gpuWhy(g, worstRank, docNow)
	case len(reasons) > 0:
		r.worst = reasons[0]
	case worst >= 0 && d.GPUs[worst].Action.Name.Drains():
		g := d.GPUs[worst]
		r.worst = "GPU " + strconv.Itoa(g.Index) + " action " + g.Action.Name.String()
	}
	return r
}

// gpuWhy is why a GPU in trouble is: its state (how long hung, and where;
// since when lost; why failing), or its first critical reason, or its
// health verdict; then its repair action.
func gpuWhy(g live.GPUDoc, rank int, now time.Time) string {
	why := ""
	switch {
	case rank == rankFailing:
		why = live.StateText(g, now)
	default:
		if crit, _ := live.CheckGPU(g, now); len(crit) > 0 {
			why = strings.TrimPrefix(crit[0], "GPU "+strconv.Itoa(g.Index)+" ")
		} else if g.Health != nil {
			why = "health " + live.VerdictText(g.Health.Verdict)
		}
	}
	return why + actionText(g)
}

// ageText is a document's age in a few runes: 3s, 12m, 5h, 9d.
func ageText(d time.Duration) string {
	switch d = max(d, 0); {
	case d < 100*time.Second:
		return strconv.Itoa(int(d/time.Second)) + "s"
	case d < 100*time.Minute:
		return strconv.Itoa(int(d/time.Minute)) + "m"
	case d < 100*time.Hour:
		return strconv.Itoa(int(d/time.Hour)) + "h"
	}
	return strconv.Itoa(int(d/(24*time.Hour))) + "d"
}

// RunFleet shows the fleet page of remotes on the terminal until q, Q,
// Esc or Ctrl-C (or ctx ends), then restores the terminal. Each remote
// runs (connects, and again after a failure) for as long as the page is
// up. Up and Down select a host, Enter opens its view.
func RunFleet(ctx context.Context, remotes []*Remote) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for _, r := range remotes {
		go r.Run(ctx)
	}
	return withScreen(func(scr tcell.Screen) error { return fleetLoop(ctx, scr, remotes) })
}

func fleetLoop(ctx context.Context, scr tcell.Screen, remotes []*Remote) error {
	var shown FleetScreen
	sel := ""
	apps := make([]*App, len(remotes)) // each host's view, once opened
	draw := func() {
		hosts := make([]HostState, len(remotes))
		for i, r := range remotes {
			d, at, err := r.Latest()
			hosts[i] = HostState{Name: r.Host(), Doc: d, At: at, Err: err}
		}
		w, h := scr.Size()
		scr.Clear()
		shown = RenderFleet(hosts, time.Now(), w, h, sel)
		for y, line := range shown.Lines {
			for x, r := range []rune(line) {
				scr.SetContent(x, y, r, nil, tcell.StyleDefault)
			}
		}
		scr.Show()
		if i := slices.Index(shown.Order, sel); i < 0 && len(shown.Order) > 0 {
			sel = shown.Order[0]
		}
	}
	t := time.NewTicker(Refresh)
	defer t.Stop()
	for {
		draw()
		events := make(chan tcell.Event, 8)
		quit := make(chan struct{})
		go scr.ChannelEvents(events, quit)
		open := ""
	wait:
		for {
			select {
			case <-ctx.Done():
				close(quit)
				return nil
			case <-t.C:
				draw()
			case ev, ok := <-events:
				if !ok {
					return nil
				}
				switch e := ev.(type) {
				case *tcell.EventKey:
					var done bool
					sel, open, done = onFleetKey(e, shown.Order, sel)
					if done {
						close(quit)
						return nil
					}
					if open != "" {
						break wait
					}
					draw()
				case *tcell.EventResize:
					scr.Sync()
					draw()
				}
			}
		}
		// The host's own view takes the keys until its q or Esc.
		close(quit)
		for range events { // the event goroutine ends, closing events
		}
		i := slices.IndexFunc(remotes, func(r *Remote) bool { return r.Host() == open })
		if apps[i] == nil { // kept, so its charts go on where they left off
			apps[i] = NewApp()
		}
		if err := loop(ctx, scr, remotes[i].Fetch, apps[i]); err != nil || ctx.Err() != nil {
			return err
		}
	}
}

// onFleetKey is what a key does on the fleet page, the hosts shown in
// order and sel selected: select another (Up, Down, Home, End), open
// the selected one's view (Enter: open), or quit (q, Q, Esc, Ctrl-C).
func onFleetKey(e *tcell.EventKey, order []string, sel string) (next, open string, quit bool) {
	i := max(slices.Index(order, sel), 0)
	if len(order) == 0 {
		return sel, "", e.Key() == tcell.KeyCtrlC || e.Key() == tcell.KeyEscape || e.Key() == tcell.KeyRune && (e.Rune() == 'q' || e.Rune() == 'Q')
	}
	switch e.Key() {
	case tcell.KeyCtrlC, tcell.KeyEscape:
		return sel, "", true
	case tcell.KeyRune:
		switch e.Rune() {
		case 'q', 'Q':
			return sel, "", true
		case 'k':
			i--
		case 'j':
			i++
		}
	case tcell.KeyUp:
		i--
	case tcell.KeyDown:
		i++
	case tcell.KeyHome:
		i = 0
	case tcell.KeyEnd:
		i = len(order) - 1
	case tcell.KeyEnter:
		return order[i], order[i], false
	}
	i = min(max(i, 0), len(order)-1)
	return order[i], "", false
}
