package atoptest

import (
	"os"
	"path/filepath"
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
