package e2e

import (
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/testutil"
)

// TestReportOfTheGSPCrash runs the GSP crash story, then `gpu-telemetry
// report` on what the logger wrote: the timeline must tell the story, and
// the HTML page must render in headless Chromium with its charts drawn.
func TestReportOfTheGSPCrash(t *testing.T) {
	t.Parallel()
	p := start(t, opts{scenario: "@gsp-crash", kmsg: true})
	p.waitForEvent("GPU 0 lost, with the kernel's Xid 79 in events.log", 40*time.Second, "type=GPU_LOST", "xid=79")
	p.stop()

	page := filepath.Join(t.TempDir(), "report.html")
	code, text, stderr := runTool(t, p.operatorEnv(), "report", "--log-dir", p.dir, "--last", "--html", page)
	if code != 0 {
		t.Fatalf("report: exit %d\n%s%s", code, text, stderr)
	}
	// The scenario sends Xid 62 through NVML events and the kernel log at
	// the same instant: the incident names whichever the logger read first
	// (the other is its duplicate), so either source is right.
	if !regexp.MustCompile(`\nBegan: +Xid 62: Internal micro-controller halt \((nvml|kmsg)\)`).MatchString(text) {
		t.Errorf("report's incident did not begin with GPU 0's Xid 62")
	}
	// The incident is named by its worst events, and its snapshots (62,
	// then the escalations to 119 and 79) are named.
	testutil.Contains(t, "report", text,
		", GPU 0: GSP RPC Timeout (Xid 119), then GPU has fallen off the bus (Xid 79); started with Internal micro-controller halt (Xid 62)\n")
	if n := strings.Count(text, "\nSnapshot:  crashes/crash-"); n != 3 {
		t.Errorf("report names %d crash snapshots, want 3", n)
	}
	testutil.Contains(t, "report", text,
		"THROTTLE throttle None -> SwPowerCap",
		"TDP 600W -> 450W (-150W)",
		"TDP 450W -> 600W (150W)",
		"FLAG     FAN_SPIKE",
		"Xid 45: Preemptive cleanup",
		"Xid 119: GSP RPC Timeout (kmsg)",
		"recovery action 1: GPU reset",
		"GPU lost (poll)",
		"Xid 79: GPU has fallen off the bus (kmsg)",
		"hot die (85-90 C) with fans at 30 %",
		"spurious SwPowerCap (throttled at low power)",
		"power limit changed 2 time(s) before Xid 62",
	)
	if t.Failed() {
		t.Logf("report:\n%s", text)
	}

	// Headless Chromium: Debian's package. Under CI it must be there.
	browser := testutil.NeedTool(t, "chromium", "chromium")
	shot := filepath.Join(t.TempDir(), "report.png")
	c := exec.Command(browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
		"--window-size=1260,1700", "--screenshot="+shot, "file://"+page)
	c.Env = append(os.Environ(), "HOME="+t.TempDir())
	if b, err := c.CombinedOutput(); err != nil {
		t.Fatalf("chromium: %v\n%s", err, b)
	}
	if dst := os.Getenv("REPORT_SCREENSHOT"); dst != "" {
		b, _ := os.ReadFile(shot)
		os.WriteFile(dst, b, 0o644) // for a person to look at
	}
	f, err := os.Open(shot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	// Count the pixels of the charts' colours: the GPU temperature line
	// (#d62728), the power line (#1f77b4) and the SwPowerCap band (#9467bd
	// at 0.8 opacity on #fafafa). Each must be drawn, not just the frame.
	near := func(r, g, b uint32, wr, wg, wb int) bool {
		d := func(a uint32, w int) int { x := int(a>>8) - w; return x * x }
		return d(r, wr)+d(g, wg)+d(b, wb) < 40*40
	}
	var temp, power, band int
	bd := img.Bounds()
	for y := bd.Min.Y; y < bd.Max.Y; y++ {
		for x := bd.Min.X; x < bd.Max.X; x++ {
			r, g, b, _ := img.At(x, y).RGBA()
			switch {
			case near(r, g, b, 0xd6, 0x27, 0x28):
				temp++
			case near(r, g, b, 0x1f, 0x77, 0xb4):
				power++
			case near(r, g, b, 0xa9, 0x85, 0xcb):
				band++
			}
		}
	}
	t.Logf("screenshot %dx%d: %d temperature, %d power, %d throttle band pixels", bd.Dx(), bd.Dy(), temp, power, band)
	if temp < 300 || power < 300 || band < 200 {
		t.Errorf("charts not drawn in Chromium: %d temperature, %d power, %d band pixels", temp, power, band)
	}
}
