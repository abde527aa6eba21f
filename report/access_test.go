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
