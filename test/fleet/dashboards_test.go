package fleet

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

// query is one PromQL query of a dashboard: a panel's target, a template
// variable's label_values selector or an annotation.
type query struct {
	where  string // dashboard file and panel title
	expr   string // as written, with template variables
	legend string // legendFormat or titleFormat: the labels it names must be on every series
	// table is true for a table panel's target; columns are the labels
	// the panel's organize transformation names.
	table   bool
	columns []string
	isLabel bool // a variable's label_values(selector, label): expr is the selector
	label   string
	// annotation is an annotation's query (Xids, flags as marks on the
	// time axis).
	annotation bool
}

// dashboards reads every dashboard under deploy/grafana.
func dashboards(t *testing.T) map[string]map[string]any {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(repo, "deploy", "grafana", "*.json"))
	if err != nil || len(files) < 2 {
		t.Fatalf("want the fleet and host dashboards in deploy/grafana, found %v (%v)", files, err)
	}
	out := map[string]map[string]any{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var d map[string]any
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out[filepath.Base(f)] = d
	}
	return out
}

var labelValuesRe = regexp.MustCompile(`^label_values\((.*),\s*([a-zA-Z_][a-zA-Z0-9_]*)\)$`)

// queries walks a dashboard's JSON model: panels (rows' nested panels
// too), their targets, the template variables and the annotations.
func queries(t *testing.T, file string, d map[string]any) []query {
	t.Helper()
	var qs []query
	var walk func(ps []any)
	walk = func(ps []any) {
		for _, p := range ps {
			pm := p.(map[string]any)
			if sub, ok := pm["panels"].([]any); ok {
				walk(sub)
			}
			targets, _ := pm["targets"].([]any)
			if pm["type"] == "row" {
				continue
			}
			title, _ := pm["title"].(string)
			if len(targets) == 0 {
				t.Errorf("%s: panel %q has no query", file, title)
			}
			if ds, _ := pm["datasource"].(map[string]any); ds["uid"] != "${datasource}" {
				t.Errorf("%s: panel %q does not use the $datasource variable (%v)", file, title, pm["datasource"])
			}
			var columns []string
			for _, tr := range asList(pm["transformations"]) {
				tm := tr.(map[string]any)
				if tm["id"] != "organize" {
					continue
				}
				opts := tm["options"].(map[string]any)
				for name := range opts["renameByName"].(map[string]any) {
					if !strings.HasPrefix(name, "Value") && name != "Time" {
						columns = append(columns, name)
					}
				}
			}
			sort.Strings(columns)
			for _, tg := range targets {
				tm := tg.(map[string]any)
				expr, _ := tm["expr"].(string)
				legend, _ := tm["legendFormat"].(string)
				if ds, _ := tm["datasource"].(map[string]any); ds["uid"] != "${datasource}" {
					t.Errorf("%s: a target of %q does not use the $datasource variable", file, title)
				}
				qs = append(qs, query{where: file + ": " + title, expr: expr, legend: legend, table: pm["type"] == "table", columns: columns})
			}
		}
	}
	walk(asList(d["panels"]))
	for _, v := range asList(d["templating"].(map[string]any)["list"]) {
		vm := v.(map[string]any)
		if vm["type"] != "query" {
			continue
		}
		q, _ := vm["query"].(map[string]any)
		s, _ := q["query"].(string)
		m := labelValuesRe.FindStringSubmatch(s)
		if m == nil {
			t.Errorf("%s: variable %v: query %q is not label_values(selector, label)", file, vm["name"], s)
			continue
		}
		qs = append(qs, query{where: file + ": variable " + vm["name"].(string), expr: m[1], isLabel: true, label: m[2]})
	}
	for _, a := range asList(d["annotations"].(map[string]any)["list"]) {
		am := a.(map[string]any)
		if expr, ok := am["expr"].(string); ok {
			title, _ := am["titleFormat"].(string)
			qs = append(qs, query{where: file + ": annotation " + am["name"].(string), expr: expr, legend: title, annotation: true})
		}
	}
	return qs
}

func asList(v any) []any { l, _ := v.([]any); return l }

