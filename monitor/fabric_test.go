package monitor

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A fabric daemon that stops running, then starts again, is a
// FABRIC_SERVICE line each time (the stop notable, the start routine) and
// the host view's scan says which run.
func TestFabricServiceStopsAndStarts(t *testing.T) {
	root := t.TempDir()
	proc := func(pid, exe string) {
		p := filepath.Join(root, "proc", pid)
		if exe == "" {
			if err := os.RemoveAll(p); err != nil {
				t.Fatal(err)
			}
			return
		}
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(p, "cmdline"), []byte("/usr/bin/"+exe+"\x00-c\x00x.cfg\x00"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r := newRig(t, 1, func(c *Config) { c.HostRoot = root })
	m := r.m
	proc("1234", "nv-fabricmanager")
	m.scanFabricServices() // the first scan: what runs, no line
	proc("1234", "")
	if s := m.scanFabricServices(); s[0].Name != "nvidia-fabricmanager" || s[0].PID != 0 {
		t.Fatalf("after the daemon died, the scan says %+v", s)
	}
	proc("1300", "nv-fabricmanager")
	m.scanFabricServices()
	b, _ := os.ReadFile(filepath.Join(m.cfg.LogDir, EventsLog))
	var got []string
	for _, l := range strings.Split(string(b), "\n") {
		if i := strings.Index(l, "level="); i >= 0 && strings.Contains(l, "type=FABRIC_SERVICE") {
			got = append(got, l[i:])
		}
	}
	want := []string{
		"level=warning gpu=? source=proc type=FABRIC_SERVICE service=nvidia-fabricmanager state=stopped pid=1234",
		"level=info gpu=? source=proc type=FABRIC_SERVICE service=nvidia-fabricmanager state=running pid=1300",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("FABRIC_SERVICE lines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
