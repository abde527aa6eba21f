package snapshot

import (
	"strings"
	"time"
)

// CrashRequest is what the caller knows at the moment of a crash. Build it
// from memory: the Manager calls the build function synchronously, so the
// rows are those of that moment, not what a possibly lagging CSV holds.
type CrashRequest struct {
	Header    Header
	CSVHeader string    // the CSV's header line
	Rows      []string  // that GPU's last rows as CSV lines, oldest first; the last 50 are kept
	Extra     []Section // optional sections, e.g. running processes, written after the diagnostics

	early  []Section // sections read before anything else (the GPU's power state), shown after the rows
	events Section   // the incident's events up to this one, shown before the rows
}

// Section is one titled block of a snapshot.
type Section struct {
	Title string
	Body  string
}

// crashTitle is the seed's title for a crash snapshot.
const crashTitle = "GPU CRASH DETECTED"

// renderCrash renders a crash snapshot. With diags nil it is stage 1: the
// header, the rows and a note that the diagnostics are being collected (for
// at most limit); otherwise stage 2, with the diagnostics.
func renderCrash(req *CrashRequest, diags []Section, limit time.Duration) []byte {
	var b strings.Builder
	writeHeader(&b, &req.Header)
	if req.events.Title != "" {
		b.WriteString("=== " + req.events.Title + " ===\n" + req.events.Body + "\n")
	}
	writeRows(&b, req.CSVHeader, req.Rows)
	for _, s := range req.early {
		writeSection(&b, s)
	}
	if diags == nil {
		writeSection(&b, Section{"Diagnostics", "(being collected: dmesg, lspci, setpci, nvidia-smi, modules, memory, load;\n" +
			" this file is replaced by the full version within " + limit.String() + ")"})
	}
	for _, s := range diags {
		writeSection(&b, s)
	}
	for _, s := range req.Extra {
		writeSection(&b, s)
	}
	if diags == nil {
		b.WriteString("\n=== End of snapshot (stage 1 of 2: diagnostics pending) ===\n")
	} else {
		b.WriteString("\n=== End of snapshot ===\n")
	}
	return []byte(b.String())
}

// writeRows writes the CSV header and the last 50 rows, indented by one
// space as in the seed.
func writeRows(b *strings.Builder, csvHeader string, rows []string) {
	b.WriteString("=== Last 50 telemetry readings ===\n")
	if len(rows) > lastRowsKept {
		rows = rows[len(rows)-lastRowsKept:]
	}
	if len(rows) == 0 {
		b.WriteString("(no readings yet)\n")
		return
	}
	if csvHeader != "" {
		b.WriteString(" " + strings.TrimRight(csvHeader, "\r\n") + "\n")
	}
	for _, r := range rows {
		b.WriteString(" " + strings.TrimRight(r, "\r\n") + "\n")
	}
}

// writeSection writes "=== Title ===" and the body, ending in a newline.
func writeSection(b *strings.Builder, s Section) {
	b.WriteString("\n=== " + s.Title + " ===\n")
	body := s.Body
	if body == "" {
		body = "(empty)"
	}
	b.WriteString(body)
	if !strings.HasSuffix(body, "\n") {
		b.WriteByte('\n')
	}
}
