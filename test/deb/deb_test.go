// Package deb tests the Debian package `make deb` builds (deploy/deb): its
// file list, its control fields, that two builds are byte-identical, that
// Debian's lintian finds nothing to warn about, and, as root, that it
// installs, runs, upgrades over itself, removes and purges with dpkg.
// make test builds the package and names it in GPU_TELEMETRY_DEB (and the
// binary it was built from in GPU_TELEMETRY_DEB_BIN).
package deb

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/testutil"
	"github.com/gpu-telemetry/gpu-telemetry/snapshot"
)

// pkg returns the package under test, skipping when make test did not
// build one (a plain `go test ./...`).
func pkg(t *testing.T) string {
	t.Helper()
	deb := os.Getenv("GPU_TELEMETRY_DEB")
	if deb == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("GPU_TELEMETRY_DEB not set under CI: make test builds the package and sets it")
		}
		t.Skip("GPU_TELEMETRY_DEB not set: make test builds the package (make deb) and sets it")
	}
	if _, err := os.Stat(deb); err != nil {
		t.Fatal(err)
	}
	testutil.NeedTool(t, "dpkg-deb", "dpkg")
	return deb
}

func output(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// contentsLine is one line of dpkg-deb --contents: mode, owner, size,
// date, time, path (and a link's target).
var contentsLine = regexp.MustCompile(`^(\S+) (\S+) +\d+ \S+ \S+ (.*)$`)

// shipped maps the package's directories whose files are the repository's
// own trees (docs pages, examples, Slurm's health check) to those trees:
// the package must hold exactly their files, however many there are, a
// page compressed (.md.gz), an executable executable, the Go tests left
// out.
var shipped = []struct {
	pkg, repo string // package dir, repository dir
	mdOnly    bool   // only the tree's pages (docs/)
}{
	{"./usr/share/doc/gpu-telemetry/docs/", "docs/", true},
	{"./usr/share/gpu-telemetry/prometheus/", "deploy/prometheus/", false},
	{"./usr/share/gpu-telemetry/alertmanager/", "deploy/alertmanager/", false},
	{"./usr/share/gpu-telemetry/grafana/", "deploy/grafana/", false},
	{"./usr/share/gpu-telemetry/systemd/", "deploy/gpu-telemetry.service.d/", false},
	{"./usr/share/gpu-telemetry/slurm/", "deploy/slurm/", false},
	{"./usr/share/doc/gpu-telemetry/examples/kubernetes/", "deploy/kubernetes/", false},
}

// TestPackageContents: the package holds exactly the expected files with
// their modes and owners (sizes change with the code and are left out):
// testdata/contents.golden, rewritten with -update when a file is added on
// purpose; the docs pages and the examples are compared with the
// repository's trees instead, so that a new page or dashboard needs no
// golden change.
func TestPackageContents(t *testing.T) {
	deb := pkg(t)
	root := testutil.Repo()
	want := map[string]bool{}
	for _, s := range shipped {
		filepath.WalkDir(filepath.Join(root, s.repo), func(p string, d os.DirEntry, err error) error {
			md := strings.HasSuffix(p, ".md")
			if err != nil || d.IsDir() || strings.HasSuffix(p, "_test.go") || s.mdOnly && !md {
				return nil
			}
			rel, _ := filepath.Rel(filepath.Join(root, s.repo), p)
			if md {
				rel += ".gz"
			}
			mode := "-rw-r--r--"
			if fi, err := d.Info(); err == nil && fi.Mode()&0o111 != 0 {
				mode = "-rwxr-xr-x"
			}
			want[mode+" root/root "+s.pkg+rel] = true
			return nil
		})
	}
	var b strings.Builder
	for _, line := range strings.Split(strings.TrimSpace(output(t, "dpkg-deb", "--contents", deb)), "\n") {
		m := contentsLine.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("unexpected dpkg-deb --contents line %q", line)
		}
		entry := m[1] + " " + m[2] + " " + m[3]
		tree := false
		for _, s := range shipped {
			if strings.HasPrefix(m[3], s.pkg) && m[3] != s.pkg {
				tree = true
			}
		}
		switch {
		case tree && strings.HasPrefix(m[1], "d"):
			// a subdirectory of a shipped tree: follows from its files
		case tree && want[entry]:
			delete(want, entry)
		case tree:
			t.Errorf("the package holds %q, which is not in the repository's tree (or has the wrong mode)", entry)
		default:
			b.WriteString(entry + "\n")
		}
	}
	for e := range want {
		t.Errorf("the package lacks %q", e)
	}
	testutil.Golden(t, "contents.golden", []byte(b.String()))
	// The drop-ins name the package's binary, as its unit does.
	conf := output(t, "sh", "-c", "dpkg-deb --fsys-tarfile \"$0\" | tar -xO ./usr/share/gpu-telemetry/systemd/fan-guard.conf", deb)
	if !strings.Contains(conf, "\nExecStopPost=-/usr/bin/gpu-telemetry fan-guard release ") {
		t.Errorf("the packaged fan-guard.conf does not run /usr/bin/gpu-telemetry fan-guard release:\n%s", conf)
	}
}

