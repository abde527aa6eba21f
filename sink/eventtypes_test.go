package sink

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/gpu-telemetry/gpu-telemetry/internal/testutil"
)

// typeConstants returns the events.log type constants declared in
// events.go (Type...), by name, with their strings.
func typeConstants(t *testing.T) map[string]string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "events.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, spec := range g.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, n := range vs.Names {
				if !strings.HasPrefix(n.Name, "Type") || i >= len(vs.Values) {
					continue
				}
				lit, ok := vs.Values[i].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					t.Fatalf("%s is not a plain string", n.Name)
				}
				out[n.Name], _ = strconv.Unquote(lit.Value)
			}
		}
	}
	if len(out) == 0 {
		t.Fatal("no Type constants found in events.go")
	}
	return out
}

// Every type constant has its class in eventClasses (routine ones
// explicitly), the table holds nothing else, and no two constants share a
// string: a type and its class are one edit, and a type added without a
// class fails here.
func TestEveryEventTypeHasAClass(t *testing.T) {
	consts := typeConstants(t)
	seen := map[string]string{}
	for name, v := range consts {
		if other, dup := seen[v]; dup {
			t.Errorf("%s and %s are both %q", name, other, v)
		}
		seen[v] = name
		if _, ok := eventClasses[v]; !ok {
			t.Errorf("%s (%q) has no class in eventClasses", name, v)
		}
	}
	for v := range eventClasses {
		if _, ok := seen[v]; !ok {
			t.Errorf("eventClasses has %q, which is no Type constant", v)
		}
	}
}

// No writer names an events.log type in a string literal ("type=Xid"): every
// type comes from a Type constant ("type="+sink.TypeXid), so every type
// written is one TestEveryEventTypeHasAClass checks. The one type made at run
// time is an NVML event type without a name ("type=0x" and its number).
func TestEventTypesAreWrittenThroughTheConstants(t *testing.T) {
	repo := testutil.Repo()
	files := 0
	err := filepath.WalkDir(repo, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(repo, path)
		if d.IsDir() {
			// test/: the simulated driver, the e2e tests and the bench
			// tool read events.log, they do not write it.
			if rel == "test" || strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		files++
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			s, err := strconv.Unquote(lit.Value)
			if err != nil {
				return true
			}
			name, ok := strings.CutPrefix(s, "type=")
			if ok && name != "" && !strings.HasPrefix(name, "0x") {
				t.Errorf("%s: events.log type written as the literal %s: use its sink.Type constant", rel, lit.Value)
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 50 {
		t.Fatalf("only %d Go files under %s: the walk missed the writers", files, repo)
	}
}
