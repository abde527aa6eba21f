// Package kubernetes holds the offline checks of the Kubernetes examples in
// this directory: the DaemonSet decoded strictly into Kubernetes's own API
// types, and node-problem-detector's custom-plugin config against NPD's
// documented schema. Neither needs a cluster; the plugin's contract itself
// (exit status, message) is tested through `gpu-telemetry check --format
// npd` in cmd/gpu-telemetry.
package kubernetes

import (
	"bytes"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	"github.com/gpu-telemetry/gpu-telemetry/action"
	"github.com/gpu-telemetry/gpu-telemetry/internal/testutil"
)

// documents splits a multi-document YAML file at its "---" lines.
func documents(t *testing.T, path string) [][]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var docs [][]byte
	for _, d := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(b), -1) {
		if strings.TrimSpace(regexp.MustCompile(`(?m)^\s*#.*$`).ReplaceAllString(d, "")) != "" {
			docs = append(docs, []byte(d))
		}
	}
	return docs
}

// flagValue is the value of --name=V in args; ok false when absent.
func flagValue(args []string, name string) (v string, ok bool) {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v, true
		}
	}
	return "", false
}

// daemonSet decodes the example's documents strictly (a field Kubernetes
// does not know fails, as kubectl apply --validate=strict would) and
// returns its DaemonSet and the namespaces it makes.
func daemonSet(t *testing.T) (*appsv1.DaemonSet, []string) {
	t.Helper()
	var ds *appsv1.DaemonSet
	var namespaces []string
	for i, doc := range documents(t, "gpu-telemetry-daemonset.yaml") {
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &tm); err != nil {
			t.Fatalf("document %d: %v", i, err)
		}
		switch tm.APIVersion + " " + tm.Kind {
		case "v1 Namespace":
			var ns corev1.Namespace
			if err := yaml.UnmarshalStrict(doc, &ns); err != nil {
				t.Fatalf("document %d (Namespace): %v", i, err)
			}
			namespaces = append(namespaces, ns.Name)
		case "apps/v1 DaemonSet":
			ds = new(appsv1.DaemonSet)
			if err := yaml.UnmarshalStrict(doc, ds); err != nil {
				t.Fatalf("document %d (DaemonSet): %v", i, err)
			}
		default:
			t.Fatalf("document %d: unexpected %s %s", i, tm.APIVersion, tm.Kind)
		}
	}
	if ds == nil {
		t.Fatal("no DaemonSet")
	}
	return ds, namespaces
}

