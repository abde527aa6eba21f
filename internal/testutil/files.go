package testutil

import (
	"compress/gzip"
	"io"
	"os"
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
