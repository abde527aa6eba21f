package monitor

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpu-telemetry/gpu-telemetry/internal/testutil"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
	"github.com/gpu-telemetry/gpu-telemetry/sampler/fakenvml"
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

// A GPU's fabric clique and cluster UUID are in its health baseline line;
// its move to another clique and to another cluster is a HEALTH line each,
// the UUID in its canonical text.
func TestFabricCliqueAndClusterLines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fabric := func(b byte, clique uint32) *nvml.GpuFabricInfo_v4 {
			f := &nvml.GpuFabricInfo_v4{State: reading.FabricCompleted, HealthMask: 0x51aa, HealthSummary: 1, NumCliques: 1}
			f.Cliques[0].Id = clique
			for i := range f.ClusterUuid {
				f.ClusterUuid[i] = b
			}
			return f
		}
		lib := fakeLib(1)
		lib.Devs[0].Fabric = fabric(0x5a, 1)
		r := newRigOn(t, lib, nil)
		r.run(4*time.Second, func() {
			time.Sleep(2 * time.Second)
			r.devs[0].Update(func(d *fakenvml.Dev) { d.Fabric = fabric(0x6b, 2) })
		})
		ev, err := os.ReadFile(filepath.Join(r.dir, "events.log"))
		if err != nil {
			t.Fatal(err)
		}
		testutil.Contains(t, "events.log", string(ev),
			" fabric_clique=1 fabric_cluster_uuid=5a5a5a5a-5a5a-5a5a-5a5a-5a5a5a5a5a5a",
			"type=HEALTH counter=fabric_clique from=1 to=2\n",
			"type=HEALTH counter=fabric_cluster_uuid from=5a5a5a5a-5a5a-5a5a-5a5a-5a5a5a5a5a5a to=6b6b6b6b-6b6b-6b6b-6b6b-6b6b6b6b6b6b\n")
	})
}
