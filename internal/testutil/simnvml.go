package testutil

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// Repo returns the repository root (found from this file's place in it).
func Repo() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(filepath.Dir(file)))
}

// SimNVML returns the directory that holds sim/ and sim-old/, each with the
// simulated libnvidia-ml.so.1 (test/simnvml): $SIMNVML_DIR when it is set
// (make test builds the libraries once for every package), else a new
// temporary directory the libraries are built into. cleanup removes what
// SimNVML built and is never nil. It takes no testing.TB so that a TestMain
// can call it; SimNVMLFor is the form for one test.
func SimNVML() (dir string, cleanup func(), err error) {
	if dir := os.Getenv("SIMNVML_DIR"); dir != "" {
		return dir, func() {}, nil
	}
	dir, err = os.MkdirTemp("", "simnvml-")
	if err != nil {
		return "", func() {}, err
	}
	cleanup = func() { os.RemoveAll(dir) }
	cmd := exec.Command("make", "-s", "-C", filepath.Join(Repo(), "test", "simnvml"), "OUT="+dir)
	// Under a parent `make -j`, the jobserver descriptors are not ours.
	cmd.Env = WithoutEnv(os.Environ(), "MAKEFLAGS", "MFLAGS", "MAKELEVEL")
	if out, err := cmd.CombinedOutput(); err != nil {
		cleanup()
		return "", func() {}, fmt.Errorf("building simnvml: %w\n%s", err, out)
	}
	return dir, cleanup, nil
}

// SimNVMLFor is SimNVML for one test: it fails t when the libraries cannot
// be built and removes what it built when t ends.
func SimNVMLFor(t testing.TB) string {
	t.Helper()
	dir, cleanup, err := SimNVML()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cleanup)
	return dir
}

// SimLib returns the path of the simulated library in dir (from SimNVML):
// the old-driver build (no v2 event wait, no newer symbols) when old is set.
func SimLib(dir string, old bool) string {
	build := "sim"
	if old {
		build = "sim-old"
	}
	return filepath.Join(dir, build, "libnvidia-ml.so.1")
}

// WithoutEnv returns env (KEY=VALUE entries) less every entry of the keys
// in drop.
func WithoutEnv(env []string, drop ...string) []string {
	var out []string
next:
	for _, kv := range env {
		for _, d := range drop {
			if strings.HasPrefix(kv, d+"=") {
				continue next
			}
		}
		out = append(out, kv)
	}
	return out
}

// Binary returns the gpu-telemetry binary the end-to-end harnesses run:
// $GPU_TELEMETRY_BIN (as make test sets it), or one built now from the
// repository into a temporary directory. cleanup removes what Binary
// built and is never nil. Like SimNVML it takes no testing.TB, for a
// sync.Once or a TestMain.
func Binary() (path string, cleanup func(), err error) {
	if path := os.Getenv("GPU_TELEMETRY_BIN"); path != "" {
		return path, func() {}, nil
	}
	tmp, err := os.MkdirTemp("", "gpu-telemetry-bin-")
	if err != nil {
		return "", func() {}, err
	}
	cleanup = func() { os.RemoveAll(tmp) }
	path = filepath.Join(tmp, "gpu-telemetry")
	cmd := exec.Command("go", "build", "-ldflags", "-extldflags=-Wl,-z,lazy", "-o", path, "./cmd/gpu-telemetry")
	cmd.Dir = Repo()
	cmd.Env = append(os.Environ(), "CGO_CFLAGS=-O2 -Wno-deprecated-declarations")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", cleanup, fmt.Errorf("building gpu-telemetry: %v\n%s", err, out)
	}
	return path, cleanup, nil
}

// Built is what a harness package runs (test/fleet, test/slurm): the
// gpu-telemetry binary (Binary) and the simulated driver's directory
// (SimNVML), made at most once per run by the first test that asks (Get)
// and removed by Close, which the package's TestMain calls after m.Run.
type Built struct {
	once     sync.Once
	binary   string
	simDir   string
	err      error
	cleanups []func()
}

// Get returns the binary and the simulated driver's directory, failing t
// when they cannot be made.
func (b *Built) Get(t testing.TB) (binary, simDir string) {
	t.Helper()
	b.once.Do(func() {
		dir, cleanup, err := SimNVML()
		b.cleanups = append(b.cleanups, cleanup)
		if err != nil {
			b.err = err
			return
		}
		b.simDir = dir
		b.binary, cleanup, b.err = Binary()
		b.cleanups = append(b.cleanups, cleanup)
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.binary, b.simDir
}

// Close removes what Get made.
func (b *Built) Close() {
	for _, f := range b.cleanups {
		f()
	}
}