// TestPackageFields: the control fields an operator and apt read.
func TestPackageFields(t *testing.T) {
	deb := pkg(t)
	f := func(field string) string {
		return strings.TrimSpace(output(t, "dpkg-deb", "--field", deb, field))
	}
	if got := f("Package"); got != "gpu-telemetry" {
		t.Errorf("Package: %q", got)
	}
	if v := f("Version"); !regexp.MustCompile(`^[0-9][A-Za-z0-9.+~]*$`).MatchString(v) || !strings.Contains(filepath.Base(deb), "_"+v+"_") {
		t.Errorf("Version %q: not a native Debian version from git, or not the one in the file name %s", v, deb)
	}
	if got := f("Depends"); !regexp.MustCompile(`^libc6 \(>= 2\.[0-9]+\)$`).MatchString(got) {
		t.Errorf("Depends: %q, want glibc only (libnvidia-ml.so.1 is opened at run time)", got)
	}
	// The programs the snapshots run: each one's package is recommended
	// or suggested (an Essential one needs no relation, and Debian policy
	// forbids an unversioned one), and nothing else is.
	rel := map[string]bool{}
	for _, field := range []string{"Recommends", "Suggests"} {
		for _, p := range strings.Split(f(field), ",") {
			if p = strings.TrimSpace(p); p != "" {
				rel[p] = true
			}
		}
	}
	essential := map[string]bool{"util-linux": true} // Essential: yes in Debian and Ubuntu
	named := map[string]bool{}
	for _, p := range snapshot.Programs {
		named[p.Package] = true
		if p.Package != "" && !essential[p.Package] && !rel[p.Package] {
			t.Errorf("%s runs in snapshots, but its package %s is neither recommended nor suggested (Recommends %q, Suggests %q)",
				p.Name, p.Package, f("Recommends"), f("Suggests"))
		}
	}
	for p := range rel {
		if !named[p] {
			t.Errorf("the package recommends or suggests %s, which provides no program of snapshot.Programs", p)
		}
	}
	if got := f("Recommends"); !strings.Contains(got, "pciutils") {
		t.Errorf("Recommends: %q, want pciutils (lspci, setpci: the PCIe state of a GPU off the bus)", got)
	}
	if got := f("Description"); !strings.Contains(got, "libnvidia-ml.so.1") || !strings.Contains(got, "dlopen") {
		t.Errorf("the description does not say that the driver's library is opened at run time:\n%s", got)
	}
	man := output(t, "sh", "-c", "dpkg-deb --fsys-tarfile \"$1\" | tar -xO ./usr/share/man/man8/gpu-telemetry.8.gz | gzip -d", "sh", deb)
	for _, want := range []string{".TH GPU-TELEMETRY 8", `\-\-interval`, ".SS \"status", ".SH EXIT STATUS"} {
		if !strings.Contains(man, want) {
			t.Errorf("gpu-telemetry(8) lacks %q", want)
		}
	}
}

// TestPackageIsReproducible: building the package again from the same
// binary gives the same bytes, however long after the first build: every
// timestamp is the commit's (SOURCE_DATE_EPOCH), owners and modes are set,
// the file order is sorted. (The binary itself is Go's reproducible build
// of the same commit with -trimpath.)
func TestPackageIsReproducible(t *testing.T) {
	deb := pkg(t)
	bin := os.Getenv("GPU_TELEMETRY_DEB_BIN")
	if bin == "" {
		t.Fatal("GPU_TELEMETRY_DEB_BIN not set (make test sets it with GPU_TELEMETRY_DEB)")
	}
	version := strings.TrimSpace(output(t, "dpkg-deb", "--field", deb, "Version"))
	out := t.TempDir()
	cmd := exec.Command(filepath.Join(testutil.Repo(), "deploy", "deb", "build.sh"), bin, out, version)
	cmd.Env = testutil.WithoutEnv(os.Environ(), "SOURCE_DATE_EPOCH")
	again, err := cmd.Output()
	if err != nil {
		t.Fatalf("second build: %v", err)
	}
	a, err := os.ReadFile(deb)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(strings.TrimSpace(string(again)))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Errorf("two builds of one commit differ: %s (%d bytes) and %s (%d bytes)", deb, len(a), again, len(b))
	}
}

