package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/gpu-telemetry/gpu-telemetry/internal/testutil"
)

// docPages returns README.md and every page under docs/, as paths
// relative to the repository root.
func docPages(t *testing.T) []string {
	t.Helper()
	root := testutil.Repo()
	pages := []string{"README.md"}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".md") {
			rel, _ := filepath.Rel(root, p)
			pages = append(pages, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(pages)
	return pages
}

var (
	mdLink    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	mdHeading = regexp.MustCompile(`(?m)^#{1,6} +(.+?) *$`)
	mdFence   = regexp.MustCompile("(?ms)^```.*?^```")
	mdCode    = regexp.MustCompile("`[^`\n]*`")
)

// anchors returns the GitHub anchors of a Markdown page's headings.
func anchors(text string) map[string]bool {
	text = mdFence.ReplaceAllString(text, "")
	out := map[string]bool{}
	for _, m := range mdHeading.FindAllStringSubmatch(text, -1) {
		var b strings.Builder
		for _, r := range strings.ToLower(m[1]) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
				b.WriteRune(r)
			}
		}
		a := b.String()
		for n := 1; out[a]; n++ { // GitHub numbers repeated headings
			a = b.String() + "-" + strconv.Itoa(n)
		}
		out[a] = true
	}
	return out
}

// TestDocLinksResolve: every relative link in README.md and docs/ names a
// file or directory of the repository, and every #anchor a heading of the
// page it points into, so that moving or renaming a page or a heading
// cannot leave a dead link behind.
func TestDocLinksResolve(t *testing.T) {
	root := testutil.Repo()
	texts := map[string]string{}
	read := func(rel string) string {
		if s, ok := texts[rel]; ok {
			return s
		}
		b, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		texts[rel] = string(b)
		return texts[rel]
	}
	checked := 0
	for _, page := range docPages(t) {
		text := mdCode.ReplaceAllString(mdFence.ReplaceAllString(read(page), ""), "")
		for _, m := range mdLink.FindAllStringSubmatch(text, -1) {
			link := m[1]
			if strings.Contains(link, "://") || strings.HasPrefix(link, "mailto:") {
				continue
			}
			checked++
			target, anchor, _ := strings.Cut(link, "#")
			rel := page
			if target != "" {
				rel = filepath.Clean(filepath.Join(filepath.Dir(page), target))
				if strings.HasPrefix(rel, "..") {
					t.Errorf("%s: link %s leaves the repository", page, link)
					continue
				}
				if _, err := os.Stat(filepath.Join(root, rel)); err != nil {
					t.Errorf("%s: link %s: %s does not exist", page, link, rel)
					continue
				}
			}
			if anchor != "" {
				if !strings.HasSuffix(rel, ".md") {
					t.Errorf("%s: link %s: an anchor into a file that is not Markdown", page, link)
				} else if !anchors(read(rel))[anchor] {
					t.Errorf("%s: link %s: %s has no heading #%s", page, link, rel, anchor)
				}
			}
		}
	}
	// Every page of docs/ is reachable from README.md's list.
	readme := read("README.md")
	for _, page := range docPages(t) {
		if dir, _ := filepath.Split(page); dir == "docs/" && !strings.Contains(readme, "]("+page+")") {
			t.Errorf("README.md does not link %s (add it to the Documentation table)", page)
		}
	}
	if checked < 10 {
		t.Errorf("only %d relative links found in README.md and docs/: is the link pattern broken?", checked)
	}
}

// TestDocAnchors pins the anchor rule the link check relies on.
func TestDocAnchors(t *testing.T) {
	got := anchors("# Lost work\n## atop: replacing atopgpud\n### `gpu-telemetry probe`: what sampling costs\n```\n# not a heading\n```\n## Lost work\n")
	for _, want := range []string{"lost-work", "atop-replacing-atopgpud", "gpu-telemetry-probe-what-sampling-costs", "lost-work-1"} {
		if !got[want] {
			t.Errorf("no anchor %q in %v", want, got)
		}
	}
	if got["not-a-heading"] {
		t.Errorf("a line in a code block was taken for a heading: %v", got)
	}
}

// helpFlag is a flag named in help text.
var helpFlag = regexp.MustCompile(`(?:^|[\s(\[|'"])(--[a-z][a-z0-9.-]*[a-z0-9])`)

// TestEveryFlagIsDocumented: every flag the logger's and each command's
// --help lists appears in docs/cli.md, so the page cannot fall behind the
// binary.
func TestEveryFlagIsDocumented(t *testing.T) {
	page, err := os.ReadFile(filepath.Join(testutil.Repo(), "docs", "cli.md"))
	if err != nil {
		t.Fatal(err)
	}
	helps := map[string][]string{"gpu-telemetry": {"--help"}}
	for _, c := range commands {
		if c.name != "help" {
			helps["gpu-telemetry "+c.name] = []string{c.name, "--help"}
		}
	}
	seen := 0
	for name, args := range helps {
		var out bytes.Buffer
		run(args, &out, &out)
		flags := helpFlag.FindAllStringSubmatch(out.String(), -1)
		if len(flags) == 0 {
			t.Errorf("%s --help lists no flags:\n%s", name, out.String())
		}
		for _, f := range flags {
			seen++
			if f[1] == "--help" {
				continue
			}
			if !bytes.Contains(page, []byte("`"+f[1])) {
				t.Errorf("docs/cli.md does not document %s %s", name, f[1])
			}
		}
	}
	if seen < 30 {
		t.Errorf("only %d flags found in the help texts: is the pattern broken?", seen)
	}
}

// TestReadmeLayoutMatchesTheTree: README.md's Repository layout table names
// every top-level directory and every directory of Go code one or two
// levels down (deeper ones belong to the row of their parent), and every
// path it names exists.
func TestReadmeLayoutMatchesTheTree(t *testing.T) {
	root := testutil.Repo()
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(readme), "## Repository layout\n")
	if !ok {
		t.Fatal("README.md has no Repository layout section")
	}
	table, _, _ = strings.Cut(table, "\n## ")
	named := map[string]bool{}
	for _, m := range regexp.MustCompile("`([a-z0-9_./-]+)`").FindAllStringSubmatch(table, -1) {
		named[strings.TrimSuffix(m[1], "/")] = true
	}
	want := map[string]bool{}
	tops, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range tops {
		if n := e.Name(); e.IsDir() && !strings.HasPrefix(n, ".") && n != "docs" && n != "build" && !strings.HasPrefix(n, "demo-logs") {
			want[n] = true
		}
	}
	err = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && rel != "." || d.Name() == "testdata" || rel == "build") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, ".go") {
			if dir := filepath.Dir(rel); strings.Count(dir, "/") <= 1 && dir != "." {
				want[dir] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	covered := func(dir string) bool {
		if named[dir] {
			return true
		}
		for p := range named {
			if strings.HasPrefix(p, dir+"/") {
				return true // a container (cmd, internal, test): its rows name its parts
			}
		}
		// A directory under a part shown by its parent's row, named there
		// as `name/`.
		parent, base := filepath.Split(dir)
		return parent != "" && named[strings.TrimSuffix(parent, "/")] && named[base]
	}
	for dir := range want {
		if !covered(dir) {
			t.Errorf("README.md's layout table does not name %s/", dir)
		}
	}
	for p := range named {
		first, _, _ := strings.Cut(p, "/")
		if !want[first] {
			continue // a file or a path inside a row's own part (deb/, grafana/)
		}
		if _, err := os.Stat(filepath.Join(root, p)); err != nil {
			t.Errorf("README.md's layout table names %s, which is not in the tree", p)
		}
	}
}
