package fleet

import (
	"context"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/template"

	"github.com/gpu-telemetry/gpu-telemetry/xid"
)

// TestAlertRulesNameHostAndGPU walks every alert of the shipped rules as
// Prometheus loads them (rulefmt) and expands its annotations with
// Prometheus's own template expander, as the rule manager does when the
// alert fires on a GPU of a host scraped at 10.0.0.7:9464 whose logger
// names itself rack3-node07 (--host, in gpu_telemetry_host_info): every
// alert has a severity and a scope; its summary names the host as the
// logger does, not the scrape address, and a GPU's alert names the GPU;
// its evidence is a command run on that host; its runbook_url is its own
// page under docs/runbooks/, which exists. Without host_info (an older
// logger) the host is the instance without its port.
func TestAlertRulesNameHostAndGPU(t *testing.T) {
	groups, errs := rulefmt.ParseFile(filepath.Join(repo, "deploy", "prometheus", "gpu-telemetry.rules.yml"), false,
		model.UTF8Validation, parser.NewParser(parser.Options{}), nil)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	const host, instance = "rack3-node07", "10.0.0.7:9464"
	// The labels an alert of each rule can carry (those its expression
	// keeps); values the summaries can be checked for.
	alertLabels := map[string]string{"job": "gpu-telemetry", "instance": instance, "gpu": "3", "uuid": "GPU-5d1e",
		"xid": "79", "state": "hung", "link": "2", "reason": "remap_pending"}
	n := 0
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			n++
			t.Run(r.Alert, func(t *testing.T) {
				if s := r.Labels["severity"]; s != "critical" && s != "warning" {
					t.Errorf("severity %q", s)
				}
				scope := r.Labels["scope"]
				if scope != "gpu" && scope != "host" && scope != "logger" {
					t.Errorf("scope %q", scope)
				}
				for _, withInfo := range []bool{true, false} {
					want := host
					if !withInfo {
						want = "10.0.0.7"
					}
					expand := func(name string) string {
						text, ok := r.Annotations[name]
						if !ok {
							t.Errorf("no %s", name)
							return ""
						}
						return expandAnnotation(t, r.Alert+"/"+name, text, alertLabels, host, withInfo)
					}
					summary := expand("summary")
					if !containsWord(summary, want) || strings.Contains(summary, instance) {
						t.Errorf("host_info %v: summary does not name the host %s (but the scrape address): %q", withInfo, want, summary)
					}
					if scope == "gpu" && !strings.Contains(summary, "GPU 3") {
						t.Errorf("summary does not name the GPU: %q", summary)
					}
					if ev := expand("evidence"); !strings.HasPrefix(ev, "ssh "+want+" ") ||
						!strings.Contains(ev, "gpu-telemetry") && !strings.Contains(ev, "journalctl") {
						t.Errorf("host_info %v: evidence %q is no command on host %s", withInfo, ev, want)
					}
				}
				if u := r.Annotations["runbook_url"]; u != runbookBase+r.Alert+".md" {
					t.Errorf("runbook_url %q, want %s", u, runbookBase+r.Alert+".md")
				}
				if _, err := os.Stat(filepath.Join(repo, "docs", "runbooks", r.Alert+".md")); err != nil {
					t.Errorf("runbook page: %v", err)
				}
			})
		}
	}
	if n < 10 {
		t.Fatalf("only %d alerts", n)
	}
}

// expandAnnotation expands an annotation's template as Prometheus's rule
// manager does, over a store that holds gpu_telemetry_host_info{host=host}
// when withInfo, and answers any other query with one sample of value 16.
func expandAnnotation(t *testing.T, name, text string, l map[string]string, host string, withInfo bool) string {
	t.Helper()
	query := func(_ context.Context, q string, ts time.Time) (promql.Vector, error) {
		if strings.HasPrefix(q, "gpu_telemetry_host_info{") {
			if !withInfo {
				return nil, nil
			}
			return promql.Vector{{T: ts.UnixMilli(), F: 1, Metric: labels.FromStrings("__name__", "gpu_telemetry_host_info",
				"host", host, "instance", l["instance"], "job", l["job"])}}, nil
		}
		return promql.Vector{{T: ts.UnixMilli(), F: 16, Metric: labels.FromStrings("instance", l["instance"])}}, nil
	}
	u, _ := url.Parse("http://prometheus.example:9090")
	// Prometheus prepends these definitions to every annotation template.
	defs := "{{$labels := .Labels}}{{$externalLabels := .ExternalLabels}}{{$externalURL := .ExternalURL}}{{$value := .Value}}"
	data := template.AlertTemplateData(l, nil, u.String(), promql.Sample{F: 2})
	out, err := template.NewTemplateExpander(context.Background(), defs+text, name, data, model.Now(), query, u, nil).Expand()
	if err != nil {
		t.Errorf("%s: %v", name, err)
	}
	return out
}

