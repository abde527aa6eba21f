// Package fleet tests what a fleet's monitoring takes from gpu-telemetry
// against the real components: the Grafana dashboards (deploy/grafana) and
// the Alertmanager example (deploy/alertmanager) with the alert rules
// (deploy/prometheus), run by Debian's prometheus and prometheus-alertmanager
// against the daemon on simulated GPUs with faults played
// (testdata/fleet.scn). Every listener is on loopback with a port the kernel
// picks; every process is killed when its test ends.
package fleet

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/testutil"
)

var (
	repo   string
	binary string // gpu-telemetry, once built(t) ran
	simDir string
	build  testutil.Built
)

func TestMain(m *testing.M) {
	repo = testutil.Repo()
	code := m.Run()
	build.Close()
	os.Exit(code)
}

// built sets binary ($GPU_TELEMETRY_BIN, as make test sets it, or one
// built now) and the simulated driver's directory, once per run.
func built(t *testing.T) {
	t.Helper()
	binary, simDir = build.Get(t)
}

// child is a process the test started; it is killed when the test ends.
type child struct {
	name   string
	cmd    *exec.Cmd
	stderr *testutil.LogBuf
	done   chan struct{}
}

func startChild(t *testing.T, name string, env []string, args ...string) *child {
	t.Helper()
	c := &child{name: filepath.Base(name), cmd: exec.Command(name, args...), stderr: &testutil.LogBuf{}, done: make(chan struct{})}
	c.cmd.Env = env
	c.cmd.Stdout, c.cmd.Stderr = c.stderr, c.stderr
	if err := c.cmd.Start(); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	go func() { c.cmd.Wait(); close(c.done) }()
	t.Cleanup(func() {
		c.cmd.Process.Kill()
		<-c.done
		if strings.Contains(c.stderr.String(), "WARNING: DATA RACE") {
			t.Errorf("the race detector reported a data race in %s", c.name)
		}
		if t.Failed() {
			t.Logf("output of %s (last 4000 bytes):\n%s", c.name, tail(c.stderr.String(), 4000))
		}
	})
	return c
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// listenAddr waits until the child listens on a TCP socket and returns its
// address, read from /proc (the child's own socket inodes against
// /proc/<pid>/net/tcp): the child binds port 0, so no port is chosen
// before it starts and none can be taken in between.
func (c *child) listenAddr(t *testing.T) string {
	t.Helper()
	var addr string
	ok := testutil.WaitUntil(20*time.Second, func() bool {
		select {
		case <-c.done:
			return true
		default:
		}
		addr = listening(c.cmd.Process.Pid)
		if addr == "" {
			time.Sleep(50 * time.Millisecond)
		}
		return addr != ""
	})
	if !ok || addr == "" {
		t.Fatalf("%s does not listen (output: %s)", c.name, tail(c.stderr.String(), 2000))
	}
	return addr
}

// listening returns the first IPv4 loopback address pid listens on, or "".
func listening(pid int) string {
	inodes := map[string]bool{}
	for _, l := range testutil.OpenFiles(pid) {
		if ino, ok := strings.CutPrefix(l, "socket:["); ok {
			inodes[strings.TrimSuffix(ino, "]")] = true
		}
	}
	f, err := os.Open(fmt.Sprintf("/proc/%d/net/tcp", pid))
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
		fs := strings.Fields(sc.Text())
		if len(fs) < 10 || fs[3] != "0A" || !inodes[fs[9]] {
			continue
		}
		host, port, ok := strings.Cut(fs[1], ":")
		if !ok || host != "0100007F" {
			continue
		}
		p, err := strconv.ParseUint(port, 16, 16)
		if err == nil {
			return fmt.Sprintf("127.0.0.1:%d", p)
		}
	}
	return ""
}

// stack is one host's logger on simulated GPUs, a Prometheus scraping it
// and evaluating the shipped rules, and an Alertmanager running the shipped
// example with its receivers pointed at the test's webhook.
type stack struct {
	daemon, prom, am string // addresses
	socket           string // the logger's control socket
	hook             *webhook
	logDir           string
}

// scrapeInterval is Prometheus's scrape and rule evaluation interval in the
// tests (15 s in the documented setup); the rules' for: durations are the
// shipped ones.
const scrapeInterval = "1s"

