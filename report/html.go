package report

import (
	"bytes"
	"fmt"
	"html"
	"io"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/gpu-telemetry/gpu-telemetry/sink"
)

// WriteHTMLFile writes the HTML form of the report to path through
// sink.Atomic (the one atomic-write helper: temp file, fsync, rename), so a
// reader never sees half a page; its links to the log dir's files are
// relative to path's directory.
func (rep *Report) WriteHTMLFile(path string) error {
	rep.htmlDir = filepath.Dir(path)
	defer func() { rep.htmlDir = "" }()
	var b bytes.Buffer
	if err := rep.WriteHTML(&b); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return sink.Atomic{Perm: 0o644}.Replace(path, b.Bytes())
}

// link is the path to a file of the log dir as the page links it: relative
// to the page's own directory when WriteHTMLFile knows it, else the log dir
// as given joined with the file.
func (rep *Report) link(rel string) string {
	p := filepath.Join(rep.Dir, rel)
	if rep.htmlDir == "" {
		return p
	}
	abs, err1 := filepath.Abs(p)
	page, err2 := filepath.Abs(rep.htmlDir)
	if err1 != nil || err2 != nil {
		return p
	}
	if r, err := filepath.Rel(page, abs); err == nil {
		return r
	}
	return abs
}

// WriteHTML writes one self-contained page (XHTML-compatible: it parses as
// XML): the incident, SVG charts per GPU on one shared time axis, the
// timeline as a table, peaks and precursors. Nothing is loaded from anywhere.
func (rep *Report) WriteHTML(w io.Writer) error {
	var b strings.Builder
	esc := html.EscapeString
	inc := rep.Incident
	what := inc.What
	if rep.Headline != "" {
		what = rep.Headline
	}
	title := "gpu-telemetry report: " + what + " at " + fmtTime(inc.Time, rep.Loc)
	b.WriteString("<!DOCTYPE html>\n<html xmlns=\"http://www.w3.org/1999/xhtml\" lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"/>\n")
	b.WriteString("<title>" + esc(title) + "</title>\n<style>\n" + css + "</style>\n</head>\n<body>\n")
	b.WriteString("<h1>" + esc(title) + "</h1>\n<p>")
	b.WriteString(esc(fmt.Sprintf("Incident on %s, began with %s. Window %s .. %s. Log dir %s.", rep.subject(), inc.What, fmtTime(rep.From, rep.Loc), fmtTime(rep.To, rep.Loc), rep.Dir)))
	b.WriteString("</p>\n")
	if rep.Action != "" {
		b.WriteString("<p>" + esc("Repair action: "+rep.Action) + "</p>\n")
	}
	if len(rep.Files) > 0 {
		b.WriteString("<h2>Snapshots of this incident</h2>\n<ul class=\"files\">\n")
		for _, f := range rep.Files {
			href := (&url.URL{Path: filepath.ToSlash(rep.link(f.Path))}).String()
			b.WriteString("<li>" + esc(strings.TrimSpace(f.label())) + " <a href=\"" + esc(href) + "\">" + esc(f.Path) + "</a> " +
				esc(strings.TrimPrefix(f.describe(rep.Loc), f.Path+" ")) + "</li>\n")
		}
		b.WriteString("</ul>\n")
	}
	if len(rep.Skipped) > 0 {
		b.WriteString("<ul class=\"skipped\">\n")
		for _, s := range rep.Skipped {
			b.WriteString("<li>Skipped: " + esc(s) + "</li>\n")
		}
		b.WriteString("</ul>\n")
	}
	if len(rep.Precursors) > 0 {
		b.WriteString("<h2>Precursors found</h2>\n<ul>\n")
		for _, p := range rep.Precursors {
			b.WriteString("<li>" + esc(p) + "</li>\n")
		}
		b.WriteString("</ul>\n")
	}
	b.WriteString(legendHTML)
	for _, g := range rep.GPUs {
		b.WriteString("<h2>" + esc(g.Name()) + "</h2>\n")
		rep.writeSVG(&b, g)
	}

	b.WriteString("<h2>Timeline</h2>\n<div class=\"scroll\"><table>\n<tr><th>time</th><th>offset</th><th>GPU</th><th>kind</th><th>what</th><th>values</th></tr>\n")
	for _, e := range rep.Timeline {
		g := "-"
		if e.GPU >= 0 {
			g = strconv.Itoa(e.GPU)
		}
		cls := ""
		if e.Marker != "" {
			cls = " class=\"m-" + e.Marker + "\""
		}
		fmt.Fprintf(&b, "<tr%s><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td></tr>\n", cls,
			esc(rep.clock(e.Time)), esc(rep.since(e.Time)), g, esc(string(e.Kind)), esc(e.What), esc(e.Values))
	}
	b.WriteString("</table></div>\n<h2>Peaks</h2>\n<div class=\"scroll\"><table>\n<tr><th>GPU</th><th>reading</th><th>value</th><th>time</th><th>offset</th></tr>\n")
	for _, p := range rep.Peaks {
		fmt.Fprintf(&b, "<tr><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td></tr>\n", esc(strings.TrimPrefix(p.name(), "gpu")), esc(p.What), esc(p.Value),
			esc(rep.clock(p.Time)), esc(rep.since(p.Time)))
	}
	b.WriteString("</table></div>\n<p class=\"foot\">Read: " + esc(strings.Join(rep.Read, "; ")) + "</p>\n</body>\n</html>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

const css = `body { font-family: sans-serif; margin: 16px; color: #222; }
h1 { font-size: 20px; } h2 { font-size: 17px; margin-top: 22px; }
table { border-collapse: collapse; font-size: 12px; font-family: monospace; }
td, th { border: 1px solid #ccc; padding: 2px 6px; text-align: left; vertical-align: top; }
tr.m-xid td, tr.m-incident td { background: #fde0e0; }
tr.m-lost td, tr.m-hang td { background: #f3d9f7; }
tr.m-aer td { background: #fff1cc; }
tr.m-flag td { background: #eef4ff; }
.skipped { color: #a00; }
.legend span { display: inline-block; margin-right: 14px; font-size: 13px; }
.foot { color: #666; font-size: 12px; }
svg { display: block; max-width: 100%; height: auto; }
.scroll { overflow-x: auto; max-width: 100%; }
`

var legendHTML = func() string {
	var b strings.Builder
	b.WriteString("<p class=\"legend\">Markers: ")
	for _, m := range markerColors {
		fmt.Fprintf(&b, "<span><svg width=\"14\" height=\"12\" style=\"display:inline\"><rect x=\"5\" y=\"0\" width=\"3\" height=\"12\" fill=\"%s\"/></svg> %s</span>", m.color, html.EscapeString(m.label))
	}
	b.WriteString("<span>Throttle reasons are bands in the bottom panel. Gaps in the data are gaps in the lines.</span></p>\n")
	return b.String()
}()
