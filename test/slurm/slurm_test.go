// Package slurm tests deploy/slurm against the real thing: Debian's munge,
// slurmctld and slurmd as a one-node cluster on loopback, whose
// HealthCheckProgram is deploy/slurm/gpu-telemetry-healthcheck, with the
// gpu-telemetry daemon on simulated GPUs beside it. The node is named by
// the test (slurmd -N) and the controller is "localhost", so nothing
// depends on the host's name; Slurm's ports are ones the kernel gave as
// free, chosen again if a daemon cannot bind them. Every process is killed
// when its test ends.
package slurm

import (
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/testutil"
)

var (
	repo   string
	binary string // gpu-telemetry, once built(t) ran
	simDir string
	build  testutil.Built
)

func TestMain(m *testing.M) {
	repo = testutil.Repo()
	code := m.Run()
	build.Close()
	os.Exit(code)
}

// built sets binary ($GPU_TELEMETRY_BIN, as make test sets it, or one
// built now) and the simulated driver's directory, once per run.
func built(t *testing.T) {
	t.Helper()
	binary, simDir = build.Get(t)
}

// child is a process the test started; it is killed when the test ends.
type child struct {
	name string
	cmd  *exec.Cmd
	out  *testutil.LogBuf
	done chan struct{}
}

func startChild(t *testing.T, cred *syscall.Credential, env []string, name string, args ...string) *child {
	t.Helper()
	c := &child{name: filepath.Base(name), cmd: exec.Command(name, args...), out: &testutil.LogBuf{}, done: make(chan struct{})}
	c.cmd.Env = env
	c.cmd.Stdout, c.cmd.Stderr = c.out, c.out
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGKILL}
	if err := c.cmd.Start(); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	go func() { c.cmd.Wait(); close(c.done) }()
	t.Cleanup(func() {
		c.stop()
		if t.Failed() {
			t.Logf("output of %s (last 3000 bytes):\n%s", c.name, tail(c.out.String(), 3000))
		}
	})
	return c
}

// stop kills the child and waits for it.
func (c *child) stop() {
	c.cmd.Process.Kill()
	<-c.done
}

func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// nodeName is the cluster's one node (slurmd -N): not the host's name.
const nodeName = "gtnode"

// healthCheckInterval is slurm.conf's HealthCheckInterval in the test, in
// seconds (60 or more in production; 5 is what slurmctld takes here).
const healthCheckInterval = 5

// cluster is a running one-node Slurm cluster.
type cluster struct {
	dir  string // slurm.conf, state, logs
	conf string
	runs string // one line per run of the HealthCheckProgram
	env  []string
}

