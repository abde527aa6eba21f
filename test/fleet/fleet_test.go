package fleet

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"
)

// faulted are the GPUs testdata/fleet.scn breaks, with the state and
// reason the triage table must show; GPU 3 (an application Xid, SwPowerCap
// throttling) must not be listed.
var faulted = map[string]struct{ state, reason string }{
	"0": {"lost", "GPU lost"},
	"1": {"hung", "GPU hung"},
	"2": {"answering", "critical Xid 48"},
}

// TestFleet runs the logger on four simulated GPUs, three of which fail,
// with Debian's Prometheus scraping it and evaluating the shipped rules and
// Debian's Alertmanager routing them with the shipped example: every
// dashboard query answers with the labels its panel shows, the triage table
// lists exactly the faulted GPUs, and the alerts arrive routed and
// inhibited as the example says.
func TestFleet(t *testing.T) {
	s := startStack(t)
	triage := triageQuery(t)
	var rows []promResult
	if !waitFor(60*time.Second, func() bool {
		rows = s.query(t, expand(t, triage, allVars))
		// Rates over $__rate_interval need a few scrapes after the faults.
		return len(rows) >= len(faulted) && len(s.query(t, `gpu_telemetry_throttle_reason_active{reason="SwPowerCap"} == 1`)) > 0 &&
			len(s.query(t, `count_over_time(gpu_telemetry_gpus_answering[1m]) >= 6`)) > 0
	}) {
		t.Fatalf("the triage table never listed the %d faulted GPUs; it has %v", len(faulted), rows)
	}
	t.Run("dashboards", func(t *testing.T) { s.checkDashboards(t) })
	t.Run("triage", func(t *testing.T) { s.checkTriage(t, triage) })
	t.Run("host identity", func(t *testing.T) { s.checkIdentity(t) })
	t.Run("alerts", func(t *testing.T) { s.checkAlerts(t) })
}

// checkIdentity: every output names the host as --host says, whatever the
// machine's hostname: gpu_telemetry_host_info (with Prometheus's own job
// and instance untouched: no exported_* label anywhere), each events.log
// line, every snapshot header and status (text and JSON).
func (s *stack) checkIdentity(t *testing.T) {
	if rs := s.query(t, `gpu_telemetry_host_info{host="`+testHost+`"}`); len(rs) != 1 || rs[0].Metric["instance"] != s.daemon || rs[0].Metric["job"] != "gpu-telemetry" {
		t.Errorf("gpu_telemetry_host_info naming %s: %v", testHost, rs)
	}
	for _, r := range s.query(t, `{__name__=~"gpu_telemetry_.+"}`) {
		for l := range r.Metric {
			if strings.HasPrefix(l, "exported_") {
				t.Errorf("Prometheus renamed a clashing label of the logger: %v", r.Metric)
			}
		}
	}
	events, err := os.ReadFile(filepath.Join(s.logDir, "events.log"))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(strings.TrimSpace(string(events)), "\n") {
		if kv, _, err := logfmtFields(l); err != nil || kv["host"] != testHost {
			t.Errorf("events.log line without host=%s (%v): %s", testHost, err, l)
		}
	}
	snaps, _ := filepath.Glob(filepath.Join(s.logDir, "crashes", "*.log"))
	if len(snaps) == 0 {
		t.Error("no crash snapshot")
	}
	for _, p := range snaps {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), "\nHost: "+testHost+" (machine id ") {
			t.Errorf("%s does not name the host in its header:\n%s", filepath.Base(p), head(string(b), 400))
		}
	}
	out, _ := exec.Command(binary, "status", "--socket", s.socket).Output()
	if first, _, _ := strings.Cut(string(out), "\n"); !strings.Contains(first, " on "+testHost+" ") {
		t.Errorf("status does not name the host on its first line: %q", first)
	}
	out, _ = exec.Command(binary, "status", "--json", "--socket", s.socket).Output()
	var doc struct {
		Host struct {
			Name   string `json:"name"`
			BootID string `json:"boot_id"`
		} `json:"host"`
	}
	if err := json.Unmarshal(out, &doc); err != nil || doc.Host.Name != testHost {
		t.Errorf("status --json host.name %q (%v), want %s", doc.Host.Name, err, testHost)
	}
}