// TestDaemonSet: the DaemonSet is valid Kubernetes (strictly decoded) and
// does what deploy/kubernetes/README.md says: privileged for /dev/kmsg and
// the /dev/nvidia* devices, the log directory and control socket on host
// paths, the host's /etc/passwd and /etc/group read-only (the owners of
// the host's processes hostPID shows), the node's name as --host, and the metrics port, declared and
// annotated for Prometheus, the one the logger listens on. Its flags are
// the logger's (docs/cli.md documents every flag the binary has).
func TestDaemonSet(t *testing.T) {
	ds, namespaces := daemonSet(t)
	if !slices.Contains(namespaces, ds.Namespace) {
		t.Errorf("the DaemonSet's namespace %q is not among those the file makes (%v)", ds.Namespace, namespaces)
	}
	sel, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector)
	if err != nil || sel.Empty() || !sel.Matches(labels.Set(ds.Spec.Template.Labels)) {
		t.Errorf("selector %v (%v) does not select the pods' labels %v", ds.Spec.Selector, err, ds.Spec.Template.Labels)
	}
	pod := ds.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers, want the logger alone", len(pod.Containers))
	}
	c := pod.Containers[0]
	if c.SecurityContext == nil || c.SecurityContext.Privileged == nil || !*c.SecurityContext.Privileged {
		t.Errorf("the logger is not privileged: it needs every /dev/nvidia* device and /dev/kmsg")
	}

	cli, err := os.ReadFile(filepath.Join(testutil.Repo(), "docs", "cli.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range c.Args {
		name, _, _ := strings.Cut(a, "=")
		if !strings.HasPrefix(name, "--") || !bytes.Contains(cli, []byte("`"+name+"`")) {
			t.Errorf("argument %q is not a flag docs/cli.md documents", a)
		}
	}

	// Each path flag is on a host path mounted where the flag points.
	mounts := map[string]corev1.VolumeMount{}
	for _, m := range c.VolumeMounts {
		mounts[m.Name] = m
	}
	hostPaths := map[string]string{} // mount path in the container -> host path
	for _, v := range pod.Volumes {
		m, ok := mounts[v.Name]
		if !ok {
			t.Errorf("volume %s is not mounted", v.Name)
			continue
		}
		delete(mounts, v.Name)
		if v.HostPath == nil {
			t.Errorf("volume %s is not a host path", v.Name)
			continue
		}
		hostPaths[m.MountPath] = v.HostPath.Path
	}
	for name := range mounts {
		t.Errorf("mount %s names no volume", name)
	}
	for _, f := range []struct {
		flag string
		dir  bool // the flag names a file in the mounted directory
	}{{"kmsg", false}, {"log-dir", false}, {"socket", true}} {
		v, ok := flagValue(c.Args, f.flag)
		if !ok {
			t.Errorf("no --%s", f.flag)
			continue
		}
		if f.dir {
			v = filepath.Dir(v)
		}
		if hp, ok := hostPaths[v]; !ok || hp != v {
			t.Errorf("--%s %s: not the host's %s mounted there (host paths: %v)", f.flag, v, v, hostPaths)
		}
	}

	// The host's accounts, read-only where os/user reads them: with hostPID
	// the processes are the host's, and so are their owners.
	for _, f := range []string{"/etc/passwd", "/etc/group"} {
		var m *corev1.VolumeMount
		for i := range c.VolumeMounts {
			if c.VolumeMounts[i].MountPath == f {
				m = &c.VolumeMounts[i]
			}
		}
		var v *corev1.Volume
		for i := range pod.Volumes {
			if m != nil && pod.Volumes[i].Name == m.Name {
				v = &pod.Volumes[i]
			}
		}
		if m == nil || !m.ReadOnly || v == nil || v.HostPath == nil || v.HostPath.Path != f ||
			v.HostPath.Type == nil || *v.HostPath.Type != corev1.HostPathFile {
			t.Errorf("%s: not the host's file mounted read-only (mount %+v, volume %+v)", f, m, v)
		}
	}

	// The node's name as the host.
	if v, _ := flagValue(c.Args, "host"); v != "$(NODE_NAME)" {
		t.Errorf("--host=%s, want $(NODE_NAME)", v)
	}
	found := false
	for _, e := range c.Env {
		if e.Name == "NODE_NAME" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "spec.nodeName" {
			found = true
		}
	}
	if !found {
		t.Errorf("no NODE_NAME from spec.nodeName in the environment")
	}

	// The metrics port: listened on, declared, annotated.
	listen, _ := flagValue(c.Args, "metrics-listen")
	_, port, err := net.SplitHostPort(listen)
	if err != nil {
		t.Fatalf("--metrics-listen=%s: %v", listen, err)
	}
	declared := false
	for _, p := range c.Ports {
		declared = declared || p.Name == "metrics" && p.Protocol == corev1.ProtocolTCP && p.ContainerPort > 0 && port == itoa(p.ContainerPort)
	}
	if !declared {
		t.Errorf("no TCP port named metrics at %s (ports %+v)", port, c.Ports)
	}
	ann := ds.Spec.Template.Annotations
	if ann["prometheus.io/scrape"] != "true" || ann["prometheus.io/port"] != port || ann["prometheus.io/path"] != "/metrics" {
		t.Errorf("Prometheus annotations %v, want scrape true, port %s, path /metrics", ann, port)
	}
}

func itoa(n int32) string { b, _ := json.Marshal(n); return string(b) }

// The custom-plugin monitor's config, as node-problem-detector documents it
// (pkg/custompluginmonitor/types: config.go's CustomPluginConfig and
// pluginGlobalConfig, types.go's CustomRule; pkg/types's Condition).
type npdConfig struct {
	Plugin       string `json:"plugin"`
	PluginConfig struct {
		InvokeInterval  *string `json:"invoke_interval"`
		Timeout         *string `json:"timeout"`
		MaxOutputLength *int    `json:"max_output_length"`
		Concurrency     *int    `json:"concurrency"`
		MessageChange   *bool   `json:"enable_message_change_based_condition_update"`
		SkipInitial     *bool   `json:"skip_initial_status"`
	} `json:"pluginConfig"`
	Source     string `json:"source"`
	Conditions []struct {
		Type    string `json:"type"`
		Reason  string `json:"reason"`
		Message string `json:"message"`
	} `json:"conditions"`
	Rules []struct {
		Type           string   `json:"type"` // permanent or temporary
		Condition      string   `json:"condition"`
		Reason         string   `json:"reason"`
		Path           string   `json:"path"`
		Args           []string `json:"args"`
		Timeout        *string  `json:"timeout"`
		InvokeInterval *string  `json:"invoke_interval"`
	} `json:"rules"`
	MetricsReporting *bool `json:"metricsReporting"`
}

// camel is an action's name as a reason's part: power_cycle: PowerCycle.
func camel(s string) string {
	var b strings.Builder
	for _, w := range strings.Split(s, "_") {
		b.WriteString(strings.ToUpper(w[:1]) + w[1:])
	}
	return b.String()
}

