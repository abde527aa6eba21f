package sink

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/gpu-telemetry/gpu-telemetry/internal/testutil"
)

// nobody is a uid and gid no test runs as.
const nobody = 65534

// TestCheckDir: a directory the daemon writes in is refused when anyone
// but root or the daemon's user could write it or a directory above it
// (they could plant links there to files the daemon would write as root).
func TestCheckDir(t *testing.T) {
	root := os.Geteuid() == 0
	cases := []struct {
		name     string
		make     func(t *testing.T, base string) string // returns the dir to check
		needRoot bool
		want     string // "" for accepted
	}{
		{"private", func(t *testing.T, b string) string { return mkdir(t, b, "d", 0o700) }, false, ""},
		{"readable by all", func(t *testing.T, b string) string { return mkdir(t, b, "d", 0o755) }, false, ""},
		{"world-writable", func(t *testing.T, b string) string { return mkdir(t, b, "d", 0o777) }, false, "writable by every user (mode 0777)"},
		{"sticky world-writable, as /tmp", func(t *testing.T, b string) string { return mkdir(t, b, "d", 0o1777) }, false, "writable by every user (mode 1777)"},
		{"group-writable, the daemon's group", func(t *testing.T, b string) string { return mkdir(t, b, "d", 0o770) }, false, ""},
		{"group-writable by another group", func(t *testing.T, b string) string {
			d := mkdir(t, b, "d", 0o770)
			chown(t, d, -1, nobody)
			return d
		}, true, "writable by group 65534"},
		{"owned by another user", func(t *testing.T, b string) string {
			d := mkdir(t, b, "d", 0o755)
			chown(t, d, nobody, -1)
			return d
		}, true, "owned by uid 65534"},
		{"in a directory another user owns", func(t *testing.T, b string) string {
			p := mkdir(t, b, "p", 0o755)
			chown(t, p, nobody, -1)
			return mkdir(t, p, "d", 0o755)
		}, true, "owned by uid 65534"},
		{"in a world-writable directory", func(t *testing.T, b string) string {
			return mkdir(t, mkdir(t, b, "p", 0o777), "d", 0o755)
		}, false, "writable by every user (mode 0777)"},
		{"in a root-owned directory its group may write, as Ubuntu's /var/log (root:syslog 0775)", func(t *testing.T, b string) string {
			p := mkdir(t, b, "p", 0o775)
			chown(t, p, 0, nobody)
			return mkdir(t, p, "d", 0o755)
		}, true, ""},
		{"in a directory another user owns and its group may write", func(t *testing.T, b string) string {
			p := mkdir(t, b, "p", 0o775)
			chown(t, p, nobody, nobody)
			return mkdir(t, p, "d", 0o755)
		}, true, "owned by uid 65534"},
		{"a link another user owns, to a safe directory, in a sticky one", func(t *testing.T, b string) string {
			sticky := mkdir(t, b, "p", 0o1777)
			safe := mkdir(t, b, "safe", 0o755)
			link := filepath.Join(sticky, "d")
			if err := os.Symlink(safe, link); err != nil {
				t.Fatal(err)
			}
			if err := os.Lchown(link, nobody, nobody); err != nil {
				t.Fatal(err)
			}
			return link
		}, true, "is a link owned by uid 65534"},
		{"a link root owns, to a safe directory", func(t *testing.T, b string) string {
			safe := mkdir(t, b, "safe", 0o755)
			link := filepath.Join(b, "l")
			if err := os.Symlink(safe, link); err != nil {
				t.Fatal(err)
			}
			return link
		}, false, ""},
		{"in a sticky directory", func(t *testing.T, b string) string {
			return mkdir(t, mkdir(t, b, "p", 0o1777), "d", 0o755)
		}, false, ""},
		{"not yet made, in a sticky directory", func(t *testing.T, b string) string {
			return filepath.Join(mkdir(t, b, "p", 0o1777), "d", "e")
		}, false, ""},
		{"not yet made, in a world-writable directory", func(t *testing.T, b string) string {
			return filepath.Join(mkdir(t, b, "p", 0o777), "d")
		}, false, "writable by every user (mode 0777)"},
		{"a link to a world-writable directory", func(t *testing.T, b string) string {
			d := mkdir(t, b, "d", 0o777)
			l := filepath.Join(b, "l")
			if err := os.Symlink(d, l); err != nil {
				t.Fatal(err)
			}
			return l
		}, false, "writable by every user"},
		{"through a link in a world-writable directory", func(t *testing.T, b string) string {
			d := mkdir(t, b, "d", 0o755)
			p := mkdir(t, b, "p", 0o777)
			if err := os.Symlink(d, filepath.Join(p, "l")); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(p, "l")
		}, false, "writable by every user (mode 0777)"},
		{"under a file", func(t *testing.T, b string) string {
			f := filepath.Join(b, "f")
			if err := os.WriteFile(f, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(f, "d")
		}, false, "not a directory"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.needRoot && !root {
				t.Skip("needs root to chown")
			}
			base := t.TempDir()
			err := CheckDir(c.make(t, base))
			switch {
			case c.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Errorf("got %v, want an error with %q", err, c.want)
			case c.want != "" && c.want != "not a directory" && !errors.Is(err, ErrUntrusted):
				t.Errorf("%v does not wrap ErrUntrusted", err)
			}
		})
	}
}