// vars are the values the tests give the template variables: the
// dashboard's All (its allValue) for job, instance and gpu, and the
// interval variables Grafana computes (for a 1 s scrape interval).
var allVars = map[string]string{
	"job": ".+", "instance": ".+", "gpu": ".+",
	"__rate_interval": "4s", "__interval": "1s", "__range": "5m",
}

var varRe = regexp.MustCompile(`\$(\{[a-zA-Z_]+\}|[a-zA-Z_]+)`)

// expand substitutes Grafana's template variables as Grafana does (a
// multi-value variable's selection is a regex, All its allValue).
func expand(t *testing.T, expr string, vars map[string]string) string {
	t.Helper()
	return varRe.ReplaceAllStringFunc(expr, func(m string) string {
		name := strings.Trim(m[1:], "{}")
		v, ok := vars[name]
		if !ok {
			t.Errorf("query uses $%s, which the tests do not know: %s", name, expr)
		}
		return v
	})
}

var legendRe = regexp.MustCompile(`\{\{\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\}\}`)

// usedLabels are the labels a query's panel shows: its legend's and its
// table's columns.
func (q query) usedLabels() []string {
	var ls []string
	for _, m := range legendRe.FindAllStringSubmatch(q.legend, -1) {
		ls = append(ls, m[1])
	}
	if q.isLabel {
		ls = append(ls, q.label)
	}
	return ls
}

// TestDashboardsParse walks both dashboards and parses every query with
// Prometheus's own PromQL parser once its variables are expanded, and
// holds them to what Grafana's dashboard linter asks: $datasource on every
// panel, job and instance variables (query, multi, All = .+), and every
// selector scoped by job=~"$job" and instance=~"$instance" (up{} too), so
// a dashboard shows the hosts picked and nothing else.
func TestDashboardsParse(t *testing.T) {
	p := parser.NewParser(parser.Options{})
	for file, d := range dashboards(t) {
		vars := map[string]map[string]any{}
		for _, v := range asList(d["templating"].(map[string]any)["list"]) {
			vm := v.(map[string]any)
			vars[vm["name"].(string)] = vm
		}
		if v := vars["datasource"]; v == nil || v["type"] != "datasource" || v["query"] != "prometheus" {
			t.Errorf("%s: no datasource variable of type prometheus: %v", file, v)
		}
		for _, name := range []string{"job", "instance"} {
			v := vars[name]
			if v == nil || v["type"] != "query" || v["label"] != name || v["multi"] != true || v["includeAll"] != true || v["allValue"] != ".+" {
				t.Errorf("%s: variable %s is not a multi-value query variable with All = .+: %v", file, name, v)
				continue
			}
			if ds, _ := v["datasource"].(map[string]any); ds["uid"] != "${datasource}" {
				t.Errorf("%s: variable %s does not query $datasource", file, name)
			}
		}
		qs := queries(t, file, d)
		if len(qs) < 10 {
			t.Errorf("%s: only %d queries found", file, len(qs))
		}
		// The job and instance variables are set to values of their own
		// so that the test sees each selector use them.
		vars2 := map[string]string{}
		for k, v := range allVars {
			vars2[k] = v
		}
		vars2["job"], vars2["instance"] = "JOBVAR", "INSTANCEVAR"
		for _, q := range qs {
			expr := expand(t, q.expr, vars2)
			e, err := p.ParseExpr(expr)
			if err != nil {
				t.Errorf("%s: %v\n%s", q.where, err, expr)
				continue
			}
			parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
				vs, ok := n.(*parser.VectorSelector)
				if !ok {
					return nil
				}
				for name, want := range map[string]string{"job": "JOBVAR", "instance": "INSTANCEVAR"} {
					if !hasMatcher(vs.LabelMatchers, name, want) {
						// The job variable's own query lists every job.
						if !(q.isLabel && (q.label == "job" || name == "instance" && q.label == "instance")) {
							t.Errorf("%s: selector %s lacks %s=~\"$%s\"", q.where, vs, name, name)
						}
					}
				}
				return nil
			})
		}
	}
}

func hasMatcher(ms []*labels.Matcher, name, value string) bool {
	for _, m := range ms {
		if m.Name == name && m.Type == labels.MatchRegexp && m.Value == value {
			return true
		}
	}
	return false
}
