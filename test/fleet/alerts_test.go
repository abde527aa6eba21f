package fleet

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"
)

const runbookBase = "https://github.com/gpu-telemetry/gpu-telemetry/blob/main/docs/runbooks/"

// rule is one alert rule of deploy/prometheus, as far as the tests read it.
type rule struct {
	name string
	body string // its lines up to the next rule
}

func rules(t *testing.T) []rule {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repo, "deploy", "prometheus", "gpu-telemetry.rules.yml"))
	if err != nil {
		t.Fatal(err)
	}
	parts := regexp.MustCompile(`(?m)^\s*- alert: `).Split(string(b), -1)[1:]
	var rs []rule
	for _, p := range parts {
		name, body, _ := strings.Cut(p, "\n")
		rs = append(rs, rule{strings.TrimSpace(name), body})
	}
	if len(rs) < 10 {
		t.Fatalf("only %d alert rules found", len(rs))
	}
	return rs
}

// TestAlertsCarryRunbooks: every alert's page under docs/runbooks/ says
// what the alert means, what to check and what to do (its severity,
// summary, evidence and runbook_url: TestAlertRulesNameHostAndGPU).
func TestAlertsCarryRunbooks(t *testing.T) {
	for _, r := range rules(t) {
		field := func(name string) string {
			m := regexp.MustCompile(`(?m)^\s*` + name + `: (.*)$`).FindStringSubmatch(r.body)
			if m == nil {
				t.Errorf("%s has no %s", r.name, name)
				return ""
			}
			return m[1]
		}
		if s := field("severity"); s != "critical" && s != "warning" {
			t.Errorf("%s: severity %q", r.name, s)
		}
		page, err := os.ReadFile(filepath.Join(repo, "docs", "runbooks", r.name+".md"))
		if err != nil {
			t.Errorf("%s: %v", r.name, err)
			continue
		}
		for _, h := range []string{"## What it means", "## What to check", "## What to do"} {
			if !strings.Contains(string(page), h) {
				t.Errorf("docs/runbooks/%s.md lacks %q", r.name, h)
			}
		}
	}
}

// TestAlertmanagerConfig: the example passes amtool check-config, and
// routes pages and tickets as it says.
func TestAlertmanagerConfig(t *testing.T) {
	amtool := needTool(t, "amtool", "prometheus-alertmanager")
	cfg := filepath.Join(repo, "deploy", "alertmanager", "alertmanager.yml")
	out, err := exec.Command(amtool, "check-config", cfg).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "SUCCESS") {
		t.Fatalf("amtool check-config: %v\n%s", err, out)
	}
	for labels, want := range map[string]string{
		"alertname=GPUFellOffTheBus severity=critical scope=gpu instance=h1:9464":    "gpu-pager",
		"alertname=GPUSpuriousPowerCap severity=warning scope=gpu instance=h1:9464":  "gpu-tickets",
		"alertname=GPUTelemetryDown severity=critical scope=logger instance=h1:9464": "gpu-pager",
	} {
		out, err := exec.Command(amtool, append([]string{"config", "routes", "test", "--config.file=" + cfg}, strings.Fields(labels)...)...).Output()
		if err != nil || strings.TrimSpace(string(out)) != want {
			t.Errorf("amtool config routes test %s: %v %q, want %q", labels, err, out, want)
		}
	}
}

// alertKey names an alert by its name and GPU.
func alertKey(l map[string]string) string {
	if g := l["gpu"]; g != "" {
		return l["alertname"] + "/gpu" + g
	}
	return l["alertname"]
}

// The alerts of testdata/fleet.scn: those paged, and those Alertmanager
// holds back by an inhibition (each with the alert that inhibits it).
var (
	paged = []string{"GPUCriticalXid/gpu2", "GPUFellOffTheBus/gpu0", "GPUsHungOrLostOnHost"}
	// inhibited maps each to the alertnames that may inhibit it.
	inhibited = map[string][]string{
		"GPUHungOrLost/gpu0":    {"GPUsHungOrLostOnHost", "GPUFellOffTheBus"},
		"GPUHungOrLost/gpu1":    {"GPUsHungOrLostOnHost"},
		"GPUCrashSnapshotTaken": {"GPUFellOffTheBus", "GPUCriticalXid", "GPUHungOrLost"},
		"GPURepairAction/gpu0":  {"GPUFellOffTheBus", "GPUHungOrLost"},
		"GPURepairAction/gpu2":  {"GPUCriticalXid"},
	}
)

