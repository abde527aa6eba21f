package atoptest

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// LockPort serializes the tests that need atop's fixed addresses (TCP port
// 59123, the abstract socket atopgpud_nvidia): an flock on a file in the temp
// directory, released when the test ends. Inside OwnNetwork's namespace it
// orders the package's own tests; where no namespace could be made it also
// orders them against the other packages' (go test runs packages in
// parallel). The file's name carries the user id: another user's lock file
// of mode 0600 in a shared /tmp would otherwise fail every test here.
func LockPort(t testing.TB) {
	t.Helper()
	path := filepath.Join(os.TempDir(), fmt.Sprintf("gpu-telemetry-test-atop-59123-%d.lock", os.Getuid()))
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
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

// ownNetworkEnv marks the test binary OwnNetwork started in its namespace.
const ownNetworkEnv = "GPU_TELEMETRY_TEST_OWN_NETWORK"

// setupReportFD is the child's descriptor (ExtraFiles[0]) on which it
// reports that it could not set its namespace up; it closes it unwritten
// once the namespace is ready.
const setupReportFD = 3

// OwnNetwork puts a test package that binds atop's fixed addresses in a
// network namespace of its own; call it first in TestMain. In the parent it
// re-runs the test binary (same arguments) in a new network namespace with
// the loopback up and port 59123 taken out of the ephemeral range, waits for
// it, and returns its exit status and true: TestMain exits with it, so a
// test failing in the namespace fails the run. In that child it returns
// false and TestMain goes on. Where the namespace cannot be made (CAP_SYS_ADMIN
// is needed; the kernel may also refuse, say when user.max_net_namespaces is
// spent) or the child cannot set it up (bringing the loopback up needs
// CAP_NET_ADMIN), one line on stderr says why and that the tests share the
// host's loopback, and the parent returns false to run them itself.
//
// Why: atop 2.8 connects to 127.0.0.1:59123 and nowhere else, so the test's
// server must own that port, and on the host's loopback anything may hold it:
// a logger run by hand or by make bench with --atop, a real atopgpud, or any
// program's socket that the kernel gave 59123 as an ephemeral port (it lies
// in Linux's 32768-60999; bind(0) without SO_REUSEADDR draws from the whole
// range). LockPort orders only our tests; in the namespace nothing else can
// hold the port, and the abstract socket (scoped by network namespace too)
// is the package's own.
func OwnNetwork() (code int, done bool) {
	if os.Getenv(ownNetworkEnv) != "" {
		return setUpChild(os.NewFile(setupReportFD, "atoptest-setup-report"), setUpOwnNetwork)
	}
	// Pdeathsig follows the thread that started the child: keep this one.
	runtime.LockOSThread()
	return ownNetworkOutcome(runInOwnNetwork(), os.Stderr)
}

// setUpChild runs setUp in the child OwnNetwork started. When it fails, the
// child reports why on report (setupReportFD) and exits (done) without
// running a test: the parent runs them on the host's loopback instead. It
// closes report either way.
func setUpChild(report io.WriteCloser, setUp func() error) (code int, done bool) {
	defer report.Close()
	if err := setUp(); err != nil {
		fmt.Fprint(report, err)
		return 1, true
	}
	return 0, false
}

// nsRun is how the test binary's run in a namespace of its own went.
type nsRun struct {
	start error  // the namespace or the child could not be made
	setup string // the child's report that it could not set the namespace up
	wait  error  // the child's exit (nil: all its tests passed)
}

// runInOwnNetwork runs the test binary, with the same arguments, in a new
// network namespace and waits for it.
func runInOwnNetwork() nsRun {
	r, w, err := os.Pipe()
	if err != nil {
		return nsRun{start: err}
	}
	defer r.Close()
	cmd := exec.Command(os.Args[0], os.Args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.ExtraFiles = []*os.File{w} // setupReportFD in the child
	cmd.Env = append(os.Environ(), ownNetworkEnv+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET, Pdeathsig: syscall.SIGKILL}
	err = cmd.Start()
	w.Close()
	if err != nil {
		return nsRun{start: err}
	}
	// The child closes its end before its tests start (or writes and
	// exits): this read ends there.
	report, _ := io.ReadAll(r)
	return nsRun{setup: string(report), wait: cmd.Wait()}
}

// ownNetworkOutcome turns a run into OwnNetwork's result: the child's exit
// status when it ran the tests in its namespace; when no namespace could be
// made or set up, one line on stderr and false, so that the caller runs the
// tests itself on the host's loopback.
func ownNetworkOutcome(run nsRun, stderr io.Writer) (code int, done bool) {
	why := ""
	switch {
	case run.start != nil:
		why = "cannot make one: " + run.start.Error()
	case run.setup != "":
		why = "cannot set it up: " + run.setup
	}
	if why != "" {
		fmt.Fprintf(stderr, "atoptest: no network namespace of our own (%s): tests share the host's loopback, where something else may hold port 59123\n", why)
		return 0, false
	}
	var exit *exec.ExitError
	switch {
	case run.wait == nil:
		return 0, true
	case errors.As(run.wait, &exit) && exit.ExitCode() > 0:
		return exit.ExitCode(), true
	default:
		fmt.Fprintln(stderr, "atoptest: test binary in its own network namespace:", run.wait)
		return 1, true
	}
}

// setUpOwnNetwork brings the new namespace's loopback up (it starts down)
// and reserves port 59123 there, so that no socket of the package's own
// tests is given it as an ephemeral port (where /proc/sys is read-only, one
// line says the port stays in the ephemeral range).
func setUpOwnNetwork() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("lo flags: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("lo up: %w", err)
	}
	if err := os.WriteFile("/proc/sys/net/ipv4/ip_local_reserved_ports", []byte("59123\n"), 0); err != nil {
		fmt.Fprintln(os.Stderr, "atoptest: port 59123 stays in the namespace's ephemeral range:", err)
	}
	return nil
}
