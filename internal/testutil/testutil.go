// Package testutil holds what the package tests share: golden files with an
// -update flag, a log buffer safe for concurrent writers, a logger over it,
// polling with a deadline, a directory listing, a process's open files,
// loopback addresses (free or taken), promtool, reading a file gzipped or not (files.go), the kernel log
// clock (kclock.go), a writer of the host's /dev/kmsg that refuses lines
// GPU alerting takes for a failure (hostkmsg.go) and the simulated NVIDIA
// driver (simnvml.go). Only _test.go files import it; the -update flag it
// registers exists in the test binaries that do.
package testutil

import (
	"bytes"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// Golden compares got with testdata/name, relative to the package under
// test, or rewrites that file when the test runs with -update.
func Golden(t testing.TB, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -run '%s' -update creates it)", err, t.Name())
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (rerun with -update once the change is reviewed), %s",
			path, FirstDiff(string(got), string(want)))
	}
}

// FirstDiff names the first line in which got and want differ, with both
// versions of it; it returns "" when they are equal.
func FirstDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := 0; i < len(g) || i < len(w); i++ {
		var a, b string
		if i < len(g) {
			a = g[i]
		}
		if i < len(w) {
			b = w[i]
		}
		if a != b {
			return fmt.Sprintf("line %d:\n got  %q\n want %q", i+1, a, b)
		}
	}
	return ""
}

// LogBuf collects written bytes (log records, a child's stderr) and is safe
// for concurrent writers and readers.
type LogBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (l *LogBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns everything written so far.
func (l *LogBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Logger returns a text logger that writes into l.
func (l *LogBuf) Logger() *slog.Logger { return slog.New(slog.NewTextHandler(l, nil)) }

// WaitUntil polls cond every few milliseconds for up to limit and reports
// whether it came true.
func WaitUntil(limit time.Duration, cond func() bool) bool {
	return PollUntil(limit, 2*time.Millisecond, cond)
}

// PollUntil polls cond every poll for up to limit (real time: a failure
// guard, not a timing assertion) and reports whether it came true; cond is
// asked at least once.
func PollUntil(limit, poll time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(poll)
	}
	return true
}

// Entries returns every name in dir, hidden temp files included; a missing
// dir has none.
func Entries(t testing.TB, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// NeedTool returns the path of a program a test runs (a real client such as
// promtool, atop, tmux or chromium). Missing, it skips the test, except under
// CI=true, where .ci/run installs it and its absence fails the test; pkg
// names the Debian package that has it.
func NeedTool(t testing.TB, name, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s missing under CI (apt-get install %s)", name, pkg)
		}
		t.Skipf("%s not installed (Debian package %s)", name, pkg)
	}
	return p
}

// Contains reports each of wants that got (named what in messages) lacks,
// and then got itself once.
func Contains(t testing.TB, what, got string, wants ...string) {
	t.Helper()
	missing := false
	for _, w := range wants {
		if !strings.Contains(got, w) {
			missing = true
			t.Errorf("%s lacks %q", what, w)
		}
	}
	if missing {
		t.Logf("%s:\n%s", what, got)
	}
}

// Case is one row of a table test of a function of one argument: its name,
// the argument and the result wanted.
type Case[In any, Out comparable] struct {
	Name string
	In   In
	Want Out
}

// Check runs f (named fn in messages) over a table, each row a subtest.
func Check[In any, Out comparable](t *testing.T, fn string, f func(In) Out, cases []Case[In, Out]) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			if got := f(c.In); got != c.Want {
				t.Errorf("%s(%#v) = %#v, want %#v", fn, c.In, got, c.Want)
			}
		})
	}
}

// TakenAddr returns a loopback TCP address that stays in use until t ends,
// for tests of a listener whose port is taken.
func TakenAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l.Addr().String()
}

// Promtool runs Prometheus's promtool with args in dir ("": here), reading
// stdin, and returns its combined output; a missing promtool is NeedTool's
// case.
func Promtool(t testing.TB, dir string, stdin []byte, args ...string) ([]byte, error) {
	t.Helper()
	cmd := exec.Command(NeedTool(t, "promtool", "prometheus"), args...)
	cmd.Dir, cmd.Stdin = dir, bytes.NewReader(stdin)
	return cmd.CombinedOutput()
}

// CheckMetrics fails t unless `promtool check metrics` takes body (a
// Prometheus text exposition) without a word: no error and no lint warning.
func CheckMetrics(t testing.TB, body []byte) {
	t.Helper()
	if out, err := Promtool(t, "", body, "check", "metrics"); err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}

// OpenFiles returns what process pid has open: the targets of its
// /proc/pid/fd links (a path, or "socket:[inode]" and the like); none when
// they cannot be read.
func OpenFiles(pid int) []string {
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return nil
	}
	var out []string
	for _, fd := range fds {
		if l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name())); err == nil {
			out = append(out, l)
		}
	}
	return out
}