// amAlert is an alert as Alertmanager's /api/v2/alerts shows it.
type amAlert struct {
	Fingerprint string            `json:"fingerprint"`
	Labels      map[string]string `json:"labels"`
	Status      struct {
		State       string   `json:"state"`
		InhibitedBy []string `json:"inhibitedBy"`
	} `json:"status"`
}

// checkAlerts: the webhook gets the pages with their labels and
// annotations, at the pager; the inhibited alerts are in Alertmanager,
// inhibited by the alert the example says, and never arrive.
func (s *stack) checkAlerts(t *testing.T) {
	var am []amAlert
	byKey := map[string]amAlert{}
	ok := waitFor(90*time.Second, func() bool {
		am = nil
		getJSON(t, "http://"+s.am+"/api/v2/alerts", &am)
		byKey = map[string]amAlert{}
		for _, a := range am {
			byKey[alertKey(a.Labels)] = a
		}
		got := map[string]bool{}
		for _, d := range s.hook.alerts() {
			k := alertKey(d.Labels)
			if _, bad := inhibited[k]; bad {
				return true // an alert that must not arrive did: fail below
			}
			got[k] = true
		}
		for k := range inhibited {
			if a, ok := byKey[k]; !ok || len(a.Status.InhibitedBy) == 0 {
				return false
			}
		}
		for _, k := range paged {
			if !got[k] {
				return false
			}
		}
		return true
	})
	if !ok {
		var keys []string
		for k, a := range byKey {
			keys = append(keys, k+"("+a.Status.State+")")
		}
		sort.Strings(keys)
		t.Fatalf("gave up waiting for the pages %v and the inhibited %v; Alertmanager has %v, the webhook got %v", paged, inhibited, keys, s.hook.alerts())
	}
	fp := map[string]string{}
	for _, a := range am {
		fp[a.Fingerprint] = a.Labels["alertname"]
	}
	for k, by := range inhibited {
		a := byKey[k]
		if a.Status.State != "suppressed" {
			t.Errorf("%s: state %s, want suppressed", k, a.Status.State)
		}
		for _, f := range a.Status.InhibitedBy {
			if name := fp[f]; !contains(by, name) {
				t.Errorf("%s is inhibited by %s (%s), want one of %v", k, f, name, by)
			}
		}
	}
	// What an inhibited alert's group would have sent comes group_wait
	// after the page; wait past it, then nothing inhibited, nothing of the
	// healthy GPU 3 and nothing unexpected has arrived.
	time.Sleep(12 * time.Second)
	for _, d := range s.hook.alerts() {
		k := alertKey(d.Labels)
		if _, bad := inhibited[k]; bad || !contains(paged, k) {
			t.Errorf("the webhook got %s, which must not arrive: %v", k, d.Labels)
			continue
		}
		if d.Path != "/pager" || d.Receiver != "gpu-pager" || d.Status != "firing" {
			t.Errorf("%s arrived at %s (receiver %s, %s), want the pager, firing", k, d.Path, d.Receiver, d.Status)
		}
		for _, l := range []string{"severity", "scope", "instance", "job"} {
			if d.Labels[l] == "" {
				t.Errorf("%s arrived without the label %s: %v", k, l, d.Labels)
			}
		}
		host := testHost // gpu_telemetry_host_info names it, not the scrape address
		if sum := d.Annotations["summary"]; !containsWord(sum, host) || strings.Contains(sum, d.Labels["instance"]) || d.Labels["gpu"] != "" && !strings.Contains(sum, "GPU "+d.Labels["gpu"]) {
			t.Errorf("%s: the summary %q does not name host and GPU", k, d.Annotations["summary"])
		}
		// The evidence names the board by its UUID (an index moves when a
		// board drops out at a reboot), and runs report as root.
		if ev := d.Annotations["evidence"]; !strings.HasPrefix(ev, "ssh "+host+" ") ||
			d.Labels["gpu"] != "" && (d.Labels["uuid"] == "" || !strings.HasSuffix(ev, " sudo gpu-telemetry report --last --gpu "+d.Labels["uuid"])) {
			t.Errorf("%s: evidence %q is not the command on host %s", k, ev, host)
		}
		if u := d.Annotations["runbook_url"]; u != runbookBase+d.Labels["alertname"]+".md" {
			t.Errorf("%s: runbook_url %q", k, u)
		}
	}
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}
