package sink

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/testutil"
)

// TestReadLineSkipsLongLinesUnheld: lines up to MaxLine are returned whole,
// longer ones (one in the middle, one cut at the end) skipped and counted
// without being held: reading 8 MiB of them allocates next to nothing.
func TestReadLineSkipsLongLinesUnheld(t *testing.T) {
	var in bytes.Buffer
	in.WriteString("a\n")
	in.Write(testutil.LongLine(MaxLine)) // the longest line taken, its newline included
	in.Write(testutil.LongLine(testutil.HostileLine))
	in.WriteString("b\n")
	in.Write(testutil.LongLine(MaxLine + 1)[:MaxLine+1]) // no newline: cut, and too long
	for _, size := range []int{MaxLine, 256 << 10} {     // NewLineReader's buffer, and report's larger one
		br := bufio.NewReaderSize(bytes.NewReader(in.Bytes()), size)
		var got []int
		long := 0
		var err error
		alloc := testutil.Allocated(func() {
			for err == nil {
				var b []byte
				if b, err = ReadLine(br, &long); len(b) > 0 {
					got = append(got, len(b))
				}
			}
		})
		if fmt.Sprint(got) != fmt.Sprint([]int{2, MaxLine, 2}) || long != 2 || err != io.EOF {
			t.Errorf("buffer %d: lines of %v bytes, %d long, %v; want [2 %d 2], 2 long, EOF", size, got, long, err, MaxLine)
		}
		if alloc > 64<<10 {
			t.Errorf("buffer %d: allocated %d KiB skipping 8 MiB", size, alloc>>10)
		}
	}
}

// TestOpenRegularRefuses: a directory and a device are refused without
// reading them; a FIFO without waiting for a writer.
func TestOpenRegularRefuses(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{dir, "/dev/zero", fifo} {
		f, err := OpenRegular(p)
		if err == nil {
			f.Close()
		}
		if err == nil || !strings.Contains(err.Error(), "open "+p+": not a regular file") {
			t.Errorf("OpenRegular(%s) = %v, want refused", p, err)
		}
	}
	p := filepath.Join(dir, "file")
	os.WriteFile(p, []byte("x\n"), 0o644)
	f, err := OpenRegular(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if b, err := io.ReadAll(f); err != nil || string(b) != "x\n" {
		t.Errorf("read %q, %v", b, err)
	}
}

// TestReadPreambleBounded: a first line over MaxLine, or comment lines
// without end, are ErrLongLine, read without being held.
func TestReadPreambleBounded(t *testing.T) {
	for name, in := range map[string][]byte{
		"long board line": append(testutil.LongLine(testutil.HostileLine), "timestamp,gpu_temp\n"...),
		"only comments":   bytes.Repeat([]byte("#\n"), 4<<20),
	} {
		var err error
		alloc := testutil.Allocated(func() {
			_, _, _, _, err = ReadPreamble(NewLineReader(bytes.NewReader(in)))
		})
		if err != ErrLongLine || alloc > 256<<10 {
			t.Errorf("%s: %v, allocated %d KiB; want ErrLongLine with little allocated", name, err, alloc>>10)
		}
	}
}

// TestCompressLongLineBounded: a finished day with a line of 8 MiB (put
// in the log directory, or damage) is compressed without holding the line
// whole (it went into one member: a 2 GB line, 2 GB): the line continues
// across members, none of its bytes lost, and the members still read.
func TestCompressLongLineBounded(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	var b bytes.Buffer
	b.WriteString("timestamp,gpu_temp\n")
	for i := 0; i < 1000; i++ {
		fmt.Fprintf(&b, "%s,%d\n", t0.Add(time.Duration(i)*100*time.Millisecond).Format(TimestampLayout), 50)
		if i == 500 {
			b.Write(testutil.LongLine(testutil.HostileLine))
		}
	}
	want := b.Bytes()
	path := filepath.Join(t.TempDir(), "gpu0-unknown-deep-2026-11-30.csv")
	if err := os.WriteFile(path, want, 0o644); err != nil {
		t.Fatal(err)
	}
	var err error
	alloc := testutil.Allocated(func() { err = CompressFile(path) })
	if err != nil {
		t.Fatal(err)
	}
	if alloc > 6<<20 {
		t.Errorf("compressing an 8 MiB line allocated %d MiB, want under 6", alloc>>20)
	}
	f, err := os.Open(path + ".gz")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, _ := f.Stat()
	if ms, ok := GzMembers(f, fi.Size()); !ok || len(ms) < 8 {
		t.Errorf("members %v (%d): want the line across several", ok, len(ms))
	}
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := io.ReadAll(zr); err != nil || !bytes.Equal(got, want) {
		t.Errorf("read back %d bytes (%v), want the %d written", len(got), err, len(want))
	}
}

// TestSystemInfoOverHostileFile: a system-info.txt of 32 MiB is read no
// further than the new one's length to compare them, and one that is a
// FIFO is replaced, not waited on (the start would never go on).
func TestSystemInfoOverHostileFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "system-info.txt")
	si := SystemInfo{Generated: time.Date(2026, 11, 29, 14, 0, 0, 0, time.UTC)}
	if err := os.WriteFile(path, testutil.LongLine(32<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	var w bool
	var err error
	alloc := testutil.Allocated(func() { w, err = WriteSystemInfo(dir, si) })
	if !w || err != nil || alloc > 4<<20 {
		t.Errorf("over a 32 MiB file: written %v, %v, allocated %d MiB; want it rewritten with little read", w, err, alloc>>20)
	}
	os.Remove(path)
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	if w, err := WriteSystemInfo(dir, si); !w || err != nil {
		t.Errorf("over a FIFO: written %v, %v", w, err)
	}
	if fi, err := os.Lstat(path); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("system-info.txt after: %v, %v; want a regular file", fi, err)
	}
}
