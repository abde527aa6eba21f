package e2e

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/testutil"
)

// healthDoc is the part of status --json's health object the tests read.
type healthDoc struct {
	GPUs []struct {
		Health *struct {
			Verdict  string             `json:"verdict"`
			Reasons  []string           `json:"reasons"`
			Counters map[string]*uint64 `json:"counters"`
			// FabricClusterUUID: null when not read or in no cluster.
			FabricClusterUUID *string `json:"fabric_cluster_uuid"`
			NVLink            []struct {
				Link     int                 `json:"link"`
				State    *string             `json:"state"`
				Counters map[string]*float64 `json:"counters"`
			} `json:"nvlink"`
			RemapHistogram *struct {
				Max, High uint32
			} `json:"remap_histogram"`
		} `json:"health"`
	} `json:"gpus"`
}

func healthStatus(t *testing.T, sock string) (int, healthDoc) {
	t.Helper()
	code, d, out := statusAs[healthDoc](t, sock)
	if len(d.GPUs) != 2 || d.GPUs[0].Health == nil || d.GPUs[1].Health == nil {
		t.Fatalf("status --json: no health for both GPUs:\n%s", out)
	}
	return code, d
}

// startHealth starts a scenario with metrics on and waits up to limit for
// the events.log lines of its story (what); it returns the metrics address.
func startHealth(t *testing.T, o opts, what string, limit time.Duration, lines ...string) (*proc, string) {
	t.Helper()
	o.args = append(o.args, "--metrics-listen", "127.0.0.1:0")
	p := start(t, o)
	addr := p.metricsAddr()
	p.waitForEvent(what, limit, lines...)
	return p, addr
}

// startB200Story plays the B200 story scenario (with the kernel log) from
// offset seconds in, as startHealth with 30 s to tell it, then waits 1.5 s
// more: the slow tier reads once a second, so the rows after the change
// carry it.
func startB200Story(t *testing.T, scenario string, offset int, what string, lines ...string) (*proc, string) {
	t.Helper()
	p, addr := startHealth(t, opts{scenario: scenario, kmsg: true, env: []string{fmt.Sprintf("SIMNVML_TIME_OFFSET=%d", offset)}}, what, 30*time.Second, lines...)
	time.Sleep(1500 * time.Millisecond)
	return p, addr
}

// lastRow is the CSV's last row of GPU gpu.
func (p *proc) lastRow(gpu int) (table, []string) {
	p.t.Helper()
	tb := readCSV(p.t, p.csvFile(gpu))
	if len(tb.rows) == 0 {
		p.t.Fatalf("no rows for GPU %d", gpu)
	}
	return tb, tb.rows[len(tb.rows)-1]
}

// wantLastRow checks cells of GPU gpu's last CSV row, by column ("":
// empty, absent).
func (p *proc) wantLastRow(gpu int, want map[string]string) (table, []string) {
	p.t.Helper()
	tb, row := p.lastRow(gpu)
	for col, w := range want {
		if got := tb.get(row, col); got != w {
			p.t.Errorf("GPU %d last row: %s = %q, want %q", gpu, col, got, w)
		}
	}
	return tb, row
}

// quietGPU1 fails on an events.log line of health news about GPU 1 (the
// scenarios' healthy GPU) other than its baseline.
func quietGPU1(t *testing.T, dir string) {
	t.Helper()
	for _, l := range strings.Split(events(dir), "\n") {
		if strings.Contains(l, " gpu=1 ") && strings.Contains(l, "type=HEALTH") && !strings.Contains(l, "type=HEALTH_BASELINE") {
			t.Errorf("healthy GPU 1: %s", l)
		}
	}
}

