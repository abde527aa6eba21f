package testutil

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"runtime"
	"strings"
	"testing"
)

// ReadFile returns the contents of path, decompressed when its name ends in
// .gz (a finished day the logger compressed), or fails the test.
func ReadFile(t testing.TB, path string) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var r io.Reader = f
	if strings.HasSuffix(path, ".gz") {
		zr, err := gzip.NewReader(f)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		r = zr
	}
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return b
}

// Allocated returns the bytes f allocated on the heap (runtime.MemStats'
// TotalAlloc before and after): a reader of hostile input is held to a
// bound with it. Allocations of other goroutines meanwhile count too, so a
// test that uses it does not run in parallel.
func Allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// HostileLine is the size of the over-long line the tests of bounded
// readers put in a file: far over sink.MaxLine (64 KiB), small enough to
// keep them fast. Reading it whole costs more than twice its size.
const HostileLine = 8 << 20

// LongLine returns a line of n bytes ending in a newline, not a CSV row
// nor an events.log line: the over-long line of a hostile file.
func LongLine(n int) []byte {
	b := bytes.Repeat([]byte{'x'}, n)
	b[n-1] = '\n'
	return b
}

// WriteGzip writes the parts to path gzipped, in one member (as gzip(1)
// writes it), or fails the test.
func WriteGzip(t testing.TB, path string, parts ...[]byte) {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	for _, p := range parts {
		zw.Write(p)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}
