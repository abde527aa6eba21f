package report

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// WriteText writes the report for a terminal or a ticket: the incident, what
// was read, the timeline (one line per change, with the GPU's readings at
// that moment), peaks and the precursors found.
func (rep *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	inc := rep.Incident
	if rep.Headline != "" {
		fmt.Fprintf(&b, "Incident: %s, %s\n", fmtTime(inc.Time, rep.Loc), rep.Headline)
		fmt.Fprintf(&b, "Began:    %s\n", inc.What)
	} else {
		fmt.Fprintf(&b, "Incident: %s on %s: %s\n", fmtTime(inc.Time, rep.Loc), rep.subject(), inc.What)
	}
	if rep.Action != "" {
		fmt.Fprintf(&b, "Action:   %s\n", rep.Action)
	}
	fmt.Fprintf(&b, "Window:   %s .. %s (%s before, %s after)\n", fmtTime(rep.From, rep.Loc), fmtTime(rep.To, rep.Loc),
		fmtDur(inc.Time.Sub(rep.From)), fmtDur(rep.To.Sub(inc.Time)))
	fmt.Fprintf(&b, "Log dir:  %s\n", rep.Dir)
	seen := map[int]int{}
	for _, g := range rep.GPUs {
		if g.Board.UUID != "" { // files written before the board line name none, nor those of a GPU stuck at start
			seen[g.Index]++
			fmt.Fprintf(&b, "Board:    %s\n", g.Name())
		}
	}
	for _, g := range rep.GPUs {
		if n := seen[g.Index]; n > 1 {
			fmt.Fprintf(&b, "Note:     GPU %d was %d boards in this window (the indices moved at a restart): each board's rows are its own\n", g.Index, n)
			seen[g.Index] = 0
		}
	}
	for _, r := range rep.Read {
		fmt.Fprintf(&b, "Read:     %s\n", r)
	}
	for _, s := range rep.Skipped {
		fmt.Fprintf(&b, "Skipped:  %s\n", s)
	}
	for _, f := range rep.Files {
		fmt.Fprintf(&b, "%s %s\n", f.label(), f.describe(rep.Loc))
	}

	b.WriteString("\n== Timeline (offset from the incident; values: temp, mem temp, fans speed/target, power/limit, clocks)\n")
	for _, e := range rep.Timeline {
		g := "  -"
		if e.GPU >= 0 {
			g = fmt.Sprintf("%3d", e.GPU)
		}
		line := fmt.Sprintf("%s %9s gpu%s %-8s %s", rep.clock(e.Time), rep.since(e.Time), g, e.Kind, e.What)
		if e.Values != "" {
			line += "  | " + e.Values
		}
		b.WriteString(line + "\n")
	}

	b.WriteString("\n== Peaks in the window\n")
	for _, p := range rep.Peaks {
		fmt.Fprintf(&b, "%s %-20s %-28s at %s (%s)\n", p.name(), p.What, p.Value, rep.clock(p.Time), rep.since(p.Time))
	}

	b.WriteString("\n== Precursors found\n")
	if len(rep.Precursors) == 0 {
		b.WriteString("(none of the known precursors: hot die with slow fans, spurious SwPowerCap, fan spikes, power above the limit, TDP changes, AER errors, health warnings, error counters climbing, hangs, gaps)\n")
	}
	for _, p := range rep.Precursors {
		b.WriteString("- " + p + "\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// offset formats a signed offset from the incident: -25.700s, +0.000s.
func offset(d time.Duration) string {
	sign := "+"
	if d < 0 {
		sign, d = "-", -d
	}
	return sign + strconv.FormatFloat(d.Seconds(), 'f', 3, 64) + "s"
}

// since is t's offset from the incident, as offset writes it.
func (rep *Report) since(t time.Time) string { return offset(t.Sub(rep.Incident.Time)) }

// clockLayout writes a moment in the window: its time of day to the
// millisecond (the header gives the date and the zone).
const clockLayout = "15:04:05.000"

// clock is t in the report's zone, as clockLayout writes it.
func (rep *Report) clock(t time.Time) string { return t.In(rep.Loc).Format(clockLayout) }

// subject names what the incident is about: the board --gpu named, the GPU
// it happened on, or all GPUs.
func (rep *Report) subject() string {
	switch {
	case rep.Board != "":
		return "board " + rep.Board
	case rep.Incident.GPU >= 0:
		return "GPU " + strconv.Itoa(rep.Incident.GPU)
	}
	return "all GPUs"
}

// label is "Snapshot: " or "Follow-up:" (aligned with the header's labels).
func (f IncidentFile) label() string {
	if f.FollowUp != "" {
		return "Follow-up:"
	}
	return "Snapshot: "
}

// describe is the file and what it holds: "crashes/crash-...log (Xid 62:
// ...)", "crashes/crash-...+10s.log (10s after, with every event since)".
func (f IncidentFile) describe(loc *time.Location) string {
	if f.FollowUp != "" {
		return f.Path + " (" + strings.TrimPrefix(f.FollowUp, "+") + " after: every event of the incident since, and the GPU's state then)"
	}
	if f.Reason == "" {
		return f.Path
	}
	return f.Path + " (" + f.Time.In(loc).Format(clockLayout) + ", " + f.Reason + ")"
}
