package events

import (
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/counters"
	"github.com/gpu-telemetry/gpu-telemetry/internal/testutil"
	"github.com/gpu-telemetry/gpu-telemetry/kmsg"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
	"github.com/gpu-telemetry/gpu-telemetry/sink"
	"github.com/gpu-telemetry/gpu-telemetry/snapshot"
)

// TestStageXidStorm: an application's Xid (13) storm on one GPU: the
// first LineBurst of the code in a window are written, each an incident;
// the rest are held (no line, no incident, no alert, the first said), yet
// still the GPU's Xids (live view, row flag) and counted; the kernel
// log's report of a held Xid is held with it. Another code (31) has its
// own window, a critical Xid (79) and an unknown code are never held, and
// another GPU's Xid 13 neither. The window's count is one
// XID_LINES_SUPPRESSED line when WindowsEnded is asked after it closes,
// not before.
func TestStageXidStorm(t *testing.T) {
	s := NewStage(Config{Counters: counters.New(), DedupWindow: 5 * time.Second})
	nvml := func(gpu int, code uint64, at time.Time) reading.Event {
		return reading.Event{Time: at, GPU: gpu, Kind: reading.EventXid, Source: reading.SourceNVML, Data: code}
	}
	const storm = LineBurst + 25
	var written, held, firstHeld, shown int
	for i := range storm {
		at := t0.Add(time.Duration(i) * 10 * time.Millisecond)
		r := s.Handle(nvml(0, 13, at))
		if r.Wake && r.Kind == reading.EventXid && r.Code == 13 {
			shown++ // the live view counts it
		}
		if !r.Wake || !r.FlagXid || r.Duplicate {
			t.Fatalf("Xid 13 number %d is not the GPU's Xid: %+v", i, r)
		}
		if r.Held == "" {
			written++
			if len(r.Lines) != 1 || r.Lines[0].Type != sink.TypeXid || r.Critical == nil || r.Critical.Stage != snapshot.StageApplication || r.Alert != Error {
				t.Errorf("Xid 13 number %d: %+v", i, r)
			}
		} else {
			held++
			if r.FirstHeld {
				firstHeld++
			}
			if r.Held != "Xid 13" || len(r.Lines) != 0 || r.Critical != nil || r.Alert != Quiet {
				t.Errorf("held Xid 13 number %d: %+v", i, r)
			}
		}
		// The kernel log's report of the same Xid: written with its
		// first report, held with it.
		kx := kernelXid(t, reading.EventXid, "NVRM: Xid (PCI:0000:01:00): 13, Graphics SM Warp Exception on (GPC 0, TPC 0, SM 0)", at.Add(time.Millisecond), kmsg.Record{Time: time.Hour})
		d := s.Handle(kx)
		if d.Wake || d.FlagXid || d.Critical != nil || (d.Held != "") != (r.Held != "") || (len(d.Lines) == 0) != (r.Held != "") {
			t.Errorf("the kernel log's report of Xid 13 number %d: %+v (first report held %q)", i, d, r.Held)
		}
	}
	if written != LineBurst || held != storm-LineBurst || firstHeld != 1 {
		t.Errorf("%d written, %d held (%d said first); want %d, %d (1)", written, held, firstHeld, LineBurst, storm-LineBurst)
	}
	if shown != storm {
		t.Errorf("live view shown %d Xid 13s, want every one (%d)", shown, storm)
	}
	for i, e := range []reading.Event{nvml(0, 79, t0), nvml(0, 48, t0), nvml(0, 62, t0), nvml(0, 119, t0), nvml(0, 99999, t0)} {
		for j := range LineBurst + 2 {
			e.Time = t0.Add(time.Duration(i*100+j) * time.Second / 1000)
			if r := s.Handle(e); r.Held != "" || len(r.Lines) != 1 || r.Critical == nil {
				t.Fatalf("Xid %d on GPU %d, number %d: held %+v", e.Data, e.GPU, j, r)
			}
		}
	}
	if r := s.Handle(nvml(0, 31, t0.Add(time.Second))); r.Held != "" || len(r.Lines) != 1 {
		t.Errorf("the first Xid 31 in the Xid 13 storm: %+v", r)
	}
	if r := s.Handle(nvml(1, 13, t0.Add(time.Second))); r.Held != "" || len(r.Lines) != 1 {
		t.Errorf("GPU 1's first Xid 13 in GPU 0's storm: %+v", r)
	}
	if got := s.WindowsEnded(t0.Add(LineWindow-time.Millisecond), false); len(got) != 0 {
		t.Errorf("lines before the window ends: %+v", got)
	}
	end := t0.Add(LineWindow)
	got := s.WindowsEnded(end, false)
	if len(got) != 1 {
		t.Fatalf("lines when the window ends: %+v, want the one of Xid 13 on GPU 0", got)
	}
	testutil.Contains(t, "events.log line", got[0].Line(), "time=2026-12-01T12:01:00.000Z host= level=info gpu=0 type=XID_LINES_SUPPRESSED xid=13 lines=50 window=1m0s")
	if again := s.WindowsEnded(end.Add(time.Hour), true); len(again) != 0 {
		t.Errorf("the window said twice: %+v", again)
	}
	if c := counted(s); c["xid_lines_suppressed"] != 2*(storm-LineBurst) {
		t.Errorf("counted %v, want %d Xid lines held (each Xid's two reports)", c, 2*(storm-LineBurst))
	}
	// The next window begins with the code's first Xid written again.
	if r := s.Handle(nvml(0, 13, end.Add(time.Hour))); r.Held != "" || len(r.Lines) != 1 {
		t.Errorf("Xid 13 in the next window: %+v", r)
	}
}

