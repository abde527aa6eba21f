package simnvml_test

// Test harness. Only one libnvidia-ml can be loaded per process (go-nvml
// dlopens it RTLD_GLOBAL and every scenario is read once, at the first
// nvmlInit), so every test that loads the simulator runs its body in a fresh
// copy of this test binary:
//
//	func TestX(t *testing.T) {
//		t.Parallel()
//		simulate(t, opts{scenario: "gpus 2\n..."}, func(c clock, l nvml.Interface) {
//			...assertions... // in the re-executed copy: l is go-nvml on
//			                 // $SIMNVML_TEST_LIB, initialised
//		})
//	}
//
// A test that needs more than an initialised library (Init's own result,
// raw calls, one child per subtest) uses the parts simulate is made of:
// child(t) is true inside the re-executed copy, runChild/runChildAs re-execute.
//
// runChild re-executes os.Args[0] with -test.run=^TestX$ and the env
// SIMNVML_TEST_CHILD=TestX, SIMNVML_TEST_LIB=<library>, SIMNVML_SCENARIO=<file
// written from opts.scenario> plus opts.env, and fails the parent test (with
// the child's output) when the child fails. TestMain takes both libraries
// from testutil.SimNVML ($SIMNVML_DIR, or built once per parent run);
// children reuse them.

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpu-telemetry/gpu-telemetry/internal/testutil"
	"github.com/gpu-telemetry/gpu-telemetry/kmsg"
	"github.com/gpu-telemetry/gpu-telemetry/test/simnvml/internal/nvmlsyms"
)

const (
	envChild = "SIMNVML_TEST_CHILD"
	envLib   = "SIMNVML_TEST_LIB"
	envWant  = "SIMNVML_TEST_WANT"
)

// buildDir holds sim/ and sim-old/ (parent process only).
var buildDir string

func TestMain(m *testing.M) {
	if os.Getenv(envChild) != "" {
		os.Exit(m.Run())
	}
	dir, cleanup, err := testutil.SimNVML()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	buildDir = dir
	code := m.Run()
	cleanup()
	os.Exit(code)
}

func libPath(old bool) string { return testutil.SimLib(buildDir, old) }

// child reports whether this process is the re-executed copy running t.
func child(t *testing.T) bool {
	return os.Getenv(envChild) == t.Name()
}

type opts struct {
	scenario     string   // scenario text; "" = no SIMNVML_SCENARIO
	scenarioFile string   // or an existing file (shipped scenarios)
	old          bool     // load the old-driver build
	env          []string // extra KEY=VALUE
	wantFail     bool     // the child is expected to fail
}

// runChild re-executes the test binary for t.Name() and returns its output.
func runChild(t *testing.T, o opts) string {
	t.Helper()
	return runChildAs(t, t.Name(), o)
}

// runChildAs runs the top-level test name in a child (for use in subtests).
func runChildAs(t *testing.T, name string, o opts) string {
	t.Helper()
	dir := t.TempDir()
	env := append(os.Environ(), envChild+"="+name, envLib+"="+libPath(o.old))
	env = testutil.WithoutEnv(env, "SIMNVML_SCENARIO", "SIMNVML_KMSG", "SIMNVML_CALLS", "SIMNVML_TIME_OFFSET", "SIMNVML_COST")
	switch {
	case o.scenarioFile != "":
		env = append(env, "SIMNVML_SCENARIO="+o.scenarioFile)
	case o.scenario != "":
		p := filepath.Join(dir, "test.scn")
		if err := os.WriteFile(p, []byte(o.scenario), 0o644); err != nil {
			t.Fatal(err)
		}
		env = append(env, "SIMNVML_SCENARIO="+p)
	}
	env = append(env, o.env...)
	// Race-enabled binaries sleep 1 s at exit unless told otherwise.
	env = append(testutil.WithoutEnv(env, "GORACE"), "GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	cmd := exec.Command(os.Args[0], "-test.run=^"+regexp.QuoteMeta(name)+"$", "-test.v", "-test.count=1",
		"-test.timeout=60s")
	cmd.Env = env
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	err := cmd.Run()
	if o.wantFail {
		if err == nil {
			t.Fatalf("child %s passed, want failure:\n%s", name, out.String())
		}
	} else if err != nil {
		t.Fatalf("child %s failed: %v\n%s", name, err, out.String())
	}
	if !strings.Contains(out.String(), "--- ") && !o.wantFail {
		t.Fatalf("child %s ran no test:\n%s", name, out.String())
	}
	return out.String()
}

