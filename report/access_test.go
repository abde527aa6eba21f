package report

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// deny makes the file or directory rel of dir unreadable to the report, as
// the logger's root-owned files are to another user: by its mode when the
// test does not run as root, else (root reads any mode) by the returned
// opener, which fails it with EACCES as open(2) would.
func deny(t *testing.T, dir, rel string) opener {
	t.Helper()
	p := filepath.Join(dir, rel)
	if os.Geteuid() != 0 {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, 0); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod(p, fi.Mode().Perm()) }) // so that TempDir can remove it
		return nil
	}
	return func(name string) (*os.File, error) {
		if filepath.Clean(name) == p {
			return nil, &fs.PathError{Op: "open", Path: name, Err: syscall.EACCES}
		}
		return os.Open(name)
	}
}

// TestUnreadableFilesAreSaid: a report run by a user who may not read the
// logger's files (events.log 0600, crashes/ 0750, root's) says which file
// and what to do, and fails; it never says "no incident" from files it
// could not read, nor reports without a CSV of the window.
func TestUnreadableFilesAreSaid(t *testing.T) {
	for _, tc := range []struct {
		name    string
		deny    string
		quiet   bool // events.log holds no critical event: the incident comes from crashes/
		want    string
		wantErr bool
	}{
		{name: "events.log", deny: "events.log", want: "cannot read events.log: permission denied (run as root)"},
		{name: "crashes/ with no critical event", deny: "crashes", quiet: true, want: "cannot read crashes/: permission denied (run as root)"},
		{name: "crashes/ of an incident in events.log", deny: "crashes", want: "cannot read crashes/: permission denied (run as root)"},
		{name: "a crash snapshot", deny: "crashes/crash-20261130-190817.623-gpu0.log", want: "cannot read crashes/crash-20261130-190817.623-gpu0.log: permission denied (run as root)"},
		{name: "a CSV of the window", deny: "gpu0-deep-2026-11-30.csv", want: "cannot read gpu0-deep-2026-11-30.csv: permission denied (run as root)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.CopyFS(dir, os.DirFS("testdata/incident")); err != nil {
				t.Fatal(err)
			}
			if tc.quiet {
				writeEvents(t, dir, `time=2026-11-30T19:07:30.000Z gpu=0 type=TDP_CHANGE from=600W to=450W delta=-150W`)
			}
			if _, err := os.Stat(filepath.Join(dir, tc.deny)); err != nil {
				t.Fatal(err) // the fixture changed: the case would test nothing
			}
			// Readable, the same directory reports.
			if _, err := Build(Options{Dir: dir, GPU: -1, Loc: time.UTC}); err != nil {
				t.Fatalf("readable: %v", err)
			}
			open := deny(t, dir, tc.deny)
			rep, err := Build(Options{Dir: dir, GPU: -1, Loc: time.UTC, open: open})
			if err == nil {
				t.Fatalf("reported (skipped: %q) from files it could not read; want %q", rep.Skipped, tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "no incident") {
				t.Errorf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

// TestAccessHint: the group is named only when it may read the file (a
// directory: list and enter it) and is not root's.
func TestAccessHint(t *testing.T) {
	group := func(gid uint32) string {
		if gid == 4 {
			return "adm"
		}
		return "g" + string(rune('0'+gid%10))
	}
	for _, tc := range []struct {
		name string
		mode fs.FileMode
		gid  uint32
		want string
	}{
		{"events.log 0600", 0o600, 4, "run as root"},
		{"file 0640 group adm", 0o640, 4, "run as root or join group adm"},
		{"file 0640 group root", 0o640, 0, "run as root"},
		{"file 0604", 0o604, 4, "run as root"},
		{"crashes/ 0750 group adm", fs.ModeDir | 0o750, 4, "run as root or join group adm"},
		{"dir 0740: the group may list but not enter", fs.ModeDir | 0o740, 4, "run as root"},
		{"crashes/ 0700", fs.ModeDir | 0o700, 4, "run as root"},
	} {
		if got := hint(tc.mode, tc.gid, group); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestBadRotatedEventLogsAreSkipped: a rotated events log that is no
// regular file (a FIFO, a dangling symbolic link, a loop of them, a
// directory) is skipped and named, never opened (a FIFO would block the
// report forever), and the other events files are still read: the
// incident of events.log and the Xid of a good rotated copy are found. An
// events.log that is a FIFO is named the same way, and the incident then
// comes from crashes/.
func TestBadRotatedEventLogsAreSkipped(t *testing.T) {
	build := func(t *testing.T, dir string) *Report {
		t.Helper()
		type result struct {
			rep *Report
			err error
		}
		done := make(chan result, 1)
		go func() {
			rep, err := Build(Options{Dir: dir, GPU: -1, Loc: time.UTC})
			done <- result{rep, err}
		}()
		select {
		case r := <-done:
			if r.err != nil {
				t.Fatalf("Build: %v", r.err)
			}
			return r.rep
		case <-time.After(10 * time.Second):
			t.Fatal("Build still reading after 10 s: it opened a FIFO")
		}
		return nil
	}
	fixture := func(t *testing.T) string {
		dir := t.TempDir()
		if err := os.CopyFS(dir, os.DirFS("testdata/incident")); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	skipped := func(t *testing.T, rep *Report, want ...string) {
		t.Helper()
		got := strings.Join(rep.Skipped, "\n")
		for _, w := range want {
			if !strings.Contains(got, w) {
				t.Errorf("skipped %q, want it to name %q", rep.Skipped, w)
			}
		}
	}

	t.Run("rotated copies", func(t *testing.T) {
		dir := fixture(t)
		mk := func(name string, f func(string) error) {
			if err := f(filepath.Join(dir, name)); err != nil {
				t.Fatal(err)
			}
		}
		mk("events-2026-11-30T10-00-00.000.log", func(p string) error { return syscall.Mkfifo(p, 0o600) })
		mk("events-2026-11-30T11-00-00.000.log", func(p string) error { return os.Symlink(filepath.Join(dir, "gone"), p) })
		mk("events-2026-11-30T12-00-00.000.log", func(p string) error { return os.Symlink(p, p) })
		mk("events-2026-11-30T13-00-00.000.log", func(p string) error { return os.Mkdir(p, 0o700) })
		mk("events-2026-11-30T14-00-00.000.log", func(p string) error {
			return os.WriteFile(p, []byte("time=2026-11-30T14:00:00.000Z host=h level=warning gpu=1 source=nvml type=TDP_CHANGE from=600W to=450W delta=-150W\n"), 0o600)
		})
		rep := build(t, dir)
		skipped(t, rep,
			"events-2026-11-30T10-00-00.000.log (a FIFO, not a regular file): not read",
			"events-2026-11-30T11-00-00.000.log (a dangling symbolic link): not read",
			"events-2026-11-30T12-00-00.000.log (a loop of symbolic links): not read",
			"events-2026-11-30T13-00-00.000.log (a directory): not read")
		if rep.Incident.GPU != 0 || !strings.Contains(strings.Join(rep.Read, "\n"), "2 events.log file(s)") {
			t.Errorf("incident on GPU %d, read %q: want events.log's incident on GPU 0 from 2 files", rep.Incident.GPU, rep.Read)
		}
	})
	t.Run("events.log a FIFO", func(t *testing.T) {
		dir := fixture(t)
		p := filepath.Join(dir, "events.log")
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Mkfifo(p, 0o600); err != nil {
			t.Fatal(err)
		}
		skipped(t, build(t, dir), "events.log (a FIFO, not a regular file): not read")
	})
}