// TestHealthB200ECCStory: b200-ecc.scn from 22 s on (SBEs still climbing):
// the counters reach the CSV, events.log, status, metrics and the crash
// snapshot, the DBE is critical, the pending remap a warning, and the
// healthy GPU 1 shows nothing.
func TestHealthB200ECCStory(t *testing.T) {
	t.Parallel()
	p, addr := startB200Story(t, "@b200-ecc", 22, "the DBE",
		"gpu=0 bus=00000000:01:00.0 type=HEALTH counter=ecc_dbe_volatile from=0 to=1 delta=+1",
		"type=HEALTH_CRITICAL reason=ecc_dbe",
		"type=HEALTH_WARNING reason=remap_pending",
		"type=HEALTH counter=remap_pending from=0 to=1",
		"source=nvml type=HEALTH_EVENT event=DoubleBitEccError severity=critical",
		"source=nvml type=HEALTH_EVENT event=DramRetirementEvent severity=notable",
		"type=Xid xid=48",
		// The remapper histogram: read at start (in the baseline), again
		// when the remap counts changed, and its change written.
		"gpu=0 bus=00000000:01:00.0 type=HEALTH_BASELINE",
		"remap_histogram=max:63,high:1,partial:0,low:0,none:0",
		"type=HEALTH counter=remap_histogram from=max:63,high:1,partial:0,low:0,none:0 to=max:62,high:2,partial:0,low:0,none:0")
	tb, _ := p.wantLastRow(0, map[string]string{"ecc_mode": "1", "ecc_dbe_volatile": "1", "ecc_sbe_volatile": "60",
		"remap_pending": "1", "remap_uncorrectable": "1", "nvlink_links": "18", "nvlink_up": "18",
		"retired_pages_sbe": "", "c2c_links": ""})
	flagged := false
	for _, r := range tb.rows {
		if strings.Contains(tb.get(r, "flags"), "HEALTH_CRIT(ecc_dbe)") {
			flagged = true
		}
	}
	if !flagged {
		t.Errorf("no row flagged HEALTH_CRIT(ecc_dbe)")
	}
	code, d := healthStatus(t, p.socketPath())
	h0, h1 := d.GPUs[0].Health, d.GPUs[1].Health
	if h0.Verdict != "critical" || !contains(h0.Reasons, "ecc_dbe") || !contains(h0.Reasons, "remap_pending") {
		t.Errorf("GPU 0 health %s %v, want critical with ecc_dbe and remap_pending", h0.Verdict, h0.Reasons)
	}
	if v := h0.Counters["ecc_dbe_volatile"]; v == nil || *v != 1 {
		t.Errorf("GPU 0 ecc_dbe_volatile %v", v)
	}
	if h0.Counters["retired_pages_sbe"] != nil {
		t.Errorf("retired pages on a B200: %v, want null", *h0.Counters["retired_pages_sbe"])
	}
	if r := h0.RemapHistogram; r == nil || r.Max != 62 || r.High != 2 {
		t.Errorf("GPU 0 remap_histogram %+v, want max 62 high 2", r)
	}
	if r := h1.RemapHistogram; r == nil || r.Max != 64 {
		t.Errorf("GPU 1 remap_histogram %+v, want max 64", r)
	}
	if h1.Verdict != "ok" || len(h1.Reasons) != 0 || len(h1.NVLink) != 18 {
		t.Errorf("GPU 1 health %s %v, %d links", h1.Verdict, h1.Reasons, len(h1.NVLink))
	}
	if code != 2 {
		t.Logf("status exit %d", code)
	}
	body := scrapeMetrics(t, addr)
	testutil.Contains(t, "metrics", body,
		`gpu_telemetry_health_ecc_dbe_volatile_total{gpu="0",`,
		`gpu_telemetry_health_verdict{gpu="0",uuid=`,
		`gpu_telemetry_health_reason{gpu="0",reason="ecc_dbe",`,
		`gpu_telemetry_health_remap_pending{gpu="0",`)
	testutil.CheckMetrics(t, []byte(body))
	if strings.Contains(body, `gpu_telemetry_nvlink_link_down{`) || strings.Contains(body, `gpu_telemetry_health_reason{gpu="1"`) {
		t.Errorf("healthy links or GPU 1 export health series they should not")
	}
	p.stop()
	quietGPU1(t, p.dir)
	ev := events(p.dir)
	snaps := snapshots(p.dir, "crash-*-gpu0.log")
	if len(snaps) == 0 {
		t.Fatalf("no crash snapshot of GPU 0")
	}
	snap := readFile(t, snaps[0])
	testutil.Contains(t, "crash snapshot", snap, "=== Health counters ===", "ecc_sbe_volatile", "NVLink: 18 links",
		"row remapper histogram (memory banks by spare rows left): max:6")
	if n := strings.Count(ev, "counter=remap_histogram"); n != 1 {
		t.Errorf("%d remap_histogram lines, want 1 (the histogram is read again only when the remap counts change)", n)
	}
}

