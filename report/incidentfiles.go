package report

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/snapshot"
)

// IncidentFile is one file the logger wrote for the incident: a crash
// snapshot (the first, and each escalation to a worse stage) or a follow-up.
type IncidentFile struct {
	Path     string // under the log dir: crashes/crash-...log
	FollowUp string // "+10s" for a follow-up; empty for a crash snapshot
	Time     time.Time
	Reason   string // a crash snapshot's Reason line
	headline string
	action   string // a crash snapshot's Action line: the GPU's repair action then
}

// incidentFiles returns the crash snapshots and follow-ups of the incident
// on gpu that began at start: those of that GPU named from start to the end
// of the cooldown window (mergeWindow) after it, oldest first, and the
// headline of the last snapshot that has one (the incident named by its
// worst events). A crashes/ or snapshot it cannot read is an error
// (unreadable).
func incidentFiles(o Options, gpu int, start time.Time) ([]IncidentFile, string, error) {
	dir, loc := o.Dir, o.Loc
	ents, err := readCrashes(o.openDir, dir)
	if err != nil {
		return nil, "", err
	}
	// Names carry the time to the millisecond; the incident's time may be
	// the event's receipt, a moment before the snapshot was named.
	from, to := start.Add(-time.Second), start.Add(mergeWindow)
	var out []IncidentFile
	for _, e := range ents {
		name, follow := e.Name(), ""
		if inc, off, ok := snapshot.ParseFollowUpName(name); ok {
			name, follow = inc, off
		}
		n, ok := snapshot.ParseName(name, loc)
		if !ok || n.Kind != "crash" || n.GPU != gpu || n.Time.Before(from) || n.Time.After(to) {
			continue
		}
		f := IncidentFile{Path: filepath.Join("crashes", e.Name()), FollowUp: follow, Time: n.Time}
		if d, err := time.ParseDuration(strings.TrimPrefix(follow, "+")); err == nil {
			f.Time = n.Time.Add(d) // when it was taken: after the snapshots before it
		}
		h, ok, err := readHeader(o.openFile, filepath.Join(dir, "crashes", e.Name()))
		if err != nil {
			return nil, "", err
		}
		if ok {
			f.Reason, f.headline, f.action = h.Reason, h.Headline, h.Action
			if follow == "" {
				f.Time = h.Time
			}
		}
		out = append(out, f)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if !out[i].Time.Equal(out[j].Time) {
			return out[i].Time.Before(out[j].Time)
		}
		return out[i].Path < out[j].Path
	})
	headline := ""
	for _, f := range out {
		if f.FollowUp == "" && f.headline != "" {
			headline = f.headline
		}
	}
	return out, headline, nil
}

// readCrashes lists dir/crashes: nothing when there is none, an error
// (unreadable) when it cannot be read.
func readCrashes(open opener, dir string) ([]os.DirEntry, error) {
	p := filepath.Join(dir, "crashes")
	f, err := open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, unreadable("crashes/", p, err)
	}
	defer f.Close()
	ents, err := f.ReadDir(-1)
	if err != nil {
		return nil, unreadable("crashes/", p, err)
	}
	return ents, nil
}

// maxHeaderBytes bounds what is read of a crash snapshot for its header
// (snapshot.ParseHeader reads its first 20 lines, under 2 KiB): a snapshot
// is read for its header only, however big the file.
const maxHeaderBytes = 64 << 10

// readHeader reads the header of the crash snapshot at path; a snapshot it
// cannot open is an error (unreadable), one without a header ok false.
func readHeader(open opener, path string) (h snapshot.Header, ok bool, err error) {
	f, err := open(path)
	if err != nil {
		return h, false, unreadable(filepath.Join("crashes", filepath.Base(path)), path, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxHeaderBytes))
	if err != nil {
		return h, false, unreadable(filepath.Join("crashes", filepath.Base(path)), path, err)
	}
	h, ok = snapshot.ParseHeader(string(b))
	return h, ok, nil
}

// lastAction is the repair action the incident's last crash snapshot that
// names one asks for ("reboot: Xid 79 ..."); "" when none does.
func lastAction(files []IncidentFile) string {
	a := ""
	for _, f := range files {
		if f.FollowUp == "" && f.action != "" {
			a = f.action
		}
	}
	return a
}
