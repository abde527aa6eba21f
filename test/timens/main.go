// Command timens runs a command in a Linux time namespace whose
// CLOCK_MONOTONIC and CLOCK_BOOTTIME read a few minutes, as on a machine
// booted minutes ago, whatever the host's uptime: `make test` runs the tests
// of the packages that read the kernel's clocks once more under it, so that
// a test that needs the host to have been up for an hour fails on every
// host, not only on a fresh one.
//
//	timens [-uptime 3m] -- command [args...]
//
// It exits with the command's status. Where no time namespace can be made
// (no CAP_SYS_ADMIN, a kernel without time namespaces, util-linux's unshare
// older than 2.36 or missing) it prints one line saying why and exits 0
// without running the command: the tests ran on the host's clocks already.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// insideEnv marks timens re-run inside the namespace to check its clocks
// before it runs the command.
const insideEnv = "GPU_TELEMETRY_TIMENS_INSIDE"

// clockSlack is how far past the wanted uptime the clocks may read inside:
// the time from reading the host's clocks to the check.
const clockSlack = time.Minute

func main() {
	os.Exit(run(os.Args[1:], os.Stderr))
}

func run(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("timens", flag.ContinueOnError)
	fs.SetOutput(stderr)
	uptime := fs.Duration("uptime", 3*time.Minute, "what CLOCK_MONOTONIC and CLOCK_BOOTTIME read when the command starts")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	cmd := fs.Args()
	if len(cmd) == 0 || *uptime < time.Second {
		fmt.Fprintln(stderr, "usage: timens [-uptime 3m] -- command [args...] (uptime at least 1s)")
		return 2
	}
	if want := os.Getenv(insideEnv); want != "" {
		return inside(want, cmd, stderr)
	}
	mono, boot, err := clocks()
	if err != nil {
		fmt.Fprintf(stderr, "timens: not run in a time namespace (cannot read the clocks: %v)\n", err)
		return 0
	}
	monoOff, bootOff := offset(mono, *uptime), offset(boot, *uptime)
	unshare := []string{"unshare", "--time", "--monotonic=" + strconv.FormatInt(monoOff, 10), "--boottime=" + strconv.FormatInt(bootOff, 10), "--"}
	if out, err := exec.Command(unshare[0], append(unshare[1:], "true")...).CombinedOutput(); err != nil {
		fmt.Fprintf(stderr, "timens: not run in a time namespace (%s): the kernel-clock tests ran only on this host's uptime (%s)\n",
			why(err, out), boot.Truncate(time.Second))
		return 0
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "timens: %v\n", err)
		return 1
	}
	fmt.Fprintf(stderr, "timens: in a time namespace: CLOCK_MONOTONIC and CLOCK_BOOTTIME read %s there (host up %s)\n",
		*uptime, boot.Truncate(time.Second))
	c := exec.Command(unshare[0], append(append(unshare[1:], self, "--"), cmd...)...)
	c.Stdin, c.Stdout, c.Stderr = os.Stdin, os.Stdout, os.Stderr
	c.Env = append(os.Environ(), insideEnv+"="+uptime.String())
	start := time.Now()
	err = c.Run()
	fmt.Fprintf(stderr, "timens: the run in the time namespace took %s\n", time.Since(start).Round(time.Second))
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit) && exit.ExitCode() > 0:
		return exit.ExitCode()
	default:
		fmt.Fprintf(stderr, "timens: %v\n", err)
		return 1
	}
}

// inside checks that the clocks read about want (the namespace took), then
// runs the command in place of timens.
func inside(want string, cmd []string, stderr io.Writer) int {
	w, err := time.ParseDuration(want)
	if err != nil {
		fmt.Fprintf(stderr, "timens: %s=%q: %v\n", insideEnv, want, err)
		return 1
	}
	mono, boot, err := clocks()
	if err != nil {
		fmt.Fprintf(stderr, "timens: %v\n", err)
		return 1
	}
	for _, c := range []struct {
		name string
		v    time.Duration
	}{{"CLOCK_MONOTONIC", mono}, {"CLOCK_BOOTTIME", boot}} {
		if c.v < w || c.v > w+clockSlack {
			fmt.Fprintf(stderr, "timens: %s reads %s in the namespace, want %s\n", c.name, c.v, w)
			return 1
		}
	}
	os.Unsetenv(insideEnv)
	path, err := exec.LookPath(cmd[0])
	if err != nil {
		fmt.Fprintf(stderr, "timens: %v\n", err)
		return 1
	}
	err = syscall.Exec(path, cmd, os.Environ())
	fmt.Fprintf(stderr, "timens: %s: %v\n", path, err)
	return 1
}

// clocks reads CLOCK_MONOTONIC and CLOCK_BOOTTIME.
func clocks() (mono, boot time.Duration, err error) {
	var m, b unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &m); err != nil {
		return 0, 0, fmt.Errorf("CLOCK_MONOTONIC: %w", err)
	}
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &b); err != nil {
		return 0, 0, fmt.Errorf("CLOCK_BOOTTIME: %w", err)
	}
	return time.Duration(m.Nano()), time.Duration(b.Nano()), nil
}

// offset is the offset in whole seconds (unshare's unit) that makes a clock
// reading now read want: rounded up, so that it never reads less than want
// (and never below zero, which the kernel refuses).
func offset(now, want time.Duration) int64 {
	d := want - now
	s := int64(d / time.Second)
	if d%time.Second > 0 {
		s++
	}
	return s
}

// why is the reason unshare failed, in a few words: its first line of
// output (util-linux says what failed: "unshare failed: Operation not
// permitted", "unrecognized option '--time'"), or the error.
func why(err error, out []byte) string {
	if errors.Is(err, exec.ErrNotFound) {
		return "no unshare(1): util-linux 2.36 or later makes time namespaces"
	}
	line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	if line == "" {
		return "unshare --time: " + err.Error()
	}
	hint := ""
	switch {
	case strings.Contains(line, "unrecognized option") || strings.Contains(line, "invalid option"):
		hint = "; util-linux 2.36 or later has --time"
	case strings.Contains(line, "Operation not permitted"):
		hint = "; a time namespace needs CAP_SYS_ADMIN"
	case strings.Contains(line, "Invalid argument"):
		hint = "; the kernel has no time namespaces (5.6 and later, CONFIG_TIME_NS)"
	}
	return line + hint
}
