package cper

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestCursorsRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), CursorFile)
	c, err := LoadCursors(path)
	if err != nil || c.Get("GPU-a").Handle != 0 {
		t.Fatalf("missing file: %v", err)
	}
	cur := c.Get("GPU-a")
	cur.Handle = 17
	cur.Mark(5)
	cur.Mark(6)
	if err := c.Set("GPU-a", cur); err != nil {
		t.Fatal(err)
	}
	if err := c.Set("bert", Cursor{Handle: 0, Seen: []uint64{9}}); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	if got, want := string(data), "GPU-a 17 5,6\nbert 0 9\n"; got != want {
		t.Fatalf("file %q, want %q", got, want)
	}
	d, err := LoadCursors(path)
	if err != nil {
		t.Fatal(err)
	}
	got := d.Get("GPU-a")
	if got.Handle != 17 || !got.Saw(5) || !got.Saw(6) || got.Saw(7) {
		t.Fatalf("%+v", got)
	}
	if err := d.Set("has blank", Cursor{}); err == nil {
		t.Fatal("a source with a blank was written")
	}
}

func TestCursorSeenBounded(t *testing.T) {
	var c Cursor
	for i := range uint64(maxSeen + 10) {
		c.Mark(i)
	}
	if len(c.Seen) != maxSeen || c.Saw(0) || !c.Saw(maxSeen+9) {
		t.Fatalf("%d seen, first %d", len(c.Seen), c.Seen[0])
	}
}

func TestCursorsCorruptLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), CursorFile)
	if err := os.WriteFile(path, []byte("GPU-a x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadCursors(path); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Fatalf("err %v", err)
	}
}

// A symlink planted at the cursors' path is replaced, never followed.
func TestCursorsSymlinkNotFollowed(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "victim")
	if err := os.WriteFile(target, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, CursorFile)
	if err := os.Symlink(target, path); err != nil {
		t.Fatal(err)
	}
	c := &Cursors{path: path, m: map[string]Cursor{}}
	if err := c.Set("GPU-a", Cursor{Handle: 1}); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(target); string(data) != "keep" {
		t.Fatalf("symlink target written: %q", data)
	}
}

// TestLoadCursorsRefusesALinkAndAFIFO: the cursors' file is the daemon's
// own: a link planted in its place is not followed (its target's text
// never reaches the log) and a FIFO does not hold the start.
func TestLoadCursorsRefusesALinkAndAFIFO(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "secret")
	if err := os.WriteFile(target, []byte("GPU-a 7 1,2,3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link-cursor")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	c, err := LoadCursors(link)
	if err == nil {
		t.Error("a link was read")
	}
	if _, ok := c.m["GPU-a"]; ok {
		t.Error("the link's target was taken for cursors")
	}
	fifo := filepath.Join(dir, "fifo-cursor")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := LoadCursors(fifo); done <- err }()
	select {
	case err := <-done:
		if err == nil {
			t.Error("a FIFO was read as cursors")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("LoadCursors blocked on a FIFO")
	}
}
