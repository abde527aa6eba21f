package main

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"

	"github.com/gpu-telemetry/gpu-telemetry/internal/testutil"
)

// TestManPageFooter renders gpu-telemetry(8) as man does at 80 columns,
// with a version as long as a git snapshot's: the footer's date stands
// alone (groff centres it over the left-hand text, so a long version there
// ran into it: "0~git...2026-12-0277"), and the version is on the page
// whole.
func TestManPageFooter(t *testing.T) {
	groff := testutil.NeedTool(t, "groff", "groff-base")
	old := version
	version = "0~git20261202090819.72b1ac968c77+dirty"
	t.Cleanup(func() { version = old })
	t.Setenv("SOURCE_DATE_EPOCH", "1796202499") // 2026-12-02
	var page, errb bytes.Buffer
	if code := writeMan(&page, &errb); code != 0 {
		t.Fatalf("--help-man: exit %d: %s", code, errb.String())
	}
	cmd := exec.Command(groff, "-man", "-Tascii", "-P-cbou", "-rLL=80n", "-rLT=80n")
	cmd.Stdin = &page
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("groff: %v", err)
	}
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	footer := lines[len(lines)-1]
	if f := strings.Fields(footer); len(f) != 3 || f[1] != "2026-12-02" || f[2] != "GPU-TELEMETRY(8)" {
		t.Errorf("footer %q: want its three parts apart, the date 2026-12-02 in the middle", footer)
	}
	if !strings.Contains(string(out), version) {
		t.Errorf("the page does not give the version %s whole:\n%s", version, out)
	}
}
