package events

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/counters"
	"github.com/gpu-telemetry/gpu-telemetry/internal/kclock"
	"github.com/gpu-telemetry/gpu-telemetry/internal/testutil"
	"github.com/gpu-telemetry/gpu-telemetry/kmsg"
	"github.com/gpu-telemetry/gpu-telemetry/sink"
	"github.com/gpu-telemetry/gpu-telemetry/snapshot"
)

// Every kind of NVRM line is written with an events.log type the class
// table calls an incident, and has a crash snapshot reason: a kind added to
// kmsg without its line here fails.
func TestNVRMLinesHaveAnIncidentType(t *testing.T) {
	for k := kmsg.NVRMKind(1); k <= kmsg.NVRMGSPCrash; k++ {
		line, ok := nvrmLines[k]
		if !ok {
			t.Errorf("NVRM kind %d has no events.log line", k)
			continue
		}
		if !slices.Contains(sink.EventTypes(), line.typ) || line.reason == "" {
			t.Errorf("NVRM kind %d: type %q (not an incident type of %v) or no reason %q", k, line.typ, sink.EventTypes(), line.reason)
		}
	}
	if len(nvrmLines) != int(kmsg.NVRMGSPCrash) {
		t.Errorf("nvrmLines has %d kinds, kmsg %d", len(nvrmLines), kmsg.NVRMGSPCrash)
	}
}

// TestStageKernelLines: what the stage makes of kernel AER and NVRM lines:
// an uncorrectable AER error is an incident, a corrected one is not; the
// lines over the burst limit are held (the first one said), and the next
// window's first line comes after the one that sums them up; a replayed
// NVRM line is an incident of when the kernel logged it, its line ending
// ktime, text, backlog.
func TestStageKernelLines(t *testing.T) {
	clock := kclock.Anchored(t0, 2*time.Hour)
	s := NewStage(Config{Counters: counters.New(), KernelClock: clock})
	aer := func(msg string, read time.Time) Record {
		t.Helper()
		r, ok := kmsg.ParseAER(msg)
		if !ok {
			t.Fatalf("not an AER line: %q", msg)
		}
		return s.KernelLine(KernelLine{Rec: kmsg.Record{Time: clock.At(read), Message: msg}, Read: read, GPU: 1, Bus: "00000000:02:00.0", AER: &r})
	}
	fatal := aer("pcieport 0000:00:03.1: AER: Uncorrected (Fatal) error received: 0000:02:00.0", t0)
	if len(fatal.Lines) != 1 || fatal.Critical == nil || fatal.Critical.Stage != snapshot.StageFault || fatal.Alert != Error ||
		!fatal.Critical.Time.Equal(t0) || fatal.Reason != "PCIe AER uncorrectable-fatal error on the GPU's path (kmsg)" {
		t.Fatalf("fatal AER: %+v", fatal)
	}
	testutil.Contains(t, "events.log line", fatal.Lines[0].Line(), "gpu=1 bus=00000000:02:00.0 source=kmsg type=AER severity=uncorrectable-fatal device=0000:00:03.1 reporter=0000:02:00.0 ktime=7200.000000 text=")
	const corrected = "pcieport 0000:00:03.1: PCIe Bus Error: severity=Corrected, type=Physical Layer, (Receiver ID)"
	var firstHeld, held int
	for i := range LineBurst + 3 {
		r := aer(corrected, t0.Add(time.Duration(i)*time.Millisecond))
		switch {
		case r.Critical != nil || r.Alert != Quiet:
			t.Fatalf("corrected AER %d is an incident: %+v", i, r)
		case r.Held != "":
			held++
			if r.FirstHeld {
				firstHeld++
			}
			if r.Held != "AER/corrected" || len(r.Lines) != 0 {
				t.Errorf("held line %d: %+v", i, r)
			}
		case len(r.Lines) != 1:
			t.Errorf("corrected AER %d: %d lines", i, len(r.Lines))
		}
	}
	if held != 3 || firstHeld != 1 {
		t.Errorf("%d held (%d said first), want 3 (1)", held, firstHeld)
	}
	next := aer(corrected, t0.Add(LineWindow))
	if len(next.Lines) != 2 || next.Lines[0].Type != sink.TypeKernelLinesSuppressed || next.Lines[1].Type != sink.TypeAER {
		t.Fatalf("the next window's first line: %+v", next.Lines)
	}
	testutil.Contains(t, "events.log line", next.Lines[0].Line(), "gpu=1 source=kmsg type=KERNEL_LINES_SUPPRESSED kind=AER/corrected lines=3 window=1m0s")

	msg := "NVRM: GPU4 _kgspLogRpcTimeout: ********************************* GSP Timeout **********************************"
	n, ok := kmsg.ParseNVRM(msg)
	if !ok {
		t.Fatalf("not an NVRM line: %q", msg)
	}
	logged := t0.Add(-time.Hour)
	gsp := s.KernelLine(KernelLine{Rec: kmsg.Record{Time: clock.At(logged), Message: msg, Backlog: true}, Read: t0, GPU: -1, NVRM: &n})
	if len(gsp.Lines) != 1 || gsp.Critical == nil || gsp.Critical.Stage != snapshot.StageFirmware || !gsp.Critical.Time.Equal(logged) || gsp.Critical.What != "GSP RPC timeout" {
		t.Fatalf("replayed GSP timeout: %+v", gsp)
	}
	if got := gsp.Lines[0].Line(); !strings.Contains(got, "gpu=? source=kmsg type=GSP_TIMEOUT driver_gpu=4 ktime=3600.000000 text=") || !strings.HasSuffix(got, " backlog=true") {
		t.Errorf("GSP timeout line %s", got)
	}
	if c := counted(s); c["kernel_lines"] != 1+LineBurst+1+1 || c["kernel_lines_suppressed"] != 3 {
		t.Errorf("counted %v", c)
	}
}
