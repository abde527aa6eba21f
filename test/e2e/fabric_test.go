package e2e

import (
	"regexp"
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
// SXid line in the kernel log FILE is the switch's line, a non-fatal one no
// more, a fatal one the critical reason nvswitch_fatal of both GPUs on the
// fabric (one incident each for a burst, a crash snapshot, reset_gpu);
// system-info and status say which fabric daemons run (none in the test's
// host root).
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
	// An NVSwitch's non-fatal SXid, read from the kernel log file (never
	// the host's): the switch's line and a count, no GPU's reason.
	p.writeKmsg("3,2000,9000000,-;nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 11012, Non-fatal, Link 12 single-bit ECC")
	p.waitForEvent("the non-fatal SXid", 20*time.Second, "gpu=? bus=0000:05:00.0 source=kmsg type=SXid switch=3 sxid=11012 name=\"single-bit ECC error\" severity=nonfatal")

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
	if strings.Contains(events(p.dir), "nvswitch_fatal") {
		t.Errorf("a non-fatal SXid raised nvswitch_fatal:\n%s", events(p.dir))
	}

	// A fatal SXid, twice (a burst): the switch's lines, and on every GPU
	// on the fabric (both: GPU 1's fabric is healthy, but it is on it) the
	// critical reason nvswitch_fatal naming the first, one incident each,
	// and the action reset_gpu (the baseboard reset). GPU 1's incident has
	// its crash snapshot; GPU 0's falls in the cooldown of its route's.
	p.writeKmsg("3,2001,9100000,-;nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 15009, Fatal, Link 12 route GLT DBE",
		"3,2002,9100100,-;nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 15010, Fatal, Link 12 route parity")
	p.waitForEvent("the fatal SXid's reason", 20*time.Second,
		"gpu=? bus=0000:05:00.0 source=kmsg type=SXid switch=3 sxid=15009 name=\"route GLT DBE\" severity=fatal",
		"gpu=? bus=0000:05:00.0 source=kmsg type=SXid switch=3 sxid=15010 name=\"route parity\" severity=fatal",
		"gpu=0 bus=00000000:01:00.0 type=HEALTH_CRITICAL reason=nvswitch_fatal",
		"gpu=1 bus=00000000:21:00.0 type=HEALTH_CRITICAL reason=nvswitch_fatal",
		"SXid 15009 (route GLT DBE) on nvidia-nvswitch3 at 0000:05:00.0",
		"type=ACTION action=reset_gpu")
	_, d = healthStatus(t, p.socketPath())
	for i, g := range d.GPUs {
		if !contains(g.Health.Reasons, "nvswitch_fatal") || g.Health.Verdict != "critical" {
			t.Errorf("after a fatal SXid: GPU %d health %s %v, want critical with nvswitch_fatal", i, g.Health.Verdict, g.Health.Reasons)
		}
	}
	testutil.Contains(t, "metrics", scrapeMetrics(t, addr), `gpu_telemetry_health_reason{gpu="0",reason="nvswitch_fatal",`, "\ngpu_telemetry_sxids_fatal_total 2\n")
	p.stop()
	ev := events(p.dir)
	// GPU 1's fabric stays healthy: its only health line is the switch's.
	for _, l := range strings.Split(ev, "\n") {
		if strings.Contains(l, " gpu=1 ") && strings.Contains(l, "type=HEALTH") && !strings.Contains(l, "type=HEALTH_BASELINE") &&
			!strings.Contains(l, "type=HEALTH_CRITICAL reason=nvswitch_fatal") {
			t.Errorf("healthy GPU 1: %s", l)
		}
	}
	for _, g := range []string{"gpu=0 ", "gpu=1 "} {
		n := 0
		for _, l := range strings.Split(ev, "\n") {
			if strings.Contains(l, " "+g) && strings.Contains(l, "type=HEALTH_CRITICAL reason=nvswitch_fatal") {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%s: %d HEALTH_CRITICAL nvswitch_fatal lines for a burst of two fatal SXids, want 1:\n%s", g, n, ev)
		}
	}
	snapped := false
	for _, f := range snapshots(p.dir, "crash-*-gpu1.log") {
		snapped = snapped || strings.Contains(readFile(t, f), "nvswitch_fatal")
	}
	if !snapped {
		t.Errorf("no crash snapshot of GPU 1 names nvswitch_fatal:\n%s", ev)
	}
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

// A fatal SXid in the kernel log's backlog, read before either GPU's first
// sample says it is on the fabric: it is the host's, pending, and each GPU
// on the fabric raises nvswitch_fatal with its first sample.
func TestFatalSXidBacklog(t *testing.T) {
	t.Parallel()
	p := start(t, opts{scenario: "@b200-fabric", kmsg: true,
		kmsgBefore: []string{"3,2001,9100000,-;nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 15009, Fatal, Link 12 route GLT DBE"}})
	p.waitForEvent("the backlog's fatal SXid's reason", 20*time.Second,
		"gpu=? bus=0000:05:00.0 source=kmsg type=SXid switch=3 sxid=15009",
		"gpu=0 bus=00000000:01:00.0 type=HEALTH_CRITICAL reason=nvswitch_fatal",
		"gpu=1 bus=00000000:21:00.0 type=HEALTH_CRITICAL reason=nvswitch_fatal")
	p.stop()
	if strings.Contains(p.stderr.String(), "no GPU on an NVLink fabric") {
		t.Errorf("the backlog's fatal SXid was logged as no GPU's:\n%s", p.stderr.String())
	}
}

// TestFatalSXidNoFabric: a host whose GPU reports no fabric (a PCIe host
// has no NVSwitch: the line is forged or replayed) reads a fatal SXid twice
// from the kernel log FILE: the switch's lines and their count, no GPU's
// reason, incident or snapshot, and the daemon's log says once that it is
// no GPU's.
func TestFatalSXidNoFabric(t *testing.T) {
	t.Parallel()
	p := start(t, opts{scenario: "gpus 1\ngpu all class b200\ngpu all util_gpu 90\n", oldLib: true, kmsg: true})
	p.waitForRows(0, 5, 20*time.Second)
	p.writeKmsg("3,2000,9000000,-;nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 15009, Fatal, Link 12 route GLT DBE",
		"3,2001,9000100,-;nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 15010, Fatal, Link 12 route parity")
	p.waitForEvent("the fatal SXids", 20*time.Second,
		"gpu=? bus=0000:05:00.0 source=kmsg type=SXid switch=3 sxid=15009",
		"gpu=? bus=0000:05:00.0 source=kmsg type=SXid switch=3 sxid=15010")
	time.Sleep(500 * time.Millisecond) // samples after the lines
	_, d, out := statusAs[healthDoc](t, p.socketPath())
	if len(d.GPUs) != 1 || d.GPUs[0].Health == nil || contains(d.GPUs[0].Health.Reasons, "nvswitch_fatal") {
		t.Errorf("a GPU without a fabric got nvswitch_fatal (or no health):\n%s", out)
	}
	p.stop()
	if ev := events(p.dir); strings.Contains(ev, "nvswitch_fatal") {
		t.Errorf("nvswitch_fatal on a host without a fabric GPU:\n%s", ev)
	}
	if n := strings.Count(p.stderr.String(), "no GPU on an NVLink fabric"); n != 1 {
		t.Errorf("the unattributed fatal SXid logged %d times, want once:\n%s", n, p.stderr.String())
	}
	if len(snapshots(p.dir, "crash-*")) != 0 {
		t.Error("a crash snapshot for a fatal SXid no GPU is on")
	}
}

// TestFabricR535: GPU 0's newer fabric calls are found but answer
// FUNCTION_NOT_FOUND (the re-probe path; TestFabricOlderDrivers plays an
// R535 whose library lacks them), so only the original call answers:
// its probe state, status, clique and cluster UUID are read from it, the
// state's change is an events.log line; the health mask and summary, which
// it lacks, stay absent (null in status, no line), where GPU 1 (v4) has them.
func TestFabricR535(t *testing.T) {
	t.Parallel()
	p, _ := startHealth(t, opts{scenario: `gpus 2
gpu all class b200
gpu 0 fail DeviceGetGpuFabricInfo_v4 function_not_found
gpu 0 fail DeviceGetGpuFabricInfoV function_not_found
gpu 0 fabric_state 2
at 8 gpu 0 fabric_state 3
`}, "GPU 0's fabric probe completing, read from the original call", 30*time.Second,
		"gpu=0 bus=00000000:01:00.0 type=HEALTH counter=fabric_state from=2 to=3 meaning=completed")
	_, d := healthStatus(t, p.socketPath())
	h0, h1 := d.GPUs[0].Health, d.GPUs[1].Health
	for name, want := range map[string]uint64{"fabric_state": 3, "fabric_status": 0, "fabric_clique": 32766} {
		if v := h0.Counters[name]; v == nil || *v != want {
			t.Errorf("GPU 0 %s %v, want %d", name, v, want)
		}
	}
	for _, name := range []string{"fabric_health_mask", "fabric_health"} {
		if v := h0.Counters[name]; v != nil {
			t.Errorf("GPU 0 %s %d from a call without it, want absent", name, *v)
		}
		if v := h1.Counters[name]; v == nil {
			t.Errorf("GPU 1 (v4) %s absent", name)
		}
	}
	if u := h0.FabricClusterUUID; u == nil || *u != "5a5a5a5a-5a5a-5a5a-5a5a-5a5a5a5a5a5a" {
		t.Errorf("GPU 0 fabric_cluster_uuid %v, want 5a5a5a5a-5a5a-5a5a-5a5a-5a5a5a5a5a5a", u)
	}
	p.stop()
	for _, l := range strings.Split(events(p.dir), "\n") {
		if strings.Contains(l, " gpu=0 ") && (strings.Contains(l, "fabric_health_mask") || strings.Contains(l, "counter=fabric_health ")) {
			t.Errorf("GPU 0's health mask or summary, which R535 lacks: %s", l)
		}
	}
}

// TestFabricOlderDrivers: drivers that know fewer of the fabric's calls
// (the simulated driver's fabric_versions; both GPUs on it). R550 has no
// _v4 call and its versioned call answers only the v2 struct: the health
// mask, no summary; R535 has only the original call: neither. A call the
// driver lacks is not exported, and calling it would kill the daemon: it
// is found missing at start and never called. On each the probe state,
// status, clique and cluster UUID are read and the state's change is an
// events.log line; the health mask, where the driver gives it, turns GPU 0
// critical on its unhealthy route (15 s, before the probe completes at
// 20 s; the first sample, which reads the fabric, is well before, with
// room for a start slowed by parallel daemons under -race);
// what the driver lacks stays absent (null in status, no line).
func TestFabricOlderDrivers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, versions string
		mask           bool     // the driver gives the health mask
		lacks          []string // the fabric calls the driver does not export
	}{
		{"R550 versioned call with the v2 struct", "v2 v1", true, []string{"nvmlDeviceGetGpuFabricInfo_v4"}},
		{"R535 original call only", "v1", false, []string{"nvmlDeviceGetGpuFabricInfo_v4", "nvmlDeviceGetGpuFabricInfoV"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			lines := []string{"gpu=0 bus=00000000:01:00.0 type=HEALTH counter=fabric_state from=2 to=3 meaning=completed"}
			if tc.mask {
				lines = append(lines,
					"gpu=0 bus=00000000:01:00.0 type=HEALTH counter=fabric_health_mask from=0 to=20889 meaning=degraded_bandwidth:true,route_recovery:false,route_unhealthy:true,",
					"gpu=0 bus=00000000:01:00.0 type=HEALTH_CRITICAL reason=fabric_route_unhealthy")
			}
			p, _ := startHealth(t, opts{scenario: "fabric_versions " + tc.versions + `
gpus 2
gpu all class b200
gpu 0 fabric_state 2
gpu 0 fabric_health_mask 0
gpu 0 fabric_health_summary 1
at 15 gpu 0 fabric_health_mask 20889
at 15 gpu 0 fabric_health_summary 2
at 20 gpu 0 fabric_state 3
`}, "GPU 0's fabric probe completing", 60*time.Second, lines...)
			_, d := healthStatus(t, p.socketPath())
			for g, gpu := range d.GPUs {
				h := gpu.Health
				want := map[string]uint64{"fabric_state": 3, "fabric_status": 0, "fabric_clique": 32766}
				if tc.mask {
					want["fabric_health_mask"] = []uint64{20889, 20906}[g]
				}
				for name, w := range want {
					if v := h.Counters[name]; v == nil || *v != w {
						t.Errorf("GPU %d %s %v, want %d", g, name, v, w)
					}
				}
				for _, name := range []string{"fabric_health_mask", "fabric_health"} {
					if _, ok := want[name]; !ok && h.Counters[name] != nil {
						t.Errorf("GPU %d %s %d from a driver without it, want absent", g, name, *h.Counters[name])
					}
				}
				if u := h.FabricClusterUUID; u == nil || *u != "5a5a5a5a-5a5a-5a5a-5a5a-5a5a5a5a5a5a" {
					t.Errorf("GPU %d fabric_cluster_uuid %v, want 5a5a5a5a-5a5a-5a5a-5a5a-5a5a5a5a5a5a", g, u)
				}
				if critical := g == 0 && tc.mask; critical != contains(h.Reasons, "fabric_route_unhealthy") {
					t.Errorf("GPU %d health %s %v: want fabric_route_unhealthy %v", g, h.Verdict, h.Reasons, critical)
				}
			}
			p.stop()
			for _, l := range strings.Split(events(p.dir), "\n") {
				if strings.Contains(l, "counter=fabric_health ") || (!tc.mask && strings.Contains(l, "fabric_health_mask")) {
					t.Errorf("a fabric reading the driver lacks: %s", l)
				}
			}
			calls := readCalls(t, p.calls)
			note := regexp.MustCompile(`driver lacks newer functions.*`).FindString(p.stderr.String())
			for _, fn := range tc.lacks {
				if calls[fn] != 0 {
					t.Errorf("%s called %d times on a driver that lacks it", fn, calls[fn])
				}
				if !regexp.MustCompile(`\b` + fn + `\b`).MatchString(note) {
					t.Errorf("the start-up note %q does not name %s", note, fn)
				}
			}
		})
	}
}
