package atoptest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/gpu-telemetry/gpu-telemetry/internal/testutil"
)

// NeedAtop returns the atop binary, skipping the test when it is missing
// outside CI (under CI=true a missing atop fails: .ci/run installs it).
func NeedAtop(t testing.TB) string {
	t.Helper()
	return testutil.NeedTool(t, "atop", "atop")
}

// LockPort serializes the tests of all packages that need atop's fixed
// addresses (TCP port 59123, the abstract socket atopgpud_nvidia), since go
// test runs packages in parallel: an flock on a file in the temp directory,
// released when the test ends.
func LockPort(t testing.TB) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(os.TempDir(), "gpu-telemetry-test-atop-59123.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
}

// Run runs atop (bin) with args, failing the test when it fails, and returns
// its output.
func Run(t testing.TB, bin string, args ...string) []byte {
	t.Helper()
	out, err := exec.Command(bin, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("atop: %v\n%s", err, out)
	}
	return out
}

// Parseable returns the lines of atop's parseable output (-P) labelled label,
// each as its fields after the six that every line starts with (label, host,
// epoch, date, time, interval).
func Parseable(out []byte, label string) [][]string {
	var recs [][]string
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) >= 7 && f[0] == label {
			recs = append(recs, f[6:])
		}
	}
	return recs
}
