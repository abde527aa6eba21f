package e2e

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/xid"
)

// TestNewXidsFromTheKernelLog is issue 14's done-when: kernel-log Xids the
// catalog lacked before (46, 136, 156, 158, 167, 169, 171, 172) reach
// events.log with NVIDIA's name and our advice, and an NVLink 5 line with its
// decode.
func TestNewXidsFromTheKernelLog(t *testing.T) {
	t.Parallel()
	codes := []int{46, 136, 156, 158, 167, 169, 171, 172}
	var scn strings.Builder
	scn.WriteString("gpus 1\n")
	for i, c := range codes {
		scn.WriteString("at " + strconv.FormatFloat(1+0.2*float64(i), 'f', 1, 64) + " gpu 0 xid " + strconv.Itoa(c) + " to kmsg\n")
	}
	scn.WriteString(`at 3 gpu 0 xid 149 to kmsg msg "NETIR_LINK_EVT  Fatal   XC0 i0 Link 01 (0x021425c6 0x00000000 0x00000000 0x00000000 0x00000000 0x00000000)"` + "\n")
	p := start(t, opts{scenario: scn.String(), kmsg: true})
	p.waitForEvent("the kernel's Xid 149 in events.log", 30*time.Second, "xid=149")
	p.stop()
	ev := readFile(t, filepath.Join(p.dir, "events.log"))
	line := func(code int) string {
		for _, l := range strings.Split(ev, "\n") {
			if strings.Contains(l, "source=kmsg type=Xid xid="+strconv.Itoa(code)+" ") {
				return l
			}
		}
		t.Errorf("no kernel-log line for Xid %d in events.log:\n%s", code, ev)
		return ""
	}
	for _, c := range codes {
		in, ok := xid.Lookup(c)
		if !ok {
			t.Fatalf("Xid %d not in the catalog", c)
		}
		l := line(c)
		for _, want := range []string{"name=" + strconv.Quote(in.Name), "action=" + strconv.Quote(in.Action), "class=" + strconv.Quote(in.Class.String())} {
			if l != "" && !strings.Contains(l, want) {
				t.Errorf("Xid %d line lacks %s:\n%s", c, want, l)
			}
		}
	}
	if l := line(149); l != "" && (!strings.Contains(l, `action="Link fatal`) || !strings.Contains(l, `decode="NETIR_LINK_EVT link 1`)) {
		t.Errorf("Xid 149 link down not decoded as link fatal:\n%s", l)
	}
}