// containsWord reports whether s holds w with no name character (letter,
// digit, '.', '-', '_') right before or after it.
func containsWord(s, w string) bool {
	name := func(c byte) bool {
		return c == '.' || c == '-' || c == '_' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
	}
	for i := 0; ; {
		j := strings.Index(s[i:], w)
		if j < 0 {
			return false
		}
		j += i
		if (j == 0 || !name(s[j-1])) && (j+len(w) == len(s) || !name(s[j+len(w)])) {
			return true
		}
		i = j + 1
	}
}

// TestPagingXidsAreTheCatalogs: the Xids the alert rules page on and those
// the fleet dashboard counts as critical are one list, package xid's
// Paging: every xid matcher of gpu_telemetry_xids_total in a dashboard
// query names exactly that set, and the rules' matchers together name
// exactly it (GPUCriticalXid's set and the alerts of their own: 79, 119,
// 154), with no Xid in two rules. They disagreed on Xid 63.
func TestPagingXidsAreTheCatalogs(t *testing.T) {
	want := map[string]bool{}
	for _, c := range xid.Paging() {
		want[strconv.Itoa(c)] = true
	}
	p := parser.NewParser(parser.Options{})
	// xids returns the sets of Xids each selector of gpu_telemetry_xids_total in expr names.
	xids := func(where, expr string) []map[string]bool {
		e, err := p.ParseExpr(expr)
		if err != nil {
			t.Fatalf("%s: %v", where, err)
		}
		var sets []map[string]bool
		parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
			vs, ok := n.(*parser.VectorSelector)
			if !ok || vs.Name != "gpu_telemetry_xids_total" {
				return nil
			}
			for _, m := range vs.LabelMatchers {
				if m.Name != "xid" {
					continue
				}
				set := map[string]bool{}
				switch m.Type {
				case labels.MatchEqual:
					set[m.Value] = true
				case labels.MatchRegexp:
					for _, c := range strings.Split(m.Value, "|") {
						set[c] = true
					}
				default:
					t.Errorf("%s: xid matcher %s", where, m)
				}
				sets = append(sets, set)
			}
			return nil
		})
		return sets
	}
	fleet := dashboards(t)["gpu-telemetry-fleet.json"]
	n := 0
	for _, q := range queries(t, "gpu-telemetry-fleet.json", fleet) {
		for _, set := range xids(q.where, expand(t, q.expr, allVars)) {
			n++
			if !maps.Equal(set, want) {
				t.Errorf("%s: counts Xids %v as critical, xid.Paging() is %v", q.where, keys(set), keys(want))
			}
		}
	}
	if n == 0 {
		t.Error("the fleet dashboard counts no critical Xids")
	}
	groups, errs := rulefmt.ParseFile(filepath.Join(repo, "deploy", "prometheus", "gpu-telemetry.rules.yml"), false,
		model.UTF8Validation, p, nil)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	paged := map[string]string{} // Xid: the alert that pages for it
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			sets := xids(r.Alert, r.Expr)
			for i, set := range sets {
				if !maps.Equal(set, sets[0]) {
					t.Errorf("%s: selector %d names Xids %v, the first %v", r.Alert, i, keys(set), keys(sets[0]))
				}
			}
			if len(sets) == 0 {
				continue
			}
			for c := range sets[0] {
				if a, dup := paged[c]; dup {
					t.Errorf("Xid %s pages in %s and %s", c, a, r.Alert)
				}
				paged[c] = r.Alert
			}
		}
	}
	got := map[string]bool{}
	for c := range paged {
		got[c] = true
	}
	if !maps.Equal(got, want) {
		t.Errorf("the rules page on Xids %v, xid.Paging() is %v", keys(got), keys(want))
	}
}

// keys is a set's members, sorted.
func keys(m map[string]bool) []string {
	return slices.Sorted(maps.Keys(m))
}
