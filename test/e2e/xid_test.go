package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/xid"
)

// TestNewXidsFromTheKernelLog checks kernel-log Xids end to end: Xids the
// catalog once lacked (46, 136, 156, 158, 167, 169, 171, 172) reach
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

// TestKmsgFileReplaced: a --kmsg file replaced under the running logger
// (renamed away by a rotation, a new file created at its path, as a restarted
// simulator does) is followed by its path: an Xid written to the new file
// reaches events.log, and the switch is logged.
func TestKmsgFileReplaced(t *testing.T) {
	t.Parallel()
	p := start(t, opts{scenario: "gpus 1\n", kmsg: true})
	p.writeKmsg("4,1,1000000,-;NVRM: Xid (PCI:0000:01:00): 13, pid=1, name=x, Graphics SM Warp Exception")
	p.waitForEvent("the Xid of the first file in events.log", 30*time.Second, "source=kmsg type=Xid xid=13 ")
	if err := os.Rename(p.kmsg, p.kmsg+".1"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p.kmsg, []byte("4,1,2000000,-;NVRM: Xid (PCI:0000:01:00): 31, pid=1, name=x, MMU Fault\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p.waitForEvent("the Xid of the new file in events.log", 30*time.Second, "source=kmsg type=Xid xid=31 ")
	p.stop()
	if !strings.Contains(p.stderr.String(), "kernel log file replaced") {
		t.Errorf("the switch to the new file is not logged:\n%s", p.stderr.String())
	}
}
