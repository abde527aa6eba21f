package fleet

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// b200Series are the series of the dashboards' health and process panels
// that TestFleet's GPUs (RTX PRO 6000s running no job) do not have: NVLink,
// the NVLink fabric and its daemons, CPER records (one the scenario adds)
// and the jobs on a GPU.
var b200Series = []string{"gpu_telemetry_health_nvlink_", "gpu_telemetry_gpu_workload_info", "gpu_telemetry_health_fabric_",
	"gpu_telemetry_fabric_service_running", "gpu_telemetry_cper_records_total"}

// healthSeries are the series of the health and process panels: what
// TestHealthAndProcessPanels runs.
var healthSeries = []string{"gpu_telemetry_health_", "gpu_telemetry_nvlink_", "gpu_telemetry_pcie_replays_total", "gpu_telemetry_fabric_", "gpu_telemetry_cper_records_total",
	"gpu_telemetry_gpu_processes", "gpu_telemetry_gpu_workload_info"}

func selects(q query, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.Contains(q.expr, p) {
			return true
		}
	}
	return false
}

// needsB200 reports whether q needs series only TestHealthAndProcessPanels'
// GPUs have.
func needsB200(q query) bool { return selects(q, b200Series) }

// TestHealthAndProcessPanels runs every query of the dashboards' health
// counter and process panels (ECC, row remapping, NVLink links down and
// errors, PCIe replays, clock-event time; the NVLink fabric and its
// daemons; CPER records; processes and jobs) against Debian's Prometheus
// scraping the logger on two simulated B200s
// (test/simnvml/scenarios/b200-nvlink.scn: NVLink5, HBM ECC, row remapping,
// a completed fabric) with a process of Slurm job 4242 and a CPER record on
// GPU 0: every query answers, with the
// labels its panel shows, for all hosts and for the one picked; the jobs
// table names the job.
func TestHealthAndProcessPanels(t *testing.T) {
	promBin := needTool(t, "prometheus", "prometheus")
	built(t)
	job, inJob := jobProcess(t)
	scn, err := os.ReadFile(filepath.Join(repo, "test", "simnvml", "scenarios", "b200-nvlink.scn"))
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	scnPath := filepath.Join(work, "b200-job.scn")
	if err := os.WriteFile(scnPath, append(scn, fmt.Sprintf("\ngpu 0 proc %d mem 1024\ngpu 1 procs 2\ngpu 0 cper fatal section nvidia\n", job)...), 0o644); err != nil {
		t.Fatal(err)
	}
	l := startLogger(t, t.TempDir(), scnPath)
	s := &stack{daemon: l.metrics}
	promCfg := filepath.Join(work, "prometheus.yml")
	if err := os.WriteFile(promCfg, []byte(fmt.Sprintf(`global:
  scrape_interval: %[1]s
scrape_configs:
  - job_name: gpu-telemetry
    static_configs: [{targets: [%[2]q]}]
`, scrapeInterval, s.daemon)), 0o644); err != nil {
		t.Fatal(err)
	}
	p := startChild(t, promBin, os.Environ(), "--config.file="+promCfg, "--storage.tsdb.path="+filepath.Join(work, "prom"),
		"--web.listen-address=127.0.0.1:0")
	s.prom = p.listenAddr(t)
	if !waitFor(30*time.Second, func() bool { return ready(s.prom) }) {
		t.Fatalf("prometheus on %s never became ready", s.prom)
	}
	var qs []query
	var titles []string
	for file, d := range dashboards(t) {
		for _, q := range queries(t, file, d) {
			if !selects(q, healthSeries) {
				continue
			}
			if strings.Contains(q.expr, "gpu_telemetry_gpu_workload_info") && !inJob {
				t.Logf("%s: not run: no process could be put in a Slurm job's cgroup here", q.where)
				continue
			}
			qs = append(qs, q)
			titles = append(titles, q.where)
		}
	}
	for _, want := range []string{"fleet.json: ECC errors", "fleet.json: Row remapping", "fleet.json: NVLink", "fleet.json: PCIe replays",
		"fleet.json: Clock-event time", "host.json: ECC errors", "host.json: Row remapping", "host.json: NVLink",
		"host.json: Clock-event time", "host.json: Processes", "fleet.json: Fabric state", "fleet.json: Fabric services",
		"host.json: NVLink fabric: state", "host.json: NVLink fabric services", "fleet.json: CPER records", "host.json: CPER records"} {
		if !strings.Contains(strings.Join(titles, "\n"), want) {
			t.Errorf("no health or process panel %q among %q", want, titles)
		}
	}
	// Rates over $__rate_interval and the first process read need a few
	// scrapes.
	if !waitFor(60*time.Second, func() bool {
		return len(s.query(t, `count_over_time(gpu_telemetry_health_nvlink_up[1m]) >= 6`)) > 0 &&
			len(s.query(t, `gpu_telemetry_gpu_processes`)) == 2 &&
			(!inJob || len(s.query(t, `gpu_telemetry_gpu_workload_info{slurm_job="4242"}`)) > 0)
	}) {
		t.Fatalf("the B200s' health counters, process counts or job never reached Prometheus: %v %v",
			s.query(t, `gpu_telemetry_gpu_processes`), s.query(t, `gpu_telemetry_gpu_workload_info`))
	}
	s.checkQueries(t, qs)
	for _, q := range qs {
		if !strings.Contains(q.expr, "gpu_telemetry_gpu_workload_info") {
			continue
		}
		rs := s.query(t, expand(t, q.expr, allVars))
		if len(rs) != 1 || rs[0].Metric["gpu"] != "0" || rs[0].Metric["slurm_job"] != "4242" || rs[0].Metric["uuid"] == "" {
			t.Errorf("%s: rows %v, want Slurm job 4242 on GPU 0", q.where, rs)
		}
	}
	if rs := s.query(t, `gpu_telemetry_gpu_processes`); len(rs) != 2 {
		t.Errorf("process counts %v", rs)
	} else {
		for _, r := range rs {
			if want := map[string]float64{"0": 1, "1": 2}[r.Metric["gpu"]]; r.value() != want {
				t.Errorf("GPU %s: %v processes, want %v", r.Metric["gpu"], r.value(), want)
			}
		}
	}
}