// TestHealthB200NVLinkStory: b200-nvlink.scn from 18 s on: link 3 goes down
// for good with a failed recovery before Xid 74.
func TestHealthB200NVLinkStory(t *testing.T) {
	t.Parallel()
	p, addr := startB200Story(t, "@b200-nvlink", 18, "link 3 down",
		"type=HEALTH counter=nvlink_state link=3 from=active to=inactive",
		"type=HEALTH counter=nvlink_recovery_failed link=3 from=0 to=1 delta=+1",
		"type=HEALTH_CRITICAL reason=nvlink_down",
		"type=HEALTH_CRITICAL reason=nvlink_recovery_failed",
		"type=Xid xid=74")
	p.wantLastRow(0, map[string]string{"nvlink_links": "18", "nvlink_up": "17", "nvlink_recovery_failed": "1",
		"nvlink_recoveries": "3", "nvlink_errors": "52"})
	_, d := healthStatus(t, p.socketPath())
	h0 := d.GPUs[0].Health
	if h0.Verdict != "critical" || !contains(h0.Reasons, "nvlink_down") || len(h0.NVLink) != 18 ||
		h0.NVLink[3].State == nil || *h0.NVLink[3].State != "inactive" {
		t.Errorf("GPU 0 health %s %v, link 3 %+v", h0.Verdict, h0.Reasons, h0.NVLink)
	}
	body := scrapeMetrics(t, addr)
	testutil.Contains(t, "metrics", body,
		`gpu_telemetry_nvlink_link_down{gpu="0",link="3",state="inactive",`,
		`gpu_telemetry_nvlink_link_errors_total{counter="rx_errors",gpu="0",link="3",`)
	if strings.Contains(body, `gpu_telemetry_nvlink_link_down{gpu="1"`) || strings.Contains(body, `link="2"`) {
		t.Errorf("per-link series for healthy links")
	}
}

// TestHealthQuietOnHealthyAndGeForce: a GeForce RTX 5090 (no ECC, no
// NVLink; its remap fields answer SUCCESS with zeros) and a healthy B200:
// nothing fires, and what the 5090 cannot have is empty, not 0.
func TestHealthQuietOnHealthyAndGeForce(t *testing.T) {
	t.Parallel()
	p := start(t, opts{scenario: "gpus 2\ngpu 0 class rtx-5090\ngpu 1 class b200\ngpu all util_gpu 90\ngpu all power 500\n"})
	p.waitForRows(0, 40, 20*time.Second)
	p.waitForRows(1, 40, 20*time.Second)
	code, d := healthStatus(t, p.socketPath())
	p.stop()
	for i, g := range d.GPUs {
		if g.Health.Verdict != "ok" || len(g.Health.Reasons) != 0 {
			t.Errorf("GPU %d health %s %v", i, g.Health.Verdict, g.Health.Reasons)
		}
	}
	if code != 0 {
		t.Errorf("status exit %d", code)
	}
	// The RTX 5090 (GPU 0): what it does not support empty, its PCIe
	// counters a real 0; the B200 (GPU 1) has its links.
	p.wantLastRow(0, map[string]string{"ecc_mode": "", "ecc_sbe_volatile": "", "ecc_dbe_volatile": "", "remap_pending": "",
		"remap_failure": "", "nvlink_links": "", "nvlink_up": "", "pcie_bad_tlp": "0"})
	p.wantLastRow(1, map[string]string{"nvlink_up": "18"})
	ev := events(p.dir)
	for _, bad := range []string{"type=HEALTH ", "type=HEALTH_WARNING", "type=HEALTH_CRITICAL", "type=HEALTH_EVENT"} {
		if strings.Contains(ev, bad) {
			t.Errorf("events.log has %q on healthy GPUs:\n%s", bad, ev)
		}
	}
	if len(snapshots(p.dir, "crash-*")) != 0 {
		t.Errorf("crash snapshots on healthy GPUs")
	}
	si := readFile(t, p.dir+"/system-info.txt")
	testutil.Contains(t, "system-info.txt", si, "Health counters: supported: pcie, clock_events, recovery_action; not supported: ecc, row_remap",
		"nvlink (18 links)")
}

func contains(s []string, x string) bool {
	for _, v := range s {
		if v == x {
			return true
		}
	}
	return false
}