// TestNPDConfig: the plugin config is what NPD accepts (its fields only,
// plugin "custom", durations it parses, no rule's timeout above the
// global one, a default for each permanent rule's condition: NPD's own
// Validate) and what it needs to not flap: one permanent rule for
// GPUProblem (NPD sets a condition from each rule's result, so a second
// rule on it, OK while the first is NonOK, would clear it), whose message
// check cuts to max_output_length (80), and one temporary rule per action
// that takes a node out, each raising an event with its own reason.
func TestNPDConfig(t *testing.T) {
	b, err := os.ReadFile("gpu-telemetry-monitor.json")
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var c npdConfig
	if err := dec.Decode(&c); err != nil {
		t.Fatalf("not NPD's custom-plugin config: %v", err)
	}
	pc := c.PluginConfig
	if c.Plugin != "custom" || c.Source == "" {
		t.Errorf("plugin %q, source %q; want custom and a source", c.Plugin, c.Source)
	}
	dur := func(what string, s *string, def time.Duration) time.Duration {
		if s == nil {
			return def
		}
		d, err := time.ParseDuration(*s)
		if err != nil || d <= 0 {
			t.Errorf("%s %q: %v", what, *s, err)
		}
		return d
	}
	global := dur("timeout", pc.Timeout, 5*time.Second) // NPD's defaults
	dur("invoke_interval", pc.InvokeInterval, 30*time.Second)
	if pc.MaxOutputLength == nil || *pc.MaxOutputLength != 80 {
		t.Errorf("max_output_length %v, want 80: the length check --format npd cuts its message to", pc.MaxOutputLength)
	}

	ds, _ := daemonSet(t)
	socket, _ := flagValue(ds.Spec.Template.Spec.Containers[0].Args, "socket")
	defaults := map[string]bool{}
	for _, cond := range c.Conditions {
		defaults[cond.Type] = true
	}
	if !defaults["GPUProblem"] {
		t.Errorf("no default for the GPUProblem condition")
	}
	permanent := map[string]int{}
	actions := map[action.Action]int{}
	for i, r := range c.Rules {
		if rt := dur("rule timeout", r.Timeout, global); rt > global {
			t.Errorf("rule %d: timeout %v above the global %v (NPD refuses it)", i, rt, global)
		}
		dur("rule invoke_interval", r.InvokeInterval, 0)
		if r.Path == "" || len(r.Args) < 3 || r.Args[0] != "check" || !slices.Equal(r.Args[1:3], []string{"--format", "npd"}) {
			t.Errorf("rule %d: %s %v: want gpu-telemetry check --format npd", i, r.Path, r.Args)
		}
		if j := slices.Index(r.Args, "--socket"); j < 0 || j+1 >= len(r.Args) || r.Args[j+1] != socket {
			t.Errorf("rule %d: %v: want --socket %s, the DaemonSet's", i, r.Args, socket)
		}
		switch r.Type {
		case "permanent":
			permanent[r.Condition]++
			if !defaults[r.Condition] {
				t.Errorf("rule %d: condition %q has no default (NPD refuses it)", i, r.Condition)
			}
			if slices.Contains(r.Args, "--action") {
				t.Errorf("rule %d: the condition's rule asks one action; it must ask for any", i)
			}
		case "temporary":
			j := slices.Index(r.Args, "--action")
			if j < 0 || j+1 >= len(r.Args) {
				t.Errorf("rule %d: an event's rule without --action", i)
				continue
			}
			a, err := action.Parse(r.Args[j+1])
			if err != nil || !a.Drains() {
				t.Errorf("rule %d: --action %s: %v (an action that takes a node out)", i, r.Args[j+1], err)
				continue
			}
			actions[a]++
			if want := "GPUNeeds" + camel(a.String()); r.Reason != want {
				t.Errorf("rule %d: reason %q, want %q", i, r.Reason, want)
			}
		default:
			t.Errorf("rule %d: type %q, want permanent or temporary", i, r.Type)
		}
	}
	for cond, n := range permanent {
		if n != 1 {
			t.Errorf("%d permanent rules for %s: they would flap it", n, cond)
		}
	}
	for a := range action.NumActions {
		if a.Drains() && actions[a] != 1 {
			t.Errorf("%d rules for action %s, want 1", actions[a], a)
		}
	}
}

// TestStrictDecoding: the decoding daemonSet relies on refuses a field
// Kubernetes does not know (a typo kubectl would drop or refuse), so the
// checks above read what the cluster would.
func TestStrictDecoding(t *testing.T) {
	doc := []byte("apiVersion: apps/v1\nkind: DaemonSet\nspec:\n  template:\n    spec:\n      containers:\n        - name: x\n          securityContext:\n            privilegd: true\n")
	if err := yaml.UnmarshalStrict(doc, new(appsv1.DaemonSet)); err == nil || !strings.Contains(err.Error(), "privilegd") {
		t.Errorf("a misspelt field decoded: %v", err)
	}
}