func mkdir(t *testing.T, parent, name string, mode os.FileMode) string {
	t.Helper()
	d := filepath.Join(parent, name)
	if err := os.Mkdir(d, 0o700); err != nil {
		t.Fatal(err)
	}
	if mode&0o1000 != 0 {
		mode = mode&^0o1000 | os.ModeSticky
	}
	if err := os.Chmod(d, mode); err != nil { // umask spared
		t.Fatal(err)
	}
	return d
}

func chown(t *testing.T, path string, uid, gid int) {
	t.Helper()
	if err := os.Chown(path, uid, gid); err != nil {
		t.Fatal(err)
	}
}

// TestOpenAppendRefusesALink: a CSV name that is a link (planted before
// the log dir was made safe) is never written through.
func TestOpenAppendRefusesALink(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gpu0-5a3c1e2f-deep-2026-01-01.csv")
	planted := testutil.PlantLink(t, path, "", false) // empty: openAppend would write its header

	f, _, _, err := openAppend(path, []byte("timestamp\n"), slog.New(slog.DiscardHandler))
	if err == nil {
		f.Close()
		t.Errorf("opened a link")
	} else if !errors.Is(err, syscall.ELOOP) {
		t.Errorf("error %v, want ELOOP", err)
	}
	if _, err := cutPathToWholeLine(path, nil); err == nil {
		t.Errorf("cut a file through a link")
	}
	if err := CompressFile(path); err == nil {
		t.Errorf("compressed a link's target")
	}
	planted.Check(t)
	if _, err := os.Stat(path + ".gz"); err == nil {
		t.Errorf("the link's target was archived in the log dir")
	}
}

// TestCheckNotLink: a link, or a file of another kind, where the daemon
// writes by name is refused; nothing there, or the right kind, is not.
func TestCheckNotLink(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	os.WriteFile(file, nil, 0o644)
	sub := mkdir(t, dir, "sub", 0o750)
	link := filepath.Join(dir, "link")
	os.Symlink(file, link)
	dirLink := filepath.Join(dir, "dirlink")
	os.Symlink(sub, dirLink)
	for _, c := range []struct {
		path string
		dir  bool
		want string
	}{
		{file, false, ""}, {sub, true, ""}, {filepath.Join(dir, "none"), false, ""},
		{link, false, "is a symbolic link"}, {dirLink, true, "is a symbolic link"},
		{sub, false, "not a regular file"}, {file, true, "not a directory"},
	} {
		err := CheckNotLink(c.path, c.dir)
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("CheckNotLink(%s, %v) = %v, want %q", c.path, c.dir, err, c.want)
		}
	}
}