// TestHealthH100NVLinkErrorCounters: h100-nvlink.scn. An H100 has no NVLink5
// fields: its links' data-link counters come from
// nvmlDeviceGetNvLinkErrorCounter, read round-robin, and reach the same
// outputs as NVLink5's (events.log per link, the GPU sums in the CSV and the
// verdict, the per-link metrics and status --json); the healthy GPU 1 says
// nothing.
func TestHealthH100NVLinkErrorCounters(t *testing.T) {
	t.Parallel()
	p, addr := startHealth(t, opts{scenario: "@h100-nvlink"}, "link 2's data-link errors", 40*time.Second,
		"gpu=0 bus=00000000:01:00.0 type=HEALTH counter=nvlink_dl_crc_flit link=2 from=0 to=",
		"type=HEALTH counter=nvlink_dl_replay link=2 from=0 to=",
		"type=HEALTH counter=nvlink_dl_recovery link=2 from=0 to=1 delta=+1",
		"type=HEALTH_WARNING reason=nvlink_errors",
		"type=HEALTH_WARNING reason=nvlink_recovered")
	tb, row := p.wantLastRow(0, map[string]string{"nvlink_links": "18", "nvlink_up": "18", "nvlink_recoveries": "1", "nvlink_recovery_failed": ""})
	if got := tb.get(row, "nvlink_errors"); got == "" || got == "0" {
		t.Errorf("GPU 0 nvlink_errors %q, want the CRC and replay counts", got)
	}
	_, d := healthStatus(t, p.socketPath())
	h0, h1 := d.GPUs[0].Health, d.GPUs[1].Health
	if len(h0.NVLink) != 18 {
		t.Fatalf("GPU 0: %d links", len(h0.NVLink))
	}
	if c := h0.NVLink[2].Counters; c["dl_crc_flit"] == nil || *c["dl_crc_flit"] == 0 || c["rx_errors"] != nil {
		t.Errorf("GPU 0 link 2 counters %v: want dl_crc_flit > 0, the NVLink5 rx_errors null", c)
	}
	if c := h1.NVLink[7].Counters; c["dl_replay"] == nil || *c["dl_replay"] != 0 {
		t.Errorf("GPU 1 link 7 dl_replay %v, want a real 0", c["dl_replay"])
	}
	if h1.Verdict != "ok" || len(h1.Reasons) != 0 {
		t.Errorf("GPU 1 health %s %v", h1.Verdict, h1.Reasons)
	}
	body := scrapeMetrics(t, addr)
	testutil.Contains(t, "metrics", body,
		`gpu_telemetry_nvlink_link_errors_total{counter="dl_crc_flit",gpu="0",link="2",`,
		`gpu_telemetry_nvlink_link_errors_total{counter="dl_recovery",gpu="0",link="2",`)
	testutil.CheckMetrics(t, []byte(body))
	if strings.Contains(body, `link="3"`) || strings.Contains(body, `gpu_telemetry_nvlink_link_errors_total{counter="dl_replay",gpu="1"`) {
		t.Errorf("per-link series for healthy links")
	}
	p.stop()
	quietGPU1(t, p.dir)
}

// TestLostGPUHealthUnknown: a GPU that was healthy and is then lost has no
// "ok" verdict: status, status --json and the verdict metric (3) say its
// health is unknown; the GPU beside it stays ok (0).
func TestLostGPUHealthUnknown(t *testing.T) {
	t.Parallel()
	p := start(t, opts{scenario: "gpus 2\nat 3 gpu 1 lost\n", args: []string{"--metrics-listen", "127.0.0.1:0"}})
	addr, sock := p.metricsAddr(), p.socketPath()
	p.waitFor("GPU 1 shown lost", 30*time.Second, func() bool {
		d, ok := rawStatus(sock)
		return ok && len(d.GPUs) == 2 && d.GPUs[1].State == "lost"
	})
	_, d := healthStatus(t, sock)
	if v0, v1 := d.GPUs[0].Health.Verdict, d.GPUs[1].Health.Verdict; v0 != "ok" || v1 != "unknown (GPU lost)" {
		t.Errorf("status --json verdicts %q, %q; want ok, unknown (GPU lost)", v0, v1)
	}
	_, out := status(t, "--socket", sock)
	if !strings.Contains(out, "\n  health unknown (GPU lost)  ") || strings.Count(out, "\n  health ok  ") != 1 {
		t.Errorf("status: GPU 1's health not unknown (GPU lost), or GPU 0's not ok:\n%s", out)
	}
	body := scrapeMetrics(t, addr)
	for gpu, want := range []string{"0", "3"} {
		re := regexp.MustCompile(`(?m)^gpu_telemetry_health_verdict\{gpu="` + strconv.Itoa(gpu) + `",uuid="[^"]*"\} (\S+)$`)
		if m := re.FindStringSubmatch(body); m == nil || m[1] != want {
			t.Errorf("GPU %d health_verdict %v, want %s", gpu, m, want)
		}
	}
	testutil.CheckMetrics(t, []byte(body))
}