func head(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// triageQuery returns the fleet dashboard's triage table query (refId A).
func triageQuery(t *testing.T) string {
	for _, q := range queries(t, "gpu-telemetry-fleet.json", dashboards(t)["gpu-telemetry-fleet.json"]) {
		if strings.Contains(q.where, "Unhealthy GPUs") {
			return q.expr
		}
	}
	t.Fatal("the fleet dashboard has no Unhealthy GPUs table")
	return ""
}

// checkDashboards runs every dashboard query but those that need NVLink
// or a job on a GPU, which this stack's GPUs do not have
// (TestHealthAndProcessPanels runs them, on B200s with a job).
func (s *stack) checkDashboards(t *testing.T) {
	var qs []query
	for file, d := range dashboards(t) {
		for _, q := range queries(t, file, d) {
			if !needsB200(q) {
				qs = append(qs, q)
			}
		}
	}
	s.checkQueries(t, qs)
}

// checkQueries runs each query against the stack's Prometheus, for all
// hosts and for the one host picked, and checks it answers with the labels
// its panel shows.
func (s *stack) checkQueries(t *testing.T, qs []query) {
	// Grafana writes a picked value as a regex inside a PromQL string.
	one := strings.ReplaceAll(regexp.QuoteMeta(s.daemon), `\`, `\\`)
	for _, q := range qs {
		// All hosts, and the one host picked as Grafana writes it.
		for _, inst := range []string{".+", one} {
			vars := map[string]string{}
			for k, v := range allVars {
				vars[k] = v
			}
			vars["instance"] = inst
			if q.annotation {
				// An annotation marks a change somewhere in the
				// dashboard's range: the whole scenario.
				vars["__rate_interval"] = "5m"
			}
			expr := expand(t, q.expr, vars)
			if q.isLabel {
				expr = fmt.Sprintf("count by (%s) (%s)", q.label, expr)
			}
			rs, err := s.tryQuery(t, expr)
			if err != nil {
				t.Errorf("%s: %v", q.where, err)
				continue
			}
			if len(rs) == 0 {
				t.Errorf("%s (instance=~%q): no data from\n%s", q.where, inst, expr)
				continue
			}
			for _, r := range rs {
				for _, l := range q.usedLabels() {
					if r.Metric[l] == "" {
						t.Errorf("%s: a series lacks the label %s its legend shows: %v", q.where, l, r.Metric)
					}
				}
			}
		}
	}
}

// checkTriage: the table's rows are exactly the faulted GPUs, worst
// first, each with the columns the panel shows; its other queries (last
// Xid, sample age) add columns to those rows only.
func (s *stack) checkTriage(t *testing.T, triage string) {
	rows := s.query(t, expand(t, triage, allVars))
	var got []string
	last := 1e9
	for _, r := range rows {
		m := r.Metric
		got = append(got, m["gpu"])
		want, ok := faulted[m["gpu"]]
		if !ok {
			t.Errorf("the triage table lists GPU %s, which is healthy: %v", m["gpu"], m)
			continue
		}
		if m["state"] != want.state || m["reason"] != want.reason {
			t.Errorf("GPU %s: state %q reason %q, want %q %q", m["gpu"], m["state"], m["reason"], want.state, want.reason)
		}
		for _, l := range []string{"instance", "host", "uuid", "pci_bus_id", "model", "evidence"} {
			if m[l] == "" {
				t.Errorf("GPU %s: no %s column: %v", m["gpu"], l, m)
			}
		}
		// By the board (indices move at a reboot), as root (events.log is 0600).
		if wantEv := "ssh " + testHost + " sudo gpu-telemetry report --last --gpu " + m["uuid"]; m["evidence"] != wantEv {
			t.Errorf("GPU %s: evidence %q, want %q", m["gpu"], m["evidence"], wantEv)
		}
		if r.value() > last {
			t.Errorf("triage rows not sorted by severity: %v", rows)
		}
		last = r.value()
	}
	sort.Strings(got)
	if strings.Join(got, ",") != "0,1,2" {
		t.Errorf("the triage table lists GPUs %v, want exactly 0,1,2", got)
	}
	var fleet []query
	for _, q := range queries(t, "gpu-telemetry-fleet.json", dashboards(t)["gpu-telemetry-fleet.json"]) {
		if strings.Contains(q.where, "Unhealthy GPUs") {
			fleet = append(fleet, q)
		}
	}
	for _, q := range fleet[1:] {
		for _, r := range s.query(t, expand(t, q.expr, allVars)) {
			if _, ok := faulted[r.Metric["gpu"]]; !ok {
				t.Errorf("triage column query lists healthy GPU %s: %v\n%s", r.Metric["gpu"], r.Metric, q.expr)
			}
		}
	}
	// GPU 0's last Xid is 79, GPU 1 (hung from the start of the faults) has
	// none: its row has no last-Xid cell.
	xids := map[string]string{}
	for _, r := range s.query(t, expand(t, fleet[1].expr, allVars)) {
		xids[r.Metric["gpu"]] = r.Metric["xid"]
	}
	if xids["0"] != "79" || xids["2"] != "48" || xids["1"] != "" {
		t.Errorf("last Xid per triage row: %v, want 0:79 2:48 and none for 1", xids)
	}
}
