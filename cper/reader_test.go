package cper

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/testutil"
)

// driver is a driver holding recs for every GPU: a handle is how many it
// returned; err fails the next read after what it returns.
type driver struct {
	recs [][]byte
	err  error
}

func (d *driver) read(_ string, handle uint64) ([]byte, uint64, error) {
	buf := bytes.Join(d.recs[min(handle, uint64(len(d.recs))):], nil)
	if err := d.err; err != nil {
		d.err = nil
		return buf, handle, err
	}
	return buf, uint64(len(d.recs)), nil
}

type refused struct{}

func (refused) Error() string     { return "no permission" }
func (refused) Unavailable() bool { return true }

// saved collects what a Read saves: the record ids, -1 for a corrupt rest.
type saved struct{ ids []int64 }

func (s *saved) save(_ time.Time, raw []byte, rec *Record) {
	if rec == nil {
		s.ids = append(s.ids, -1)
		return
	}
	s.ids = append(s.ids, int64(rec.ID))
}

func newLog() (*slog.Logger, *strings.Builder) {
	var b strings.Builder
	return slog.New(slog.NewTextHandler(&b, nil)), &b
}

// Each record is saved once, in order: a later read, a restart (a new
// Reader on the same cursors) and a read that restarts from the first
// record after a failure repeat none, and count those skipped.
func TestReaderSavesEachRecordOnce(t *testing.T) {
	dir := t.TempDir()
	log, logs := newLog()
	d := &driver{recs: [][]byte{build(1, SevFatal, ts), build(2, SevCorrected, nil)}}
	r := NewReader(dir, d.read, time.Second, log)
	var s saved
	if n := r.Read(log, "GPU-a", s.save); n != 0 || !slices.Equal(s.ids, []int64{1, 2}) {
		t.Fatalf("first read saved %v, %d repeats", s.ids, n)
	}
	if n := r.Read(log, "GPU-a", s.save); n != 0 || !slices.Equal(s.ids, []int64{1, 2}) {
		t.Fatalf("a read with nothing new saved %v, %d repeats", s.ids, n)
	}
	d.recs = append(d.recs, build(3, SevFatal, ts))
	r = NewReader(dir, d.read, time.Second, log)
	if n := r.Read(log, "GPU-a", s.save); n != 0 || !slices.Equal(s.ids, []int64{1, 2, 3}) {
		t.Fatalf("after a restart saved %v, %d repeats", s.ids, n)
	}
	// A failed read resets the handle: the next starts from the first record.
	d.err = errors.New("unknown error")
	r.Read(log, "GPU-a", s.save)
	testutil.Contains(t, "the logs", logs.String(), "CPER read failed; records read before it are kept")
	d.recs = append(d.recs, build(4, SevFatal, ts))
	if n := r.Read(log, "GPU-a", s.save); n != 3 || !slices.Equal(s.ids, []int64{1, 2, 3, 4}) {
		t.Fatalf("after a failure saved %v, %d repeats, want 3", s.ids, n)
	}
}

// A record is marked saved only after save returns, each in its turn: a
// stop while saving one repeats none before it and loses none after.
func TestReaderMarksARecordOnlyOnceSaved(t *testing.T) {
	dir := t.TempDir()
	log, _ := newLog()
	d := &driver{recs: [][]byte{build(1, SevFatal, ts), build(2, SevFatal, ts), build(3, SevFatal, ts)}}
	r := NewReader(dir, d.read, time.Second, log)
	var marked [][]uint64
	r.Read(log, "GPU-a", func(_ time.Time, _ []byte, rec *Record) {
		c, err := LoadCursors(filepath.Join(dir, CursorFile))
		if err != nil {
			t.Fatal(err)
		}
		cur := c.Get("GPU-a")
		if cur.Handle != 0 {
			t.Errorf("saving record %d: the handle moved to %d before the last was saved", rec.ID, cur.Handle)
		}
		marked = append(marked, cur.Seen)
	})
	if len(marked) != 3 || len(marked[0]) != 0 || !slices.Equal(marked[1], []uint64{1}) || !slices.Equal(marked[2], []uint64{1, 2}) {
		t.Fatalf("saved ids on file while saving each record: %v", marked)
	}
}

