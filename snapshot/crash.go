package snapshot

import (
	"cmp"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// CrashRequest is one crash snapshot, complete: the decision that accepted
// it and what the caller holds in memory at the moment of the crash (not what
// a possibly lagging CSV holds). The Manager adds the diagnostics.
type CrashRequest struct {
	Decision  Decision // from Decide, accepted
	Header    Header
	CSVHeader string    // the CSV's header line
	Rows      []string  // that GPU's last rows as CSV lines, oldest first; the last 50 are kept
	Extra     []Section // optional sections, e.g. running processes, written after the diagnostics
}

// Section is one titled block of a snapshot.
type Section struct {
	Title string
	Body  string
}

// crashTitle is gpu-telemetry-deep.py's title for a crash snapshot.
const crashTitle = "GPU CRASH DETECTED"

// Crash writes the crash snapshot of req, whose Decision Decide accepted
// (hand each decision once), in the background. It reports false when it
// writes nothing: a decision not accepted, or a request after Close (counted
// in snapshots_refused_at_shutdown). The Manager sets the header's GPUIndex,
// Suppressed and Headline, and Title and Time when they are empty.
func (m *Manager) Crash(req CrashRequest) bool {
	d := req.Decision
	if !d.Accepted || d.inc == nil {
		return false
	}
	if !m.hand() {
		m.dropped(d, "asked for after the snapshot writer closed")
		return false
	}
	req.Header.fill(d.gpu, d.Suppressed, crashTitle, d.at)
	req.Header.Headline = gpuHeadline(d.gpu, d.Headline)
	go m.crash(&req, time.Now()) // the follow-ups' offsets count from now, on the monotonic clock
	return true
}

// crash writes one snapshot: stage 1, stage 2, then, for the snapshot that
// began an incident, the incident's follow-ups; they are taken even when
// this snapshot could not be written, as an escalation's may be.
func (m *Manager) crash(req *CrashRequest, start time.Time) {
	defer m.wg.Done()
	d := req.Decision
	gpu, inc := d.gpu, d.inc
	if !d.Escalation { // Decide set the context of the incident d began, once
		defer inc.stopFollow(nil)
	}
	// Before anything that could wake the GPU from runtime suspend.
	early := []Section{m.powerState(req.Header.BusID)}
	m.flush(gpu)

	t0 := time.Now()
	name := filepath.Join(m.crashDir, d.base+".log")
	path := m.save("crash", gpu, 1, m.crashDir, d.base,
		renderCrash(req, m.incidentEvents(inc, d.idx), early, nil, m.cfg.DiagnosticsTimeout), t0, crashesWritten)
	if path == "" { // save counted and logged the failure
		m.unname(d)
	} else {
		m.mu.Lock()
		inc.wrote(d.idx, filepath.Base(path))
		inc.onDisk = true
		if inc.newest == name {
			inc.newest = path
		}
		m.mu.Unlock()

		diags := m.diagnose(req.Header.BusID, false)
		// The events that came while the diagnostics ran are listed too.
		if err := m.files.Replace(path, renderCrash(req, m.incidentEvents(inc, d.idx), early, diags, 0)); err != nil {
			m.record("crash", gpu, 2, "", t0, err, nil)
		} else {
			m.record("crash", gpu, 2, path, t0, nil, crashesCompleted)
		}
	}
	if !d.Escalation {
		m.followUps(inc.follow, gpu, cmp.Or(path, name), &req.Header, start, inc)
	}
}

// incidentEvents is inc.eventsSection under the lock.
func (m *Manager) incidentEvents(inc *incident, idx int) Section {
	m.mu.Lock()
	defer m.mu.Unlock()
	return inc.eventsSection(idx)
}

// gpuHeadline is the headline with the GPU it is about: "GPU 0: ...".
func gpuHeadline(gpu int, h string) string { return "GPU " + strconv.Itoa(gpu) + ": " + h }

// fill sets what the Manager owns in a header, and the title and time the
// caller left empty.
func (h *Header) fill(gpu int, suppressed uint64, title string, now time.Time) {
	h.GPUIndex, h.Suppressed, h.Title = gpu, suppressed, cmp.Or(h.Title, title)
	if h.Time.IsZero() {
		h.Time = now
	}
}

// renderCrash renders a crash snapshot: the header, the incident's events, the
// rows, early, then with diags nil (stage 1) a note that the diagnostics are
// being collected (for at most limit), else (stage 2) diags; then req.Extra.
func renderCrash(req *CrashRequest, events Section, early, diags []Section, limit time.Duration) []byte {
	var pending []Section
	end := "End of snapshot"
	if diags == nil {
		pending = []Section{{"Diagnostics", "(being collected: dmesg, lspci, setpci, nvidia-smi, modules, memory, load;\n" +
			" this file is replaced by the full version within " + limit.String() + ")"}}
		end += " (stage 1 of 2: diagnostics pending)"
	}
	return render(&req.Header, events, req.CSVHeader, req.Rows, slices.Concat(early, pending, diags, req.Extra), end)
}

// render writes a snapshot: the header, lead (when titled), the last rows,
// the sections, and the end line.
func render(h *Header, lead Section, csvHeader string, rows []string, sections []Section, end string) []byte {
	var b strings.Builder
	writeHeader(&b, h)
	if lead.Title != "" {
		b.WriteString("=== " + lead.Title + " ===\n" + lead.Body + "\n")
	}
	writeTail(&b, "Last 50 telemetry readings", "(no readings yet)", csvHeader, rows)
	return writeEnd(&b, sections, end)
}

// writeTail writes the title, the notes, and the CSV header and the last 50
// rows (or none when there are no rows), indented by one space as
// gpu-telemetry-deep.py wrote its tail of the CSV.
func writeTail(b *strings.Builder, title, none, csvHeader string, rows []string, notes ...string) {
	b.WriteString("=== " + title + " ===\n")
	for _, n := range notes {
		b.WriteString("(" + n + ")\n")
	}
	if len(rows) > lastRowsKept {
		rows = rows[len(rows)-lastRowsKept:]
	}
	if len(rows) == 0 {
		b.WriteString(none + "\n")
		return
	}
	if csvHeader != "" {
		b.WriteString(" " + strings.TrimRight(csvHeader, "\r\n") + "\n")
	}
	for _, r := range rows {
		b.WriteString(" " + strings.TrimRight(r, "\r\n") + "\n")
	}
}

// writeEnd writes the sections and the end line, and returns the file.
func writeEnd(b *strings.Builder, sections []Section, end string) []byte {
	for _, s := range sections {
		writeSection(b, s)
	}
	b.WriteString("\n=== " + end + " ===\n")
	return []byte(b.String())
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