// TestLintian: Debian's lintian reports no error and no warning; what it
// would say that is not a defect is overridden with a reason in
// deploy/deb/lintian-overrides.
func TestLintian(t *testing.T) {
	deb := pkg(t)
	lintian := testutil.NeedTool(t, "lintian", "lintian")
	out, err := exec.Command(lintian, "--fail-on", "error,warning", "--display-info", deb).CombinedOutput()
	text := strings.TrimSpace(strings.ReplaceAll(string(out), "running with root privileges is not recommended!", ""))
	if err != nil || regexp.MustCompile(`(?m)^[EW]: `).MatchString(text) {
		t.Errorf("lintian: %v\n%s", err, text)
	} else if text != "" {
		t.Logf("lintian (information only):\n%s", text)
	}
}

// TestInstallRunUpgradeRemove installs the package with dpkg, runs what it
// installed (the version, an Xid lookup, the logger for a few seconds on
// the simulated driver), installs it again over itself, removes it (the
// logs stay) and purges it (the enablement goes, the logs still stay). It
// needs root, and a host without systemd running (as the CI machine): with
// systemd the maintainer scripts would start the service; without it they
// must say that they did not.
func TestInstallRunUpgradeRemove(t *testing.T) {
	deb := pkg(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root to install with dpkg (CI runs make test as root)")
	}
	if _, err := os.Stat("/run/systemd/system"); err == nil {
		t.Skip("systemd runs here: installing would start the service on this host (CI has no systemd)")
	}
	testutil.NeedTool(t, "dpkg", "dpkg")
	if out, err := exec.Command("dpkg-query", "-W", "-f", "${Status}", "gpu-telemetry").Output(); err == nil && strings.Contains(string(out), "installed") {
		t.Skipf("a gpu-telemetry package is installed on this host (%s): not replacing it", out)
	}
	const logDir = "/var/log/gpu-telemetry"
	_, err := os.Stat(logDir)
	logDirWasThere := err == nil
	marker := filepath.Join(logDir, "deb-test-evidence.csv")
	t.Cleanup(func() {
		exec.Command("dpkg", "--purge", "gpu-telemetry").Run()
		os.Remove(marker)
		if !logDirWasThere {
			os.Remove(logDir)
		}
	})
	dpkg := func(args ...string) string {
		t.Helper()
		out, err := exec.Command("dpkg", args...).CombinedOutput()
		if err != nil {
			t.Fatalf("dpkg %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	// Without systemd nothing starts the unit: postinst says so, and how
	// to start it, rather than leave the operator to believe it runs.
	const notStarted = `gpu-telemetry: systemd is not running; the unit is enabled but not started: start it with "systemctl start gpu-telemetry"`
	// deb-systemd-helper answers only maintainer scripts: read its state.
	const (
		wants  = "/etc/systemd/system/multi-user.target.wants/gpu-telemetry.service"
		state  = "/var/lib/systemd/deb-systemd-helper-enabled/gpu-telemetry.service.dsh-also"
		masked = "/var/lib/systemd/deb-systemd-helper-masked/gpu-telemetry.service"
	)
	enabled := func() bool { return exists(wants) && exists(state) }
	version := strings.TrimSpace(output(t, "dpkg-deb", "--field", deb, "Version"))

	if out := dpkg("--install", deb); !strings.Contains(out, notStarted) {
		t.Errorf("the first install without systemd does not say that the unit is not started (want %q):\n%s", notStarted, out)
	}
	if got := strings.TrimSpace(output(t, "/usr/bin/gpu-telemetry", "--version")); got != "gpu-telemetry "+version {
		t.Errorf("installed --version: %q, want the package's version %q", got, version)
	}
	if out := output(t, "/usr/bin/gpu-telemetry", "xid", "79"); !strings.Contains(out, "fallen off the bus") {
		t.Errorf("gpu-telemetry xid 79:\n%s", out)
	}
	for _, f := range []string{"/usr/lib/systemd/system/gpu-telemetry.service", "/usr/share/man/man8/gpu-telemetry.8.gz",
		"/usr/share/gpu-telemetry/prometheus/gpu-telemetry.rules.yml", "/usr/share/doc/gpu-telemetry/copyright"} {
		if !exists(f) {
			t.Errorf("%s not installed", f)
		}
	}
	if fi, err := os.Stat(logDir); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("%s: %v, mode %v; want a directory, mode 0755 as the unit's LogsDirectory= makes it", logDir, err, fi.Mode())
	}
	if unit, _ := os.ReadFile("/usr/lib/systemd/system/gpu-telemetry.service"); !strings.Contains(string(unit), "ExecStart=/usr/bin/gpu-telemetry ") {
		t.Errorf("the installed unit does not start /usr/bin/gpu-telemetry:\n%s", unit)
	}
	if !enabled() {
		t.Errorf("the unit is not enabled after the first install (deb-systemd-helper)")
	}
	runDaemon(t)

	// Evidence written by a run must outlive remove and purge.
	if err := os.WriteFile(marker, []byte("timestamp\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out := dpkg("--install", deb); !strings.Contains(out, notStarted) { // an upgrade to the same version
		t.Errorf("an upgrade without systemd does not say that the unit is not started (want %q):\n%s", notStarted, out)
	}
	if !exists("/usr/bin/gpu-telemetry") || !enabled() {
		t.Errorf("after installing over itself: binary present %v, enabled %v", exists("/usr/bin/gpu-telemetry"), enabled())
	}

	dpkg("--remove", "gpu-telemetry")
	if exists("/usr/bin/gpu-telemetry") || exists("/usr/lib/systemd/system/gpu-telemetry.service") {
		t.Errorf("dpkg --remove left the binary or the unit")
	}
	if !exists(marker) {
		t.Errorf("dpkg --remove deleted the logs")
	}
	if !exists(wants) {
		t.Errorf("dpkg --remove dropped the enablement (configuration, kept until purge)")
	}
	if st, _ := exec.Command("dpkg-query", "-W", "-f", "${Status}", "gpu-telemetry").Output(); !strings.Contains(string(st), "config-files") {
		t.Errorf("after remove: status %q, want config-files (kept for purge)", st)
	}

	dpkg("--purge", "gpu-telemetry")
	for _, f := range []string{wants, state, masked} {
		if exists(f) {
			t.Errorf("dpkg --purge left %s behind", f)
		}
	}
	if !exists(marker) {
		t.Errorf("dpkg --purge deleted the logs (purge removes configuration only)")
	}
	if err := exec.Command("dpkg-query", "-W", "gpu-telemetry").Run(); err == nil {
		t.Errorf("dpkg still knows gpu-telemetry after purge")
	}
}

// runDaemon runs the installed logger for a few seconds on the simulated
// driver and checks that it recorded rows and stopped cleanly.
func runDaemon(t *testing.T) {
	t.Helper()
	sim := testutil.SimNVMLFor(t)
	dir := t.TempDir()
	cmd := exec.Command("/usr/bin/gpu-telemetry", "--log-dir", dir, "--lock-file", filepath.Join(dir, "pid"),
		"--socket", "none", "--kmsg", "none", "--no-kmsg-markers")
	cmd.Env = append(os.Environ(), "LD_LIBRARY_PATH="+filepath.Dir(testutil.SimLib(sim, false)),
		"SIMNVML_SCENARIO="+filepath.Join(testutil.Repo(), "test", "simnvml", "scenarios", "healthy-8gpu.scn"))
	var stderr testutil.LogBuf
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	rows := func() bool {
		m, _ := filepath.Glob(filepath.Join(dir, "gpu0-*deep-*.csv"))
		if len(m) == 0 {
			return false
		}
		b, _ := os.ReadFile(m[0])
		return bytes.Count(b, []byte("\n")) >= 5
	}
	if !testutil.WaitUntil(20*time.Second, rows) {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("the installed logger wrote no rows in 20 s:\n%s", stderr.String())
	}
	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("the installed logger did not stop cleanly: %v\n%s", err, stderr.String())
		}
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("the installed logger did not stop within 20 s of SIGTERM:\n%s", stderr.String())
	}
	if !exists(filepath.Join(dir, "clean-stop")) {
		t.Errorf("no clean-stop after SIGTERM")
	}
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}