// The bytes after the last whole record are saved raw, once, and logged.
func TestReaderSavesACorruptRestRaw(t *testing.T) {
	log, logs := newLog()
	d := &driver{recs: [][]byte{build(1, SevFatal, ts), []byte("CPER-garbage")}}
	r := NewReader(t.TempDir(), d.read, time.Second, log)
	var rest []byte
	var s saved
	r.Read(log, "GPU-a", func(now time.Time, raw []byte, rec *Record) {
		s.save(now, raw, rec)
		if rec == nil {
			rest = raw
		}
	})
	if !slices.Equal(s.ids, []int64{1, -1}) || string(rest) != "CPER-garbage" {
		t.Fatalf("saved %v, rest %q", s.ids, rest)
	}
	testutil.Contains(t, "the logs", logs.String(), "a CPER record could not be decoded; saved raw")
	if r.Read(log, "GPU-a", s.save); !slices.Equal(s.ids, []int64{1, -1}) {
		t.Fatalf("a second read saved %v", s.ids)
	}
}

// A driver that refuses the call (it needs root) is logged once and saves
// nothing; an unidentified GPU is not read.
func TestReaderRefused(t *testing.T) {
	log, logs := newLog()
	calls := 0
	r := NewReader(t.TempDir(), func(string, uint64) ([]byte, uint64, error) { calls++; return nil, 0, refused{} }, time.Second, log)
	var s saved
	r.Read(log, "GPU-a", s.save)
	r.Read(log, "GPU-b", s.save)
	r.Read(log, "", s.save)
	if n := strings.Count(logs.String(), "the driver refuses CPER records here"); n != 1 || calls != 2 || len(s.ids) != 0 {
		t.Fatalf("%d refusals logged, %d calls, saved %v:\n%s", n, calls, s.ids, logs)
	}
}

// A read the driver does not return from is abandoned at the deadline; no
// other starts until it returns, and its records are read again then.
func TestReaderAbandonsAHungRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log, logs := newLog()
		d := &driver{recs: [][]byte{build(1, SevFatal, ts)}}
		release := make(chan struct{})
		var calls atomic.Int32
		r := NewReader(t.TempDir(), func(uuid string, h uint64) ([]byte, uint64, error) {
			if calls.Add(1) == 1 {
				<-release
			}
			return d.read(uuid, h)
		}, 2*time.Second, log)
		var s saved
		r.Read(log, "GPU-a", s.save)
		testutil.Contains(t, "the logs", logs.String(), "CPER read did not return in time")
		r.Read(log, "GPU-b", s.save)
		if calls.Load() != 1 || len(s.ids) != 0 {
			t.Fatalf("while a read is in the driver: %d calls, saved %v", calls.Load(), s.ids)
		}
		close(release)
		synctest.Wait()
		if r.Read(log, "GPU-a", s.save); calls.Load() != 2 || !slices.Equal(s.ids, []int64{1}) {
			t.Fatalf("after the driver returned: %d calls, saved %v", calls.Load(), s.ids)
		}
	})
}

// The host's boot error record is recorded once per boot: a restart in the
// same boot only shows it, a new boot records it again; one that does not
// decode is recorded raw.
func TestReadBERTOncePerBoot(t *testing.T) {
	root, dir := t.TempDir(), t.TempDir()
	log, logs := newLog()
	bert := filepath.Join(root, DefaultBERTPath)
	if err := os.MkdirAll(filepath.Dir(bert), 0o755); err != nil {
		t.Fatal(err)
	}
	if HasBERT(root) {
		t.Fatal("HasBERT with no BERT")
	}
	if err := os.WriteFile(bert, bertRegion("dc3ea0b0-a144-4797-b95b-53fa242b6e1d", 8), 0o644); err != nil {
		t.Fatal(err)
	}
	var got []string
	run := func(boot string) {
		NewReader(dir, nil, time.Second, log).ReadBERT(log, root, boot,
			func(raw []byte, rec *Record) {
				what := "raw"
				if rec != nil {
					what = rec.Severity.String()
				}
				got = append(got, "record "+boot+" "+what)
			},
			func(rec *Record) { got = append(got, "seen "+boot+" "+rec.Severity.String()) })
	}
	run("boot-1")
	run("boot-1")
	run("boot-2")
	if err := os.WriteFile(bert, []byte("short"), 0o644); err != nil {
		t.Fatal(err)
	}
	run("boot-2")
	run("boot-2")
	want := "record boot-1 fatal,seen boot-1 fatal,record boot-2 fatal,record boot-2 raw"
	if s := strings.Join(got, ","); s != want || !HasBERT(root) {
		t.Fatalf("got %s\nwant %s", s, want)
	}
	testutil.Contains(t, "the logs", logs.String(), "the firmware recorded an error before this boot (ACPI BERT)")
	testutil.Contains(t, "the logs", logs.String(), "the host's BERT record could not be decoded; saved raw")
}
