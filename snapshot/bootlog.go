package snapshot

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
	"github.com/gpu-telemetry/gpu-telemetry/runstate"
	"github.com/gpu-telemetry/gpu-telemetry/sink"
)

// pstoreDirs are where crash records of the previous boot are kept, under
// Config.HostRoot: the pstore file system, and where systemd-pstore moves
// them at boot.
var pstoreDirs = []string{"/sys/fs/pstore", "/var/lib/systemd/pstore"}

// Bounds of a boot log, whatever the journal or pstore hold.
const (
	bootRows           = 50       // last rows per GPU
	bootJournalLines   = 200      // last lines of the previous boot's kernel log
	bootJournalMatches = 500      // last NVIDIA/GPU/PCIe lines of it
	bootIncidents      = 20       // last incident lines of events.log
	pstoreFileMax      = 64 << 10 // bytes shown per pstore record (its end)
	pstoreTotalMax     = 512 << 10
	pstoreFilesMax     = 20
	eventsTailBytes    = 1 << 20
	pstoreRecentSlack  = time.Hour // records up to this long before the previous run started still count
)

// BootConfig says what WriteBootLog collects.
type BootConfig struct {
	Now        time.Time         // this run's start: rows and events after it are this run's
	Prev       runstate.Previous // what runstate.Begin found
	Host       reading.Identity  // this host and boot (a field "" when unknown)
	PstoreDirs []string          // nil means pstoreDirs under Config.HostRoot
	JournalDir string            // given to journalctl as --directory (tests point it at a fake journal); "" reads the system's
	// Missing says each GPU missing at this start (the GPU_MISSING lines'
	// detail): a board that did not come back is often why the run ended.
	Missing []string
}

// BootLog is what WriteBootLog wrote, for the events.log line.
type BootLog struct {
	Path      string
	SameBoot  bool                  // the previous run ran in this boot (killed, not a host crash)
	LastRow   time.Time             // the newest row of any GPU before this run (zero when none)
	GapPerGPU map[int]time.Duration // per GPU index with rows: the gap from its newest board's last row to this run's start

	at             time.Time // BootConfig.Now
	prevBoot, boot string    // the previous run's boot id and this one's
}

// bootLogPattern picks the previous boot's kernel lines worth reading first:
// the NVIDIA driver, Xids, GPUs, PCIe AER and bus errors.
var bootLogPattern = regexp.MustCompile(`(?i)NVRM|Xid|nvidia|AER|GPU|pcieport|PCIe Bus Error|fallen off`)