func startStack(t *testing.T) *stack {
	t.Helper()
	promBin := needTool(t, "prometheus", "prometheus")
	amBin := needTool(t, "prometheus-alertmanager", "prometheus-alertmanager")
	built(t)
	s := &stack{logDir: t.TempDir(), hook: newWebhook(t)}
	work := t.TempDir()

	l := startLogger(t, s.logDir, "fleet.scn")
	s.daemon, s.socket = l.metrics, l.socket

	// Alertmanager with the shipped example; only the receivers' URLs change.
	cfg, err := os.ReadFile(filepath.Join(repo, "deploy", "alertmanager", "alertmanager.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(cfg), receiverPlaceholder) {
		t.Fatalf("alertmanager.yml has no %s receiver URL to point at the test's webhook", receiverPlaceholder)
	}
	amCfg := filepath.Join(work, "alertmanager.yml")
	if err := os.WriteFile(amCfg, []byte(strings.ReplaceAll(string(cfg), receiverPlaceholder, s.hook.url)), 0o644); err != nil {
		t.Fatal(err)
	}
	a := startChild(t, amBin, os.Environ(), "--config.file="+amCfg, "--storage.path="+filepath.Join(work, "am"),
		"--web.listen-address=127.0.0.1:0", "--cluster.listen-address=", "--log.level=debug")
	s.am = a.listenAddr(t)

	promCfg := filepath.Join(work, "prometheus.yml")
	if err := os.WriteFile(promCfg, []byte(fmt.Sprintf(`global:
  scrape_interval: %[1]s
  evaluation_interval: %[1]s
rule_files: [%[2]q]
alerting:
  alertmanagers:
    - static_configs: [{targets: [%[3]q]}]
scrape_configs:
  - job_name: gpu-telemetry
    static_configs: [{targets: [%[4]q]}]
`, scrapeInterval, filepath.Join(repo, "deploy", "prometheus", "gpu-telemetry.rules.yml"), s.am, s.daemon)), 0o644); err != nil {
		t.Fatal(err)
	}
	p := startChild(t, promBin, os.Environ(), "--config.file="+promCfg, "--storage.tsdb.path="+filepath.Join(work, "prom"),
		"--web.listen-address=127.0.0.1:0")
	s.prom = p.listenAddr(t)
	for _, c := range []struct {
		who  *child
		addr string
	}{{a, s.am}, {p, s.prom}} {
		if !waitFor(30*time.Second, func() bool { return ready(c.addr) }) {
			t.Fatalf("%s on %s never became ready", c.who.name, c.addr)
		}
	}
	return s
}

// ready reports whether a Prometheus or Alertmanager answers /-/ready.
func ready(addr string) bool {
	resp, err := client.Get("http://" + addr + "/-/ready")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// testHost is the --host the tests' loggers are given: every output must
// name the host so, whatever the machine's hostname.
const testHost = "fleet-host-1"

// logger is a running gpu-telemetry: its metrics address and control
// socket.
type logger struct{ metrics, socket string }

// startLogger starts gpu-telemetry as on a host named testHost, logging
// into logDir, on the simulated GPUs of testdata/<scenario> (or the
// scenario file at that absolute path) with its kernel
// log fed by the simulator, serving metrics on a loopback port of the
// kernel's choosing.
func startLogger(t *testing.T, logDir, scenario string) logger {
	t.Helper()
	built(t)
	work := t.TempDir()
	kmsg := filepath.Join(work, "kmsg")
	if err := os.WriteFile(kmsg, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	sock, err := os.MkdirTemp("", "gtf")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sock) })
	if !filepath.IsAbs(scenario) {
		scenario = filepath.Join(repo, "test", "fleet", "testdata", scenario)
	}
	env := append(os.Environ(), "LD_LIBRARY_PATH="+filepath.Dir(testutil.SimLib(simDir, false)),
		"SIMNVML_SCENARIO="+scenario, "SIMNVML_KMSG="+kmsg, "TZ=UTC")
	socket := filepath.Join(sock, "control.sock")
	d := startChild(t, binary, env, "--log-dir", logDir, "--lock-file", filepath.Join(work, "lock"),
		"--socket", socket, "--kmsg", kmsg, "--follow-ups", "2s",
		"--metrics-listen", "127.0.0.1:0", "--host", testHost)
	return logger{metrics: d.listenAddr(t), socket: socket}
}

// receiverPlaceholder is the receivers' base URL in the shipped example.
const receiverPlaceholder = "http://alert-receiver.example:9095"

// promResult is one series of an instant query's answer.
type promResult struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

func (r promResult) value() float64 {
	s, _ := r.Value[1].(string)
	v, _ := strconv.ParseFloat(s, 64)
	return v
}

// query runs an instant PromQL query; an error answer fails t.
func (s *stack) query(t *testing.T, q string) []promResult {
	t.Helper()
	rs, err := s.tryQuery(t, q)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

// tryQuery runs an instant PromQL query and returns its vector, or the
// error Prometheus answered.
func (s *stack) tryQuery(t *testing.T, q string) ([]promResult, error) {
	t.Helper()
	var ans struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string          `json:"resultType"`
			Result     json.RawMessage `json:"result"`
		} `json:"data"`
	}
	getJSON(t, "http://"+s.prom+"/api/v1/query?"+url.Values{"query": {q}}.Encode(), &ans)
	if ans.Status != "success" {
		return nil, fmt.Errorf("Prometheus refused %s: %s", q, ans.Error)
	}
	if ans.Data.ResultType != "vector" {
		return nil, fmt.Errorf("query %s answered a %s, not a vector", q, ans.Data.ResultType)
	}
	var rs []promResult
	if err := json.Unmarshal(ans.Data.Result, &rs); err != nil {
		return nil, fmt.Errorf("query %s: %v", q, err)
	}
	return rs, nil
}

var client = &http.Client{Timeout: 10 * time.Second}

func getJSON(t *testing.T, u string, v any) {
	t.Helper()
	resp, err := client.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("GET %s: %v\n%s", u, err, tail(string(b), 500))
	}
}

// waitFor polls cond every 250 ms until it holds or limit passes (a
// failure guard, not a timing assertion); it reports whether it held.
func waitFor(limit time.Duration, cond func() bool) bool {
	return testutil.PollUntil(limit, 250*time.Millisecond, cond)
}

// needTool is testutil.NeedTool for a *testing.T.
func needTool(t *testing.T, name, pkg string) string {
	t.Helper()
	return testutil.NeedTool(t, name, pkg)
}