// freePort is a loopback TCP port the kernel gave as free. Slurm takes
// its ports from slurm.conf, so it is chosen before the daemons start;
// startCluster chooses again if one was taken in between.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startCluster starts munged (as the munge user, as Debian runs it),
// slurmctld and slurmd in the foreground, with the HealthCheckProgram a
// shim that gives the wrapper its settings (slurmd runs it with almost no
// environment) and counts its runs, and waits until the node is idle.
func startCluster(t *testing.T, socket string) *cluster {
	t.Helper()
	slurmctld := testutil.NeedTool(t, "slurmctld", "slurmctld")
	slurmd := testutil.NeedTool(t, "slurmd", "slurmd")
	munged := testutil.NeedTool(t, "munged", "munge")
	testutil.NeedTool(t, "scontrol", "slurm-client")
	testutil.NeedTool(t, "sinfo", "slurm-client")
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("the Slurm test runs slurmd and munged as root (make test under CI runs as root)")
		}
		t.Skip("the Slurm test runs slurmd and munged as root")
	}
	mu, err := user.Lookup("munge")
	if err != nil {
		t.Fatalf("the munge user (Debian's munge package makes it): %v", err)
	}
	uid, _ := strconv.Atoi(mu.Uid)
	gid, _ := strconv.Atoi(mu.Gid)
	built(t)

	// A short directory others can traverse: munged, as the munge user,
	// reaches its socket below it, and a unix socket path is at most 107
	// bytes.
	dir, err := os.MkdirTemp("", "gts")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	must(t, os.Chmod(dir, 0o755))
	c := &cluster{dir: dir, conf: filepath.Join(dir, "slurm.conf"), runs: filepath.Join(dir, "healthcheck.runs")}
	mdir, keyDir := filepath.Join(dir, "munge"), filepath.Join(dir, "munge-key")
	for _, d := range []struct {
		path string
		mode os.FileMode
	}{{mdir, 0o755}, {keyDir, 0o700}, {filepath.Join(dir, "state"), 0o700}, {filepath.Join(dir, "spool"), 0o700}} {
		must(t, os.Mkdir(d.path, d.mode))
	}
	key := make([]byte, 1024)
	rand.Read(key)
	keyFile := filepath.Join(keyDir, "munge.key")
	must(t, os.WriteFile(keyFile, key, 0o400))
	for _, p := range []string{mdir, keyDir, keyFile} {
		must(t, os.Chown(p, uid, gid))
	}
	msock := filepath.Join(mdir, "munge.sock")
	startChild(t, &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil, munged, "--foreground",
		"--key-file", keyFile, "--socket", msock, "--pid-file", filepath.Join(mdir, "munged.pid"),
		"--log-file", filepath.Join(mdir, "munged.log"), "--seed-file", filepath.Join(mdir, "munged.seed"))
	if !testutil.WaitUntil(10*time.Second, func() bool { _, err := os.Stat(msock); return err == nil }) {
		t.Fatalf("munged made no socket %s", msock)
	}

	shim := filepath.Join(dir, "healthcheck")
	must(t, os.WriteFile(shim, []byte(fmt.Sprintf(`#!/bin/sh
export SLURM_CONF=%s GPU_TELEMETRY=%s GPU_TELEMETRY_SOCKET=%s GPU_TELEMETRY_HEALTHCHECK_CONF=/nonexistent
PATH=%s
%s >>%s 2>&1
echo "$(date +%%s) exit $?" >>%s
`, c.conf, binary, socket, filepath.Dir(exe(t, "scontrol"))+":/usr/bin:/bin", filepath.Join(repo, "deploy", "slurm", "gpu-telemetry-healthcheck"),
		filepath.Join(dir, "healthcheck.log"), c.runs)), 0o755))
	c.env = append(os.Environ(), "SLURM_CONF="+c.conf)

	for try := 1; ; try++ {
		must(t, os.WriteFile(c.conf, []byte(fmt.Sprintf(`ClusterName=gputelemetry
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=%d
SlurmdPort=%d
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=%s
StateSaveLocation=%s/state
SlurmdSpoolDir=%s/spool
SlurmctldPidFile=%s/slurmctld.pid
SlurmdPidFile=%s/slurmd.pid
SlurmctldLogFile=%s/slurmctld.log
SlurmdLogFile=%s/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
MpiDefault=none
MailProg=/bin/true
ReturnToService=2
HealthCheckProgram=%s
HealthCheckInterval=%d
HealthCheckNodeState=ANY
NodeName=%s NodeAddr=127.0.0.1 NodeHostname=localhost CPUs=1 State=UNKNOWN
PartitionName=gpu Nodes=%s Default=YES State=UP
`, freePort(t), freePort(t), msock, dir, dir, dir, dir, dir, dir, shim, healthCheckInterval, nodeName, nodeName)), 0o644))
		ctld := startChild(t, nil, c.env, slurmctld, "-D", "-f", c.conf)
		d := startChild(t, nil, c.env, slurmd, "-D", "-f", c.conf, "-N", nodeName)
		up := testutil.WaitUntil(30*time.Second, func() bool {
			if ctld.exited() || d.exited() {
				return true
			}
			state, _ := c.node(t)
			if state == "" {
				time.Sleep(200 * time.Millisecond)
			}
			return strings.HasPrefix(state, "idle")
		})
		if state, _ := c.node(t); up && !ctld.exited() && !d.exited() && strings.HasPrefix(state, "idle") {
			return c
		}
		ctld.stop()
		d.stop()
		if try == 3 {
			logs, _ := os.ReadFile(filepath.Join(dir, "slurmctld.log"))
			dlogs, _ := os.ReadFile(filepath.Join(dir, "slurmd.log"))
			t.Fatalf("the one-node cluster did not come up in 3 tries; slurmctld.log:\n%s\nslurmd.log:\n%s", tail(string(logs), 2000), tail(string(dlogs), 2000))
		}
		t.Logf("the cluster did not come up (try %d; a port taken in between?): trying other ports", try)
	}
}

