package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/testutil"
)

// TestFabricStory: b200-fabric.scn. GPU 0's fabric probe goes from in
// progress to completed, then a route goes unhealthy: each change is an
// events.log line with its meaning, the route makes the verdict critical
// (fabric_route_unhealthy) and asks to recover the fabric; the clique and
// the cluster UUID are in the baseline line and status (no metric); an NVSwitch's
// SXid line in the kernel log FILE is the switch's line; system-info and
// status say which fabric daemons run (none in the test's host root).
func TestFabricStory(t *testing.T) {
	t.Parallel()
	p, addr := startHealth(t, opts{scenario: "@b200-fabric", kmsg: true}, "the fabric's route unhealthy", 30*time.Second,
		"gpu=0 bus=00000000:01:00.0 type=HEALTH_BASELINE",
		" fabric_clique=32766 fabric_cluster_uuid=5a5a5a5a-5a5a-5a5a-5a5a-5a5a5a5a5a5a",
		"type=HEALTH counter=fabric_state from=2 to=3 meaning=completed",
		"type=HEALTH counter=fabric_health_mask from=0 to=20906 meaning=degraded_bandwidth:false,route_recovery:false,route_unhealthy:false,access_timeout_recovery:false,incorrect_configuration:none,partition_assigned:true,global_fabric_manager:connected",
		"type=HEALTH counter=fabric_health_mask from=20906 to=20889 meaning=degraded_bandwidth:true,route_recovery:false,route_unhealthy:true,",
		"type=HEALTH counter=fabric_health from=1 to=2 meaning=unhealthy",
		"type=HEALTH_CRITICAL reason=fabric_route_unhealthy")
	// An NVSwitch's SXid, read from the kernel log file (never the host's).
	p.writeKmsg("3,2000,9000000,-;nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 15009, Fatal, Link 12 route GLT DBE")
	p.waitForEvent("the SXid", 20*time.Second, "gpu=? bus=0000:05:00.0 source=kmsg type=SXid switch=3 sxid=15009 name=\"route GLT DBE\" severity=fatal")

	_, d := healthStatus(t, p.socketPath())
	h0, h1 := d.GPUs[0].Health, d.GPUs[1].Health
	if h0.Verdict != "critical" || !contains(h0.Reasons, "fabric_route_unhealthy") {
		t.Errorf("GPU 0 health %s %v, want critical with fabric_route_unhealthy", h0.Verdict, h0.Reasons)
	}
	if v := h0.Counters["fabric_state"]; v == nil || *v != 3 {
		t.Errorf("GPU 0 fabric_state %v, want 3", v)
	}
	// The simulated driver's one unicast clique (its default id) and
	// cluster UUID (every byte 0x5a).
	if v := h0.Counters["fabric_clique"]; v == nil || *v != 32766 {
		t.Errorf("GPU 0 fabric_clique %v, want 32766", v)
	}
	if u := h0.FabricClusterUUID; u == nil || *u != "5a5a5a5a-5a5a-5a5a-5a5a-5a5a5a5a5a5a" {
		t.Errorf("GPU 0 fabric_cluster_uuid %v, want 5a5a5a5a-5a5a-5a5a-5a5a-5a5a5a5a5a5a", u)
	}
	if h1.Verdict != "ok" {
		t.Errorf("GPU 1 (a healthy fabric) health %s %v", h1.Verdict, h1.Reasons)
	}
	_, doc, out := statusAs[struct {
		Host struct {
			Fabric []struct {
				Name    string `json:"name"`
				Running bool   `json:"running"`
			} `json:"fabric_services"`
		} `json:"host"`
		GPUs []struct {
			Action *struct {
				Name string `json:"action"`
			} `json:"action"`
		} `json:"gpus"`
	}](t, p.socketPath())
	if f := doc.Host.Fabric; len(f) != 3 || f[0].Name != "nvidia-fabricmanager" || f[0].Running {
		t.Errorf("host.fabric_services %+v, want the three daemons, none running:\n%s", f, out)
	}
	body := scrapeMetrics(t, addr)
	testutil.Contains(t, "metrics", body,
		`gpu_telemetry_health_fabric_state{gpu="0",`,
		`gpu_telemetry_health_fabric_health_mask{gpu="0",`,
		`gpu_telemetry_health_reason{gpu="0",reason="fabric_route_unhealthy",`,
		"\ngpu_telemetry_fabric_service_running{service=\"nvidia-fabricmanager\"} 0\n",
		"\ngpu_telemetry_fabric_service_running{service=\"nvlsm\"} 0\n")
	if strings.Contains(body, "fabric_clique") || strings.Contains(body, "cluster_uuid") {
		t.Error("metrics export the fabric clique or cluster UUID: ids, not quantities")
	}
	if _, text := status(t, "--socket", p.socketPath()); !strings.Contains(text, "fabric services: nvidia-fabricmanager NOT running, nvidia-imex NOT running, nvlsm NOT running") {
		t.Errorf("the status text does not say which fabric daemons run:\n%s", text)
	}
	testutil.CheckMetrics(t, []byte(body))
	p.stop()
	quietGPU1(t, p.dir)
	ev := events(p.dir)
	if !strings.Contains(ev, "type=ACTION action=recover_fabric") {
		t.Errorf("no ACTION line asking to recover the fabric:\n%s", ev)
	}
	si := readFile(t, p.dir+"/system-info.txt")
	testutil.Contains(t, "system-info.txt", si, "--- NVLink fabric ---",
		"Services: nvidia-fabricmanager not running, nvidia-imex not running, nvlsm not running", "fabric")
}

// TestFabricOldDriver: a B200 on a driver without the fabric calls: no
// fabric reading (status has neither clique nor cluster UUID), no fabric
// section, and the start-up line names both calls among those the driver
// lacks.
func TestFabricOldDriver(t *testing.T) {
	t.Parallel()
	p := start(t, opts{scenario: "gpus 1\ngpu all class b200\ngpu all util_gpu 90\n", oldLib: true})
	p.waitForRows(0, 20, 20*time.Second)
	_, d, out := statusAs[healthDoc](t, p.socketPath())
	if len(d.GPUs) != 1 || d.GPUs[0].Health == nil {
		t.Fatalf("status --json: no health for the GPU:\n%s", out)
	} else if h := d.GPUs[0].Health; h.Counters["fabric_clique"] != nil || h.FabricClusterUUID != nil {
		t.Errorf("status has a fabric clique %v or cluster UUID %v from a driver without the calls", h.Counters["fabric_clique"], h.FabricClusterUUID)
	}
	p.stop()
	stderr := p.stderr.String()
	if n := strings.Count(stderr, "driver lacks newer functions"); n != 1 ||
		!strings.Contains(stderr, "nvmlDeviceGetGpuFabricInfo_v4") || !strings.Contains(stderr, "nvmlDeviceGetGpuFabricInfoV") {
		t.Errorf("want one start-up line naming both fabric calls:\n%s", stderr)
	}
	ev := events(p.dir)
	if strings.Contains(ev, "fabric_") {
		t.Errorf("fabric readings from a driver without the calls:\n%s", ev)
	}
	if si := readFile(t, p.dir+"/system-info.txt"); strings.Contains(si, "NVLink fabric") {
		t.Errorf("system-info has a fabric section on a driver without the calls")
	}
}