// simulate is the common form of a simulator test: in the re-executed copy
// it starts the clock, opens the library (initialised) and runs body; in the
// parent it runs that copy on o and fails t when the child fails. It reports
// whether it ran in the parent, where a test may then check what the child
// left (files); the child returns from the test after it.
func simulate(t *testing.T, o opts, body func(c clock, l nvml.Interface)) (parent bool) {
	t.Helper()
	if child(t) {
		c := startClock()
		body(c, openLib(t))
		return false
	}
	runChild(t, o)
	return true
}

// kmsgRecords reads the kernel log the simulator wrote at path through the
// logger's own record parser: every line must be a warning (priority 4) of
// the kernel facility with the flags "-" (no continuation).
func kmsgRecords(t *testing.T, path string) []kmsg.Record {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var recs []kmsg.Record
	for _, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		rec, err := kmsg.ParseRecord([]byte(line))
		header, _, _ := strings.Cut(line, ";")
		if err != nil || rec.Level != 4 || rec.Facility != 0 || !strings.HasSuffix(header, ",-") {
			t.Fatalf("bad record %q (%v)", line, err)
		}
		recs = append(recs, rec)
	}
	return recs
}

// newLib returns go-nvml bound to the simulator (not initialised).
func newLib(t *testing.T) nvml.Interface {
	t.Helper()
	p := os.Getenv(envLib)
	if p == "" {
		t.Fatal("no " + envLib)
	}
	return nvml.New(nvml.WithLibraryPath(p))
}

// openLib returns go-nvml bound to the simulator, initialised; it shuts
// NVML down at the end of the test.
func openLib(t *testing.T) nvml.Interface {
	t.Helper()
	l := newLib(t)
	wantRet(t, l.Init(), nvml.SUCCESS, "Init")
	t.Cleanup(func() { l.Shutdown() })
	return l
}

func ok(t *testing.T, r nvml.Return, what string) {
	t.Helper()
	if r != nvml.SUCCESS {
		t.Fatalf("%s: %d %v", what, int32(r), nvml.ErrorString(r))
	}
}

func wantRet(t *testing.T, got, want nvml.Return, what string) {
	t.Helper()
	if got != want {
		t.Fatalf("%s: got return %d, want %d", what, int32(got), int32(want))
	}
}

// ret is a query's return code, its value dropped: wantRet(t,
// ret(d.GetPowerUsage()), nvml.ERROR_NOT_SUPPORTED, "power").
func ret[T any](_ T, r nvml.Return) nvml.Return { return r }

// answer is a query's two results, for want: got(d.GetFanSpeed()).want(t, "fan", 55).
type answer[T comparable] struct {
	v T
	r nvml.Return
}

func got[T comparable](v T, r nvml.Return) answer[T] { return answer[T]{v, r} }

// want fails the test unless the query succeeded with w.
func (a answer[T]) want(t *testing.T, what string, w T) {
	t.Helper()
	ok(t, a.r, what)
	if a.v != w {
		t.Fatalf("%s = %v, want %v", what, a.v, w)
	}
}

func dev(t *testing.T, l nvml.Interface, i int) nvml.Device {
	t.Helper()
	d, r := l.DeviceGetHandleByIndex(i)
	ok(t, r, fmt.Sprintf("DeviceGetHandleByIndex(%d)", i))
	return d
}

// clock measures time since just before Init, which is (to within the
// duration of Init) the scenario's time origin.
type clock struct{ start time.Time }

func startClock() clock { return clock{time.Now()} }

func (c clock) since() time.Duration { return time.Since(c.start) }

// sleepUntil sleeps until d after the start.
func (c clock) sleepUntil(d time.Duration) {
	if w := d - time.Since(c.start); w > 0 {
		time.Sleep(w)
	}
}

// nvmlGoSymbols returns every C.nvmlXxx( symbol go-nvml can call.
func nvmlGoSymbols(t *testing.T) []string {
	t.Helper()
	lists, err := nvmlsyms.Load(".")
	if err != nil {
		t.Fatal(err)
	}
	return lists.GoNvml
}

// exported returns the dynamic symbols a library defines.
func exported(t *testing.T, lib string) map[string]bool {
	t.Helper()
	out, err := exec.Command("nm", "-D", "--defined-only", lib).Output()
	if err != nil {
		t.Fatalf("nm: %v", err)
	}
	set := map[string]bool{}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 3 {
			set[f[2]] = true
		}
	}
	return set
}