func exe(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// node returns the node's state ("idle", "drained", "idle*": sinfo's
// %T) and its drain reason ("none" when it has none).
func (c *cluster) node(t *testing.T) (state, reason string) {
	t.Helper()
	cmd := exec.Command("sinfo", "--noheader", "--node="+nodeName, "--format=%T|%E")
	cmd.Env = c.env
	out, err := cmd.Output()
	if err != nil {
		return "", ""
	}
	state, reason, _ = strings.Cut(strings.TrimSpace(string(out)), "|")
	return state, reason
}

// scontrol runs scontrol with args against the cluster.
func (c *cluster) scontrol(t *testing.T, args ...string) {
	t.Helper()
	cmd := exec.Command("scontrol", args...)
	cmd.Env = c.env
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("scontrol %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// healthChecks is how many times the HealthCheckProgram has run.
func (c *cluster) healthChecks() int {
	b, _ := os.ReadFile(c.runs)
	return strings.Count(string(b), "\n")
}

// waitHealthChecks waits for n more runs of the HealthCheckProgram.
func (c *cluster) waitHealthChecks(t *testing.T, n int) {
	t.Helper()
	want := c.healthChecks() + n
	if !testutil.WaitUntil(time.Duration(n+2)*healthCheckInterval*time.Second, func() bool {
		time.Sleep(100 * time.Millisecond)
		return c.healthChecks() >= want
	}) {
		t.Fatalf("the HealthCheckProgram ran %d times, want %d", c.healthChecks(), want)
	}
}

// daemon is gpu-telemetry on simulated GPUs playing scenario, serving its
// control socket at socket, logging into a directory of its own.
func startDaemon(t *testing.T, socket, scenario string) *child {
	t.Helper()
	built(t)
	work := t.TempDir()
	scn := filepath.Join(work, "scenario.scn")
	must(t, os.WriteFile(scn, []byte(scenario), 0o644))
	env := append(os.Environ(), "LD_LIBRARY_PATH="+filepath.Dir(testutil.SimLib(simDir, false)), "SIMNVML_SCENARIO="+scn, "TZ=UTC")
	d := startChild(t, nil, env, binary, "--log-dir", filepath.Join(work, "logs"), "--lock-file", filepath.Join(work, "lock"),
		"--socket", socket, "--kmsg", "none", "--follow-ups", "2s", "--host", nodeName)
	if !testutil.WaitUntil(20*time.Second, func() bool {
		time.Sleep(50 * time.Millisecond)
		return check(t, socket) != 3 || d.exited()
	}) || d.exited() {
		t.Fatalf("gpu-telemetry does not answer on %s", socket)
	}
	return d
}

// check runs `gpu-telemetry check --format nhc`, the wrapper's question,
// and returns its exit status.
func check(t *testing.T, socket string) int {
	t.Helper()
	err := exec.Command(binary, "check", "--format", "nhc", "--socket", socket).Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.ExitCode()
	}
	t.Fatal(err)
	return -1
}

// actionOf is the action a reason line ends with (": reboot").
func actionOf(t *testing.T, line string) string {
	t.Helper()
	i := strings.LastIndex(line, ": ")
	if i < 0 {
		t.Fatalf("reason %q names no action", line)
	}
	return line[i+2:]
}

// checkLine is `gpu-telemetry check --format nhc`'s line.
func checkLine(t *testing.T, socket string) string {
	t.Helper()
	out, _ := exec.Command(binary, "check", "--format", "nhc", "--socket", socket).Output()
	return strings.TrimSpace(string(out))
}

// faultScenario: two GPUs; GPU 1 falls off the bus (Xid 79) at 3 s, and
// GPU 0 at 45 s, once the first is acknowledged and a person has
// drained the node.
const faultScenario = "gpus 2\nat 3 gpu 1 xid 79 to events\nat 45 gpu 0 xid 79 to events\n"

// TestSlurmDrainsAndResumesOnlyItsOwn: the daemon plays Xid 79 on GPU 1;
// within one HealthCheckInterval of check saying so, the node is drained
// with check's reason behind "gpu-telemetry: ". Once the repair is
// acknowledged (gpu-telemetry ack) and no GPU needs an action, the wrapper
// resumes the node it drained; a node a person drained then stays
// drained, with the person's reason, however healthy the GPUs are, and
// keeps that reason when a GPU fails again.
func TestSlurmDrainsAndResumesOnlyItsOwn(t *testing.T) {
	sockDir, err := os.MkdirTemp("", "gtsock")
	must(t, err)
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	socket := filepath.Join(sockDir, "control.sock")
	c := startCluster(t, socket)
	startDaemon(t, socket, faultScenario)

	var flagged time.Time
	if !testutil.WaitUntil(20*time.Second, func() bool {
		time.Sleep(50 * time.Millisecond)
		return check(t, socket) == 1
	}) {
		t.Fatalf("check never said GPU 1 needs an action after its Xid 79 (check: %q)", checkLine(t, socket))
	}
	flagged = time.Now()
	line := checkLine(t, socket)
	var state, reason string
	// One interval, and a second for the wrapper's own run (three
	// programs) on a loaded machine.
	limit := (healthCheckInterval + 1) * time.Second
	testutil.WaitUntil(limit+5*time.Second, func() bool {
		time.Sleep(100 * time.Millisecond)
		state, reason = c.node(t)
		return strings.HasPrefix(reason, "gpu-telemetry:")
	})
	took := time.Since(flagged)
	if !strings.HasPrefix(state, "drain") || reason != "gpu-telemetry: "+line {
		t.Fatalf("node %s, reason %q; want drained with %q", state, reason, "gpu-telemetry: "+line)
	}
	t.Logf("drained %v after check said so: %s", took.Round(time.Millisecond), reason)
	if took > limit {
		t.Errorf("drained %v after check said so; want within one HealthCheckInterval (%ds)", took.Round(time.Millisecond), healthCheckInterval)
	}
	for _, want := range []string{"gpu-telemetry: " + nodeName + " GPU 1 GPU-", "Xid 79"} {
		if !strings.Contains(reason, want) {
			t.Errorf("drain reason %q lacks %q", reason, want)
		}
	}
	testNHC(t, socket, line)

	// The repair done, root acknowledges the GPU's action: no GPU needs
	// one any more, and the wrapper resumes the node it drained.
	ack := exec.Command(binary, "ack", "1", "--action", actionOf(t, line), "--note", "reseated, burn-in passed", "--socket", socket)
	if out, err := ack.CombinedOutput(); err != nil {
		t.Fatalf("gpu-telemetry ack: %v\n%s", err, out)
	}
	if code := check(t, socket); code != 0 {
		t.Fatalf("check after the ack: exit %d (%q), want 0", code, checkLine(t, socket))
	}
	if !testutil.WaitUntil(3*healthCheckInterval*time.Second, func() bool {
		time.Sleep(100 * time.Millisecond)
		state, reason = c.node(t)
		return strings.HasPrefix(state, "idle") && reason == "none"
	}) {
		t.Fatalf("after the ack the node is %s, reason %q; want idle, its drain undone", state, reason)
	}

	// A person drains it: healthy as the GPUs are, it stays drained.
	const person = "fan replaced, burn-in pending (jdoe)"
	c.scontrol(t, "update", "nodename="+nodeName, "state=drain", "reason="+person)
	c.waitHealthChecks(t, 2)
	if state, reason = c.node(t); !strings.HasPrefix(state, "drain") || reason != person {
		t.Errorf("a person's drain: node %s, reason %q after two health checks; want drained, %q", state, reason, person)
	}

	// GPU 0 falls off the bus while the node is drained for the person's
	// reason: the wrapper leaves that reason as it is.
	if !testutil.WaitUntil(60*time.Second, func() bool {
		time.Sleep(100 * time.Millisecond)
		return check(t, socket) == 1
	}) {
		t.Fatalf("check never said GPU 0 needs an action after its Xid 79 (check: %q)", checkLine(t, socket))
	}
	c.waitHealthChecks(t, 2)
	if state, reason = c.node(t); !strings.HasPrefix(state, "drain") || reason != person {
		t.Errorf("a new fault on a node a person drained: node %s, reason %q; want the person's %q kept", state, reason, person)
	}
	if b, _ := os.ReadFile(c.runs); !strings.Contains(string(b), "exit 0") || strings.Contains(string(b), "exit 1") {
		t.Errorf("the HealthCheckProgram's runs:\n%s\nwant each to exit 0", b)
	}
}

// testNHC runs deploy/slurm/gpu-telemetry.nhc's check as NHC would (its
// die and log), where NHC is not packaged: it fails with check's line.
func testNHC(t *testing.T, socket, line string) {
	t.Helper()
	script := fmt.Sprintf(`die() { echo "die $1 $2"; }
log() { echo "log $*"; }
. %s
GPU_TELEMETRY=%s GPU_TELEMETRY_SOCKET=%s check_gpu_telemetry; echo "rc $?"
GPU_TELEMETRY=%s GPU_TELEMETRY_SOCKET=/nonexistent/control.sock check_gpu_telemetry; echo "rc $?"
GPU_TELEMETRY=%s GPU_TELEMETRY_SOCKET=/nonexistent/control.sock check_gpu_telemetry -u; echo "rc $?"
`, filepath.Join(repo, "deploy", "slurm", "gpu-telemetry.nhc"), binary, socket, binary, binary)
	out, err := exec.Command("bash", "-c", script).CombinedOutput()
	if err != nil {
		t.Fatalf("bash: %v\n%s", err, out)
	}
	got := string(out)
	for _, want := range []string{
		"die 1 gpu-telemetry: " + line + "\nrc 1\n",
		"log check_gpu_telemetry: gpu-telemetry check (exit 3): gpu-telemetry cannot ask the daemon at /nonexistent/control.sock",
		"\nrc 0\ndie 1 gpu-telemetry: gpu-telemetry cannot ask the daemon at /nonexistent/control.sock",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the NHC check's run lacks %q:\n%s", want, got)
		}
	}
}
