package report

import (
	"bufio"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
	"github.com/gpu-telemetry/gpu-telemetry/sink"
	"github.com/gpu-telemetry/gpu-telemetry/snapshot"
)

// zoneSlack is the most a UTC offset can be either way (UTC+14 .. UTC-12).
// A CSV is named by its day in the logger's zone, which need not be the
// report's: the name alone places the day only to within this much.
const zoneSlack = 14 * time.Hour

// overlaps reports whether the file for day f.Day can hold rows between from
// and to. A day's file holds that local day's rows; a row written just after
// midnight may still land in the day before, so a day is taken to run until
// 00:01 of the next. The day is first placed from its name alone, widened by
// zoneSlack either way; a file that passes is placed exactly by its first
// row, whose timestamp carries the logger's offset: the file runs from that
// row to the next day's 00:01 in that offset, plus an hour for a DST change
// during the day. This keeps the day before a window out of the read (a
// compressed day is read whole to find that it ends before the window).
func overlaps(f sink.CSVDay, from, to time.Time) bool {
	y, m, d := f.Day.Date()
	start := time.Date(y, m, d, 0, 0, 0, 0, time.UTC).Add(-zoneSlack)
	end := start.Add(24*time.Hour + 2*zoneSlack + time.Minute)
	if start.After(to) || !end.After(from) {
		return false
	}
	first, ok := firstRowTime(f)
	if !ok {
		return true // read it: readWindow says what is wrong with it
	}
	_, off := first.Zone()
	end = time.Date(y, m, d+1, 0, 1, 0, 0, time.FixedZone("", off)).Add(time.Hour)
	return !first.After(to) && end.After(from)
}

// firstRowTime returns the timestamp of the first row of f; ok is false when
// the file cannot be read that far or the row has no timestamp.
func firstRowTime(f sink.CSVDay) (t time.Time, ok bool) {
	br, closer, err := openDay(f)
	if err != nil {
		return t, false
	}
	defer closer()
	if _, _, _, _, err := sink.ReadPreamble(br); err != nil { // the board line and the header
		return t, false
	}
	long := 0
	line, _ := sink.ReadLine(br, &long)
	ts, _, _ := strings.Cut(string(line), ",")
	t, err = parseTime(ts)
	return t, err == nil
}

// boardOf returns the board f's first line names; ok is false for a file
// that has none (written before it was) or cannot be read (err says why
// when it cannot be opened).
func boardOf(f sink.CSVDay) (b sink.Board, ok bool, err error) {
	br, closer, err := openDay(f)
	if err != nil {
		return b, false, err
	}
	defer closer()
	b, ok, _, _, _ = sink.ReadPreamble(br)
	return b, ok, nil
}

// openDay opens f for reading from its start, decompressed, its lines
// bounded (sink.NewLineReader); what is not a regular file is refused.
func openDay(f sink.CSVDay) (*bufio.Reader, func(), error) {
	fh, err := sink.OpenRegular(f.Path)
	if err != nil {
		return nil, nil, err
	}
	var r io.Reader = fh
	if f.GZ {
		zr, err := gzip.NewReader(fh)
		if err != nil {
			fh.Close()
			return nil, nil, err
		}
		r = zr
	}
	return sink.NewLineReader(r), func() { fh.Close() }, nil
}

// boardIs reports whether f holds the rows of the board with uuid: its
// name names that board (sink.BoardID), and so does its first line.
func boardIs(f sink.CSVDay, uuid string) bool {
	if f.Board != sink.BoardID(uuid) {
		return false
	}
	b, ok, err := boardOf(f)
	if err != nil {
		return true // read it: reading says what is wrong with it (a file the user may not read ends the report)
	}
	return ok && strings.EqualFold(b.UUID, uuid)
}

