package xid

import (
	"strings"
	"testing"

	"github.com/go-logfmt/logfmt"

	"github.com/gpu-telemetry/gpu-telemetry/internal/testutil"
)

// samples are old and new Xids as NVML (no text) or the kernel log (the text
// after "N, ") reports them.
var samples = []struct {
	code int
	text string
}{
	{13, ""},
	{13, "Graphics SM Warp Exception on (GPC 0, TPC 1, SM 0): Out Of Range Address"},
	{31, "pid=1234, name=python3, Ch 00000008, intr 00000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_0 faulted @ 0x7f_00000000. Fault is of type FAULT_PDE ACCESS_TYPE_READ"},
	{45, "pid=1234, name=python3, Ch 00000008"},
	{46, "pid='<unknown>', name=<unknown>, GPU stopped processing"},
	{48, "An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 6, subpartition 0."},
	{79, "pid='<unknown>', name=<unknown>, GPU has fallen off the bus."},
	{119, "pid=1, name=x, Timeout after 45s of waiting for RPC response from GPU0 GSP!"},
	{136, "pid='<unknown>', name=<unknown>, simulated Xid 136"},
	{144, "SAW_MVB Fatal XC0 i0 Link 03 (0x00000021 0x00000002 0x00000000 0x00000000 0x00000000 0x00000000)"},
	{145, "RLW_REMAP Nonfatal XC1 i0 Link 07 (0x00000082 0x00000004 0x00000000 0x00000000 0x00000000 0x00000000)"},
	{149, "NETIR_LINK_EVT  Fatal   XC0 i0 Link 01 (0x021425c6 0x00000000 0x00000000 0x00000000 0x00000000 0x00000000)"},
	{149, "NETIR_BER_EVENT Nonfatal XC0 i0 Link 04 (0x00000226 0x00000002)"},
	{149, ""},
	{150, "MSE_WATCHDOG Fatal XC0 i0 Link 00 (0x00000000 0x00000000)"},
	{154, "GPU recovery action changed from 0x0 (None) to 0x3 (Drain P2P)"},
	{154, "GPU recovery action changed from 0x3 (Drain P2P) to 0x4 (Drain and Reset)"},
	{154, "GPU recovery action changed from 0x0 (None) to 0x6 (Bus Reset)"},
	{155, "pid='<unknown>', name=<unknown>, link 3 went down"},
	{156, ""},
	{158, "pid='<unknown>', name=<unknown>, fatal timeout"},
	{162, ""},
	{167, ""},
	{169, ""},
	{171, ""},
	{172, ""},
	{999, "pid=1, name=x, from a newer driver"},
}

// pairs is alternating keys and values as logfmt, as events.log has them.
func pairs(kv []string) string {
	a := make([]any, len(kv))
	for i, s := range kv {
		a[i] = s
	}
	b, err := logfmt.MarshalKeyvals(a...)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// TestExplainGolden pins what reaches events.log (the Xid's key=value pairs
// after "source=... type=Xid") and a crash snapshot's "Reason:" line for a
// sample of old and new Xids (rewrite with -update).
func TestExplainGolden(t *testing.T) {
	var b strings.Builder
	for _, s := range samples {
		e := ExplainDetail(s.code, Detail(s.code, s.text))
		b.WriteString("text: " + s.text + "\n")
		b.WriteString("events.log: " + pairs(e.Fields()) + "\n")
		b.WriteString("Reason: " + e.Reason("kmsg") + "\n\n")
	}
	for _, r := range []struct {
		v     uint64
		words string
	}{{1, "GPU Reset Required"}, {3, ""}, {4, "Drain and Reset"}, {5, "IMEX Domain Recovery"}, {7, ""}} {
		b.WriteString("recovery events.log: " + pairs(RecoveryFields(r.v, r.words)) + "\n")
		b.WriteString("recovery Reason: " + RecoveryReason(r.v, r.words, "nvml") + "\n\n")
	}
	testutil.Golden(t, "explain.golden", []byte(b.String()))
}

func TestExplainNVLink5(t *testing.T) {
	fatal := ExplainDetail(149, Detail(149, "NETIR_LINK_EVT Fatal XC0 i0 Link 01 (0x021425c6 0x00000000)"))
	if !strings.HasPrefix(fatal.Action, "Link fatal") || fatal.Bucket != "RESET_GPU" || fatal.Decode == "" {
		t.Errorf("link down: %+v", fatal)
	}
	quiet := ExplainDetail(144, Detail(144, "SAW_MVB Nonfatal XC0 i0 Link 03 (0x00000021 0x00000004)"))
	if !strings.HasPrefix(quiet.Action, "Non-fatal") || quiet.Bucket != "IGNORE" {
		t.Errorf("non-fatal SAW: %+v", quiet)
	}
	undecoded := ExplainDetail(144, Detail(144, "SAW_MVB Fatal (0x00000021 0x00000040)"))
	if undecoded.Action != catalog[144].Action || !strings.Contains(undecoded.Decode, "not decoded") {
		t.Errorf("undecodable line: %+v", undecoded)
	}
	if e := ExplainDetail(150, Detail(150, "")); !strings.HasPrefix(e.Action, "Fatal") {
		t.Errorf("Xid 150 without fields must still be fatal: %q", e.Action)
	}
}

func TestExplainUnknown(t *testing.T) {
	e := ExplainDetail(999, Detail(999, ""))
	if e.Known || e.Name != "unknown Xid" || e.Action == "" {
		t.Errorf("%+v", e)
	}
	for i, f := range e.Fields() {
		if i%2 == 0 && (f == "class" || f == "bucket") {
			t.Errorf("unknown Xid has %s", f)
		}
	}
}

// TestRenderGolden pins what `gpu-telemetry xid` prints (rewrite with -update).
func TestRenderGolden(t *testing.T) {
	var b strings.Builder
	for _, s := range []struct {
		code int
		text string
	}{{46, ""}, {149, "NETIR_LINK_EVT Fatal XC0 i0 Link 01 (0x021425c6 0x00000000)"}, {154, "GPU recovery action changed from 0x0 (None) to 0x5 (IMEX Domain Recovery)"}, {167, ""}, {999, ""}} {
		b.WriteString(Render(ExplainDetail(s.code, Detail(s.code, s.text))) + "\n")
	}
	b.WriteString(List())
	testutil.Golden(t, "render.golden", []byte(b.String()))
}

// TestRecoveryField: Xid 154's line carries the new action as recovery=
// whenever the driver's text gave it; a report without text (NVML's) has
// none, and its action says where the action is then.
func TestRecoveryField(t *testing.T) {
	e := ExplainDetail(RecoveryXid, Detail(RecoveryXid, "GPU recovery action changed from 0x0 (None) to 0x3 (Drain P2P)"))
	testutil.Contains(t, "events.log fields", pairs(e.Fields()), "recovery=3")
	bare := ExplainDetail(RecoveryXid, Detail(RecoveryXid, ""))
	for i, f := range bare.Fields() {
		if i%2 == 0 && f == "recovery" {
			t.Errorf("a report without text has %s", f)
		}
	}
	testutil.Contains(t, "action without text", bare.Action, "GpuRecoveryAction line")
}