// WriteBootLog collects the evidence of an unclean stop and writes it to
// crashes/boot-<time>.log: the last rows per GPU and the gap to now, the
// previous boot's kernel log (when the host went down), pstore records and
// the last incidents in events.log; what is missing is said in the file.
// Its commands run as the snapshots' do (Config.Runner, CommandTimeout), so
// a missing program is logged once, whichever runs it first. Run it off the
// start-up path.
func (m *Manager) WriteBootLog(ctx context.Context, c BootConfig) (BootLog, error) {
	if c.PstoreDirs == nil {
		for _, d := range pstoreDirs {
			c.PstoreDirs = append(c.PstoreDirs, filepath.Join(m.cfg.HostRoot, d))
		}
	}
	ps := c.Prev.State
	res := BootLog{SameBoot: c.Host.BootID != "" && c.Host.BootID == ps.BootID, GapPerGPU: map[int]time.Duration{},
		at: c.Now, prevBoot: ps.BootID, boot: c.Host.BootID}
	started := "unknown"
	if !ps.Started.IsZero() {
		started = ps.Started.Format(time.RFC3339Nano)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "=== UNCLEAN STOP OF THE PREVIOUS RUN ===\nTime: %s\nHost: %s (machine id %s)\nPrevious run: started %s, pid %d, boot %s\nThis boot: %s\n",
		c.Now.Format(time.RFC3339Nano), orUnknown(c.Host.Host), orUnknown(c.Host.MachineID), started, ps.PID, orUnknown(ps.BootID), orUnknown(c.Host.BootID))
	switch {
	case c.Host.BootID == "" || ps.BootID == "":
		b.WriteString("Cause: unknown (a boot id is missing): the host went down, or the logger was killed\n")
	case res.SameBoot:
		b.WriteString("Cause: same boot: the logger was killed (SIGKILL, OOM killer, a crash) or stopped without its clean exit; the host stayed up\n")
	default:
		b.WriteString("Cause: a different boot: the host went down while the logger ran (hang and reset, power cut, kernel panic, watchdog)\n")
	}

	if len(c.Missing) > 0 {
		b.WriteString("\n=== GPUs missing at this start ===\n" + strings.Join(c.Missing, "\n") + "\n")
	}

	rows := lastRowsBefore(m.cfg.Dir, c.Now, bootRows)
	b.WriteString("\n=== Last row per GPU (gap to this start) ===\n")
	if len(rows) == 0 {
		b.WriteString("(no CSV files)\n")
	}
	for _, g := range rows {
		if g.last.IsZero() {
			fmt.Fprintf(&b, "%s: no rows before this start\n", g.name())
			continue
		}
		gap := c.Now.Sub(g.last)
		if was, ok := res.GapPerGPU[g.gpu]; !ok || gap < was {
			res.GapPerGPU[g.gpu] = gap // the index's newest board
		}
		if g.last.After(res.LastRow) {
			res.LastRow = g.last
		}
		fmt.Fprintf(&b, "%s: last row %s, gap %s\n", g.name(), g.last.Format(sink.TimestampLayout), gap.Round(time.Millisecond))
	}
	for _, g := range rows { // at most bootRows (= lastRowsKept) each
		b.WriteString("\n")
		writeTail(&b, fmt.Sprintf("%s: last %d rows (%s)", g.name(), bootRows, strings.Join(g.sources, ", ")), "(none)", g.header, g.rows, g.notes...)
	}

	b.WriteString("\n=== Previous boot's kernel log (journalctl -k -b -1): NVIDIA, GPU and PCIe lines ===\n")
	if res.SameBoot {
		b.WriteString("(not collected: the previous run was in this boot; its kernel lines are in dmesg and in the crash snapshots, and those logged after the last record it read (kmsg_seq in run-state) are replayed into events.log, marked backlog=true)\n")
	} else {
		var dir []string
		if c.JournalDir != "" {
			dir = []string{"--directory", c.JournalDir}
		}
		journal := runJob(ctx, m.cfg.CommandTimeout, func(ctx context.Context) ([]byte, error) {
			return kernelJournal(ctx, m.cfg.Runner, "-1", dir...)
		})
		b.WriteString(filtered(journal, bootLogPattern.MatchString, bootJournalMatches))
		writeSection(&b, Section{"Previous boot's kernel log: last 200 lines", filtered(journal, nil, bootJournalLines)})
	}
	data := writeEnd(&b, []Section{
		{"pstore records (kernel crash records of the previous boot)", pstoreRecords(c.PstoreDirs, ps.Started)},
		{"Last incidents in events.log (before this start)", lastIncidents(filepath.Join(m.cfg.Dir, "events.log"), c.Now)},
	}, "End of boot log")
	var err error
	res.Path, err = SaveCrashFile(m.cfg.Dir, "boot-"+c.Now.Format(stampLayout), ".log", data)
	return res, err
}

func orUnknown(s string) string { return cmp.Or(s, "unknown") }