// pickBoard resolves --gpu given as a UUID (or a prefix of it) or a PCI bus
// id against the boards the CSVs' first lines name, and returns the UUID of
// the one board it names. Naming none, or more than one (a shared prefix,
// or a bus id where boards were swapped), is an error that lists them.
func pickBoard(s string, files []sink.CSVDay) (string, error) {
	sel, ok := reading.ParseSelector(s)
	if !ok || sel.IsIndex() {
		return "", fmt.Errorf("--gpu %s: not a GPU index, UUID (or a prefix of 4 or more characters) or PCI bus id", s)
	}
	var found []sink.Board
	var denied error // a file whose board the user may not read
	for _, f := range files {
		b, ok, err := boardOf(f)
		if errors.Is(err, fs.ErrPermission) && denied == nil {
			denied = unreadable(filepath.Base(f.Path), f.Path, err)
		}
		if !ok || !sel.Matches(b.UUID, b.Bus) || slices.ContainsFunc(found, func(x sink.Board) bool { return x.UUID == b.UUID }) {
			continue
		}
		if sel.Exact(b.UUID) {
			return b.UUID, nil
		}
		found = append(found, b)
	}
	switch {
	case len(found) == 0 && denied != nil:
		return "", denied // never "no such board" from files that could not be read
	case len(found) == 0:
		return "", fmt.Errorf("--gpu %s: no board with this UUID or PCI bus id in the CSVs (their first lines name the boards)", s)
	case len(found) == 1:
		return found[0].UUID, nil
	}
	var names []string
	for _, b := range found {
		names = append(names, fmt.Sprintf("%s (GPU %d, bus %s)", b.UUID, b.Index, b.Bus))
	}
	return "", fmt.Errorf("--gpu %s: names %d boards: %s; give more of the UUID", s, len(found), strings.Join(names, ", "))
}

// eventLogs returns events.log and its rotated copies (lumberjack names
// them events-<time>.log), oldest first, and, each named with why, those it
// leaves out because they are no regular file (notRegular): a FIFO (opening
// one would wait forever for a writer), a directory, a dangling symbolic
// link or a loop of them. They are looked at with stat, never opened. A
// file it may not look at (permission) is an error, not a log without
// events, and so is an events.log that cannot be looked at at all.
func eventLogs(dir string) (logs, skipped []string, err error) {
	rotated, _ := filepath.Glob(filepath.Join(dir, "events-*.log"))
	sort.Strings(rotated) // the time in the name sorts
	p := filepath.Join(dir, "events.log")
	if _, err := os.Lstat(p); err == nil {
		rotated = append(rotated, p)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, nil, unreadable("events.log", p, err)
	}
	for _, p := range rotated {
		why, err := notRegular(p)
		switch {
		case err != nil:
			return nil, nil, unreadable(filepath.Base(p), p, err)
		case why != "":
			skipped = append(skipped, filepath.Base(p)+" ("+why+"): not read")
		default:
			logs = append(logs, p)
		}
	}
	return logs, skipped, nil
}

// notRegular says why path, followed through symbolic links, is no regular
// file to read ("" when it is one): a FIFO, a socket, a device, a
// directory, a dangling symbolic link, a loop of them. err is set when it
// cannot be looked at for another reason (permission: unreadable). It only
// stats path: a FIFO is never opened.
func notRegular(path string) (why string, err error) {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "a dangling symbolic link", nil // listed, so its name is there
	case errors.Is(err, syscall.ELOOP):
		return "a loop of symbolic links", nil
	case err != nil:
		return "", err
	}
	switch m := fi.Mode(); {
	case m.IsRegular():
		return "", nil
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO, not a regular file", nil
	case m.IsDir():
		return "a directory", nil
	case m&fs.ModeSocket != 0:
		return "a socket, not a regular file", nil
	case m&fs.ModeDevice != 0:
		return "a device, not a regular file", nil
	default:
		return "not a regular file", nil
	}
}

// snapshotFile is one crash snapshot on disk.
type snapshotFile struct {
	path string
	snapshot.Name
}

// listSnapshots returns the crash snapshots in dir/crashes, oldest first;
// no crashes/ is none, one it cannot read an error (unreadable).
func listSnapshots(open opener, dir string, loc *time.Location) ([]snapshotFile, error) {
	ents, err := readCrashes(open, dir)
	if err != nil {
		return nil, err
	}
	var out []snapshotFile
	for _, e := range ents {
		if n, ok := snapshot.ParseName(e.Name(), loc); ok && n.Kind == "crash" {
			out = append(out, snapshotFile{filepath.Join(dir, "crashes", e.Name()), n})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Time.Before(out[j].Time) })
	return out, nil
}
