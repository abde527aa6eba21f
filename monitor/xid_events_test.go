package monitor

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/testutil"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// TestXidLinesGolden pins the events.log lines and the crash snapshot's
// Reason and Kernel log clock lines for a sample of old and new Xids, from
// NVML and from the kernel log (issue 14). The timestamp at the start of each
// events.log line is cut (it is local time).
func TestXidLinesGolden(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 2, nil)
		kmsgLine := func(code, text string) string { return "NVRM: Xid (PCI:0000:02:00): " + code + ", " + text }
		events := []reading.Event{
			{GPU: 0, Kind: reading.EventXid, Source: reading.SourceNVML, Data: 13},
			{GPU: 0, Kind: reading.EventXid, Source: reading.SourceNVML, Data: 48},
			{GPU: 1, Kind: reading.EventXid, Source: reading.SourceKmsg, Data: 46, Text: kmsgLine("46", "pid='<unknown>', name=<unknown>, GPU stopped processing")},
			{GPU: 1, Kind: reading.EventXid, Source: reading.SourceKmsg, Data: 149,
				Text: kmsgLine("149", "NETIR_LINK_EVT  Fatal   XC0 i0 Link 01 (0x021425c6 0x00000000 0x00000000 0x00000000 0x00000000 0x00000000)")},
			{GPU: 1, Kind: reading.EventXid, Source: reading.SourceKmsg, Data: 154, Text: kmsgLine("154", "GPU recovery action changed from 0x0 (None) to 0x3 (Drain P2P)")},
			{GPU: 1, Kind: reading.EventRecovery, Source: reading.SourceKmsg, Data: 3, Text: kmsgLine("154", "GPU recovery action changed from 0x0 (None) to 0x3 (Drain P2P)")},
			{GPU: 0, Kind: reading.EventRecovery, Source: reading.SourceNVML, Data: 6},
			{GPU: 1, Kind: reading.EventXid, Source: reading.SourceKmsg, Data: 171, Text: kmsgLine("171", "pid='<unknown>', name=<unknown>, DRAM")},
			{GPU: 0, Kind: reading.EventXid, Source: reading.SourceNVML, Data: 999},
		}
		r.run(2*time.Second, func() {
			time.Sleep(500 * time.Millisecond)
			for i, e := range events {
				e.Time = time.Now().Add(time.Duration(i) * time.Millisecond)
				r.m.onEvent(e)
			}
		})
		ev, err := os.ReadFile(filepath.Join(r.dir, "events.log"))
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		for _, l := range strings.Split(strings.TrimSuffix(string(ev), "\n"), "\n") {
			if _, rest, ok := strings.Cut(l, " "); ok && (strings.Contains(rest, "type=Xid") || strings.Contains(rest, "type=GpuRecoveryAction")) {
				b.WriteString(rest + "\n")
			}
		}
		// The first snapshot of each GPU (later ones are within the cooldown).
		crashes, _ := filepath.Glob(filepath.Join(r.dir, "crashes", "crash-*.log"))
		if len(crashes) != 2 {
			t.Fatalf("crash snapshots %v, want one per GPU", crashes)
		}
		header := regexp.MustCompile(`(?m)^(Reason|Kernel log clock): .*$`)
		for _, c := range crashes {
			data, err := os.ReadFile(c)
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range header.FindAllString(string(data), -1) {
				b.WriteString(l + "\n")
			}
		}
		testutil.Golden(t, "xid-lines.golden", b.Bytes())
	})
}