// pstoreRecords lists the records in dirs newer than since (minus a slack),
// each with the end of its text, within the size bounds.
func pstoreRecords(dirs []string, since time.Time) string {
	type rec struct {
		path string
		fs.FileInfo
	}
	var b strings.Builder
	var recs []rec
	for _, d := range dirs {
		if _, err := os.Stat(d); err != nil {
			fmt.Fprintf(&b, "(%s: %s)\n", d, fileErr(err))
			continue
		}
		old := 0
		filepath.WalkDir(d, func(p string, e fs.DirEntry, err error) error {
			if err != nil || e.IsDir() {
				return nil
			}
			switch fi, err := e.Info(); {
			case err != nil || !fi.Mode().IsRegular():
			case !since.IsZero() && fi.ModTime().Before(since.Add(-pstoreRecentSlack)):
				old++
			default:
				recs = append(recs, rec{p, fi})
			}
			return nil
		})
		if old > 0 {
			fmt.Fprintf(&b, "(%s: %d older record(s) from before the previous run, not shown)\n", d, old)
		}
	}
	slices.SortFunc(recs, func(a, b rec) int { return b.ModTime().Compare(a.ModTime()) })
	if len(recs) == 0 {
		b.WriteString("(no recent records)\n")
		return b.String()
	}
	total := 0
	for i, r := range recs {
		if i >= pstoreFilesMax || total >= pstoreTotalMax {
			fmt.Fprintf(&b, "(%d more record(s) not shown)\n", len(recs)-i)
			break
		}
		fmt.Fprintf(&b, "--- %s (%d bytes, %s) ---\n", r.path, r.Size(), r.ModTime().Format(time.RFC3339))
		data, err := sink.ReadBounded(sink.OpenRegular, r.path, pstoreFileMax, true)
		if err != nil {
			fmt.Fprintf(&b, "(unreadable: %v)\n", err)
			continue
		}
		if int64(len(data)) < r.Size() {
			fmt.Fprintf(&b, "(last %d bytes)\n", len(data))
		}
		total += len(data)
		b.Write(data)
		if len(data) > 0 && data[len(data)-1] != '\n' {
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// lastIncidents returns the last lines of events.log written before t
// that tell of trouble: incidents and notable lines (sink.ParsedLine.Class).
func lastIncidents(path string, t time.Time) string {
	data, err := sink.ReadBounded(sink.OpenRegular, path, eventsTailBytes, true) // a FIFO is refused, never waited on
	if err != nil {
		return "(events.log: " + fileErr(err) + ")\n"
	}
	var keep []string
	long := 0
	br := sink.NewLineReader(bytes.NewReader(data))
	for {
		b, err := sink.ReadLine(br, &long)
		line := strings.TrimRight(string(b), "\r\n")
		if e, ok := sink.ParseEventLine(line); ok && e.Time.Before(t) && e.Class() != sink.EventRoutine {
			keep = append(keep, line)
		}
		if err != nil {
			break
		}
	}
	if len(keep) > bootIncidents {
		keep = keep[len(keep)-bootIncidents:]
	}
	out := strings.Join(keep, "\n") + "\n"
	if len(keep) == 0 {
		out = "(none)\n"
	}
	if long > 0 {
		out += fmt.Sprintf("(%d line(s) of events.log over %d KiB skipped unread)\n", long, sink.MaxLine>>10)
	}
	return out
}

// Event is the UNCLEAN_STOP events.log line for this boot log, at this
// run's start, of no GPU (the caller adds what else it knows).
func (l BootLog) Event() sink.EventLine {
	kv := sink.KV("prev_boot", orUnknown(l.prevBoot), "boot", orUnknown(l.boot),
		"same_boot", strconv.FormatBool(l.SameBoot))
	if !l.LastRow.IsZero() {
		kv = append(kv, sink.Field{Key: "last_row", Value: l.LastRow.Format(sink.TimestampLayout)})
	}
	for _, g := range slices.Sorted(maps.Keys(l.GapPerGPU)) {
		kv = append(kv, sink.Field{Key: "gap_gpu" + strconv.Itoa(g), Value: l.GapPerGPU[g].Round(time.Millisecond).String()})
	}
	if l.Path != "" {
		kv = append(kv, sink.Field{Key: "file", Value: filepath.Join("crashes", filepath.Base(l.Path))})
	}
	return sink.EventLine{Time: l.at, GPU: -1, Source: "start", Type: sink.TypeUncleanStop, Fields: kv}
}