// TestWindowsEndedKernelLines: the KERNEL_LINES_SUPPRESSED line is written
// when the window closes, on the caller's clock, though no line of its
// kind ever comes again; at stop (all) a window still running is summed up
// too, and a window is summed up once.
func TestWindowsEndedKernelLines(t *testing.T) {
	s := NewStage(Config{Counters: counters.New()})
	const corrected = "pcieport 0000:00:03.1: PCIe Bus Error: severity=Corrected, type=Physical Layer, (Receiver ID)"
	r, ok := kmsg.ParseAER(corrected)
	if !ok {
		t.Fatal("not an AER line")
	}
	line := func(gpu int, at time.Time) Record {
		return s.KernelLine(KernelLine{Rec: kmsg.Record{Message: corrected}, Read: at, GPU: gpu, AER: &r})
	}
	for i := range LineBurst + 4 {
		line(1, t0.Add(time.Duration(i)*time.Millisecond))
	}
	for i := range LineBurst + 2 {
		line(2, t0.Add(30*time.Second+time.Duration(i)*time.Millisecond))
	}
	if got := s.WindowsEnded(t0.Add(LineWindow-time.Millisecond), false); len(got) != 0 {
		t.Errorf("lines before the window ends: %+v", got)
	}
	got := s.WindowsEnded(t0.Add(LineWindow), false)
	if len(got) != 1 {
		t.Fatalf("lines when GPU 1's window ends: %+v", got)
	}
	testutil.Contains(t, "events.log line", got[0].Line(), "time=2026-12-01T12:01:00.000Z host= level=info gpu=1 source=kmsg type=KERNEL_LINES_SUPPRESSED kind=AER/corrected lines=4 window=1m0s")
	// GPU 1's next line opens a window with nothing left to sum up.
	if next := line(1, t0.Add(LineWindow+time.Second)); len(next.Lines) != 1 || next.Lines[0].Type != sink.TypeAER {
		t.Errorf("GPU 1's next line: %+v", next.Lines)
	}
	stop := s.WindowsEnded(t0.Add(LineWindow+2*time.Second), true)
	if len(stop) != 1 || stop[0].GPU != 2 || stop[0].Get("lines") != "2" {
		t.Errorf("at stop: %+v, want GPU 2's 2 lines", stop)
	}
	if again := s.WindowsEnded(t0.Add(time.Hour), true); len(again) != 0 {
		t.Errorf("a window summed up twice: %+v", again)
	}
}
