package sink

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestGzMembers: a day is gzipped in members that gunzip reads as one
// stream, each preamble (board line and header) or header line starts a member of
// its own, and each member's
// header tells its length and its first row's time, as read back.
func TestGzMembers(t *testing.T) {
	var b bytes.Buffer
	t0 := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	board := Board{UUID: "GPU-5a3c1e2f-0b4d", Serial: "1791025012340"}.Line()
	b.Write(board)
	b.WriteString("timestamp,gpu_temp\n")
	for i := 0; i < 150000; i++ {
		fmt.Fprintf(&b, "%s,%d\n", t0.Add(time.Duration(i)*100*time.Millisecond).Format(TimestampLayout), 50+i%7)
		if i == 90000 {
			b.Write(board) // a preamble again (an older writer wrote a header alone: see below)
			b.WriteString("timestamp,gpu_temp,mem_temp\n")
		}
		if i == 120000 {
			b.WriteString("timestamp,gpu_temp\n") // a header without a board line
		}
	}
	want := b.Bytes()
	path := filepath.Join(t.TempDir(), "gpu0-unknown-deep-2026-11-30.csv")
	if err := os.WriteFile(path, want, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := gzipFile(path, make(chan struct{}), FileOps{}); err != nil {
		t.Fatal(err)
	}
	gz, err := os.ReadFile(path + ".gz")
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(zr)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("gzip.Reader read %d bytes (%v), want the %d written", len(got), err, len(want))
	}
	if gunzip, err := exec.LookPath("gzip"); err == nil {
		out, err := exec.Command(gunzip, "-dc", path+".gz").Output()
		if err != nil || !bytes.Equal(out, want) {
			t.Fatalf("gzip -dc: %d bytes, %v", len(out), err)
		}
	}
	ms, ok := GzMembers(bytes.NewReader(gz), int64(len(gz)))
	if !ok || len(ms) < 5 {
		t.Fatalf("members %d, ok %v", len(ms), ok)
	}
	headers := 0
	for i, m := range ms {
		end := int64(len(gz))
		if i+1 < len(ms) {
			end = ms[i+1].Offset
		}
		one, err := gzip.NewReader(bytes.NewReader(gz[m.Offset:end]))
		if err != nil {
			t.Fatalf("member %d: %v", i, err)
		}
		one.Multistream(false)
		br := bufio.NewReader(one)
		line, _ := br.ReadString('\n')
		switch {
		case m.Header:
			headers++
			if IsComment([]byte(line)) {
				// The board line and its header: one member.
				if next, _ := br.ReadString('\n'); !strings.HasPrefix(next, "timestamp,") {
					t.Errorf("member %d: the board line %q is followed by %q, not its header", i, line, next)
				}
			} else if !strings.HasPrefix(line, "timestamp,") || m.First != "" {
				t.Errorf("member %d marked header starts %q", i, line)
			}
		case !strings.HasPrefix(line, m.First+",") || m.First == "":
			t.Errorf("member %d says it starts at %q, starts %q", i, m.First, line)
		}
	}
	if headers != 3 || !ms[0].Header {
		t.Errorf("%d header members, want 3 (two preambles, a header alone), the first one first", headers)
	}

	// A file gzipped otherwise (one member, no index) is not taken for one.
	var plain bytes.Buffer
	zw := gzip.NewWriter(&plain)
	zw.Write(want)
	zw.Close()
	if _, ok := GzMembers(bytes.NewReader(plain.Bytes()), int64(plain.Len())); ok {
		t.Error("a plain gzip file listed as members")
	}
}
