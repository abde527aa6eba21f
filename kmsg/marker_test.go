package kmsg

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestMarkerDue(t *testing.T) {
	h := time.Hour
	tests := []struct {
		name                        string
		now, lastRecord, lastMarker time.Duration
		want                        bool
	}{
		{"log busy", 10 * h, 10*h - time.Second, 0, false},
		{"quiet for an hour, never marked", 10 * h, 9 * h, 0, true},
		{"quiet for 59 min", 10 * h, 10*h - 59*time.Minute, 0, false},
		{"quiet, but marked half an hour ago", 10 * h, 8 * h, 10*h - 30*time.Minute, false},
		{"quiet, marked an hour ago", 10 * h, 8 * h, 9 * h, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := MarkerDue(tt.now, tt.lastRecord, tt.lastMarker); got != tt.want {
				t.Errorf("MarkerDue = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestWriteMarkerReadsBackAsMarker(t *testing.T) {
	var b bytes.Buffer
	if err := WriteMarker(&b); err != nil {
		t.Fatal(err)
	}
	line := b.String()
	if line[:3] != "<7>" || line[len(line)-1] != '\n' {
		t.Fatalf("marker line %q: want level 7 and one line", line)
	}
	// The kernel turns it into a record whose message is the text after <7>.
	rec, err := ParseRecord([]byte("15,1234,5000000,-;" + line[3:]))
	if err != nil || !IsMarker(rec.Message) {
		t.Errorf("the marker does not read back as one: %+v, %v", rec, err)
	}
	if IsMarker("NVRM: Xid (PCI:0000:01:00): 79, gpu-telemetry: kmsg clock check") {
		t.Errorf("an Xid line mentioning the tag is not a marker")
	}
}

func TestOpenMarkerWriterOnlyOnTheDevice(t *testing.T) {
	file := filepath.Join(t.TempDir(), "kmsg")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if w, err := OpenMarkerWriter(file); err == nil {
		w.Close()
		t.Errorf("a regular file took markers")
	}
	if _, err := OpenMarkerWriter(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Errorf("a missing path took markers")
	}
	w, err := OpenMarkerWriter("/dev/kmsg")
	switch {
	case err == nil:
		w.Close() // root here: writable, nothing written
	case errors.Is(err, ErrPermission):
	default:
		if _, statErr := os.Stat("/dev/kmsg"); statErr == nil {
			t.Errorf("/dev/kmsg exists but the error %v is not ErrPermission", err)
		}
	}
}

func TestReaderMarksBacklog(t *testing.T) {
	f := runFile(t, "6,1,10,-;old\n")
	within(t, f.s.idle, "first idle")
	if rec := within(t, f.recs, "the old record"); !rec.Backlog {
		t.Errorf("a record there before the end was reached is not backlog: %+v", rec)
	}
	appendFile(t, f.path, "6,2,20,-;new\n")
	f.s.step <- struct{}{}
	within(t, f.s.idle, "second idle")
	if rec := within(t, f.recs, "the new record"); rec.Backlog || rec.Message != "new" {
		t.Errorf("a record appended later is backlog: %+v", rec)
	}
	f.stop(t)
}