// jobProcess starts a process for the simulated driver to put on a GPU
// and, where the cgroup file system is writable here (root, cgroup v1 or
// v2), moves it into a cgroup of Slurm's layout
// (.../slurm/uid_0/job_4242/step_0), so that the logger reads the job from
// /proc/<pid>/cgroup as on a Slurm node. inJob says whether that worked.
func jobProcess(t *testing.T) (pid int, inJob bool) {
	t.Helper()
	cmd := exec.Command("sleep", "3600")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid = cmd.Process.Pid
	var made []string
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		for i := len(made) - 1; i >= 0; i-- {
			os.Remove(made[i])
		}
	})
	rel := filepath.Join("gpu-telemetry-test-"+strconv.Itoa(os.Getpid()), "slurm", "uid_0", "job_4242", "step_0")
	for _, base := range []string{"/sys/fs/cgroup/pids", "/sys/fs/cgroup/unified", "/sys/fs/cgroup"} {
		if _, err := os.Stat(filepath.Join(base, "cgroup.procs")); err != nil {
			continue
		}
		made = made[:0]
		dir := base
		ok := true
		for _, c := range strings.Split(rel, string(filepath.Separator)) {
			dir = filepath.Join(dir, c)
			if err := os.Mkdir(dir, 0o755); err != nil {
				ok = false
				break
			}
			made = append(made, dir)
		}
		if ok && os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644) == nil {
			b, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cgroup"))
			if strings.Contains(string(b), "/job_4242/step_0") {
				// Back to the root before the directories are removed.
				t.Cleanup(func() { os.WriteFile(filepath.Join(base, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644) })
				return pid, true
			}
		}
		for i := len(made) - 1; i >= 0; i-- {
			os.Remove(made[i])
		}
		made = made[:0]
	}
	return pid, false
}
