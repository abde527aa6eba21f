package sink

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/gpu-telemetry/gpu-telemetry/internal/testutil"
)

func TestCreateNewConcurrentNames(t *testing.T) {
	// Many writers, one name: each gets its own file, none is replaced.
	dir := t.TempDir()
	ops := Atomic{Perm: 0o640}
	const n = 20
	var wg sync.WaitGroup
	paths := make([]string, n)
	for i := range n {
		wg.Go(func() {
			p, err := ops.CreateNew(dir, "crash-x-gpu0", ".log", []byte(fmt.Sprintf("writer %d\n", i)))
			if err != nil {
				t.Error(err)
			}
			paths[i] = p
		})
	}
	wg.Wait()
	entries := testutil.Entries(t, dir)
	if len(entries) != n {
		t.Fatalf("%d entries, want %d (no temp files left): %v", len(entries), n, entries)
	}
	for i, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil || string(data) != fmt.Sprintf("writer %d\n", i) {
			t.Errorf("%s = %q, %v; want writer %d's data", p, data, err, i)
		}
	}
	if !slices.Contains(entries, "crash-x-gpu0.log") || !slices.Contains(entries, fmt.Sprintf("crash-x-gpu0-%d.log", n)) {
		t.Errorf("names %v, want crash-x-gpu0.log ... -%d.log", entries, n)
	}
}

func TestAtomicFailuresLeaveNothing(t *testing.T) {
	failWrite := func(f *os.File, p []byte) (int, error) {
		_, _ = f.Write(p[:1])
		return 1, errors.New("no space left on device")
	}
	failLink := func(string, string) error { return &os.LinkError{Op: "link", Err: syscall.EIO} }
	tests := []struct {
		name    string
		ops     Atomic
		wantErr string
	}{
		{"write fails", Atomic{Perm: 0o640, Ops: FileOps{Write: failWrite}}, "no space left on device"},
		{"link fails", Atomic{Perm: 0o640, Ops: FileOps{Link: failLink}}, "input/output error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			_, err := tt.ops.CreateNew(dir, "spike-x", ".log", []byte("data\n"))
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("err = %v, want %q", err, tt.wantErr)
			}
			if e := testutil.Entries(t, dir); len(e) != 0 {
				t.Errorf("left behind: %v", e)
			}
		})
	}
}

func TestReplaceFailureKeepsOld(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "crash.log")
	if err := os.WriteFile(path, []byte("stage 1\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	ops := Atomic{Perm: 0o640, Ops: FileOps{Write: func(f *os.File, p []byte) (int, error) {
		_, _ = f.Write(p[:3])
		return 3, errors.New("I/O error")
	}}}
	if err := ops.Replace(path, []byte("stage 2, much longer\n")); err == nil {
		t.Fatal("replace succeeded")
	}
	if data, _ := os.ReadFile(path); string(data) != "stage 1\n" {
		t.Errorf("old file damaged: %q", data)
	}
	if e := testutil.Entries(t, dir); !slices.Equal(e, []string{"crash.log"}) {
		t.Errorf("entries = %v", e)
	}
	// And a successful replace leaves only the new content.
	if err := (Atomic{Perm: 0o640}).Replace(path, []byte("stage 2\n")); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(path); string(data) != "stage 2\n" {
		t.Errorf("got %q", data)
	}
	if e := testutil.Entries(t, dir); len(e) != 1 {
		t.Errorf("entries = %v", e)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o640 {
		t.Errorf("mode %v, want 0640", fi.Mode().Perm())
	}
}

func TestCreateNewWithoutHardLinks(t *testing.T) {
	// File systems without hard links (vfat) answer EPERM: fall back to
	// O_EXCL + rename, still without replacing anything.
	dir := t.TempDir()
	ops := Atomic{Perm: 0o640, Ops: FileOps{Link: func(string, string) error {
		return &os.LinkError{Op: "link", Err: syscall.EPERM}
	}}}
	for i := range 3 {
		if _, err := ops.CreateNew(dir, "crash-y", ".log", []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	got := testutil.Entries(t, dir)
	slices.Sort(got)
	if want := []string{"crash-y-2.log", "crash-y-3.log", "crash-y.log"}; !slices.Equal(got, want) {
		t.Errorf("entries = %v, want %v", got, want)
	}
	if data, _ := os.ReadFile(filepath.Join(dir, "crash-y.log")); string(data) != "0" {
		t.Errorf("first file replaced: %q", data)
	}
}

// TestDirectoryFsyncErrorIsReturned: every atomic write reports a failed
// directory fsync (the file is in place but may not survive a power loss)
// instead of swallowing it.
func TestDirectoryFsyncErrorIsReturned(t *testing.T) {
	eio := errors.New("fsync directory: input/output error")
	ops := Atomic{Perm: 0o644, Ops: FileOps{SyncDir: func(string) error { return eio }}}
	dir := t.TempDir()
	if err := ops.Replace(filepath.Join(dir, "a"), []byte("a")); !errors.Is(err, eio) {
		t.Errorf("Replace: %v", err)
	}
	if p, err := ops.CreateNew(dir, "b", ".log", []byte("b")); !errors.Is(err, eio) || p == "" {
		t.Errorf("CreateNew: %q, %v", p, err)
	}
	if err := ops.CreateFrom(filepath.Join(dir, "c"), bytesFill([]byte("c"))); !errors.Is(err, eio) {
		t.Errorf("CreateFrom: %v", err)
	}
	for _, name := range []string{"a", "b.log", "c"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("%s not in place: %v", name, err)
		}
	}
}

// TestCreateFromNeverReplaces: an existing file stays as it was, the error
// says so, and no temp file is left.
func TestCreateFromNeverReplaces(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "day.csv.gz")
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := Atomic{Perm: 0o644}.CreateFrom(path, bytesFill([]byte("new")))
	if !errors.Is(err, fs.ErrExist) {
		t.Errorf("err = %v, want fs.ErrExist", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "old" {
		t.Errorf("replaced: %q", b)
	}
	if e := testutil.Entries(t, dir); !slices.Equal(e, []string{"day.csv.gz"}) {
		t.Errorf("entries %v", e)
	}
}

// TestRemoveTemps: the temp files a write of one of the caller's files
// left go; the files themselves, other files' temp files, and a link or a
// directory of a temp file's name (never the daemon's) stay, a link's
// target too.
func TestRemoveTemps(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	target := filepath.Join(outside, "precious")
	os.WriteFile(target, []byte("not the daemon's\n"), 0o644)
	// A real temp file, as writeTemp names it, abandoned.
	f, err := os.CreateTemp(dir, ".mine"+tempMark+"*")
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	for _, n := range []string{"mine", ".mine.tmp-123", ".other.tmp-1", "mine.tmp-2", ".mine.tmp-"} {
		os.WriteFile(filepath.Join(dir, n), nil, 0o644)
	}
	os.Symlink(target, filepath.Join(dir, ".mine.tmp-link"))
	os.Mkdir(filepath.Join(dir, ".mine.tmp-dir"), 0o755)
	RemoveTemps(dir, func(name string) bool { return name == "mine" })
	var names []string
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if want := []string{".mine.tmp-dir", ".mine.tmp-link", ".other.tmp-1", "mine", "mine.tmp-2"}; !slices.Equal(names, want) {
		t.Errorf("after RemoveTemps: %q, want %q", names, want)
	}
	if b, err := os.ReadFile(target); err != nil || string(b) != "not the daemon's\n" {
		t.Errorf("the link's target: %q, %v", b, err)
	}
}
