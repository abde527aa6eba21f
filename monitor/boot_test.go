package monitor

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/runstate"
)

// TestUncleanStopThenCleanRestart: a run that was not stopped cleanly (its
// run-state is there, the clean-stop marker is not) gets a boot log and an
// UNCLEAN_STOP line at the next start; a clean stop leaves the marker, and
// the restart after it writes nothing.
func TestUncleanStopThenCleanRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hostRoot := t.TempDir()
		os.MkdirAll(filepath.Join(hostRoot, "proc/sys/kernel/random"), 0o755)
		os.WriteFile(filepath.Join(hostRoot, "proc/sys/kernel/random/boot_id"), []byte("boot-now\n"), 0o644)
		r := newRig(t, 1, func(c *Config) { c.HostRoot = hostRoot })
		os.WriteFile(filepath.Join(r.dir, runstate.File), []byte("boot_id=boot-before\nstarted=2026-11-29T10:00:00Z\npid=77\n"), 0o644)
		r.run(2*time.Second, nil)
		boots, _ := filepath.Glob(filepath.Join(r.dir, "crashes", "boot-*.log"))
		if len(boots) != 1 {
			t.Fatalf("boot logs: %v, want 1", boots)
		}
		b, _ := os.ReadFile(boots[0])
		if !strings.Contains(string(b), "Previous run: started 2026-11-29T10:00:00Z, pid 77, boot boot-before") ||
			!strings.Contains(string(b), "Cause: a different boot") {
			t.Errorf("boot log:\n%s", b)
		}
		ev, _ := os.ReadFile(filepath.Join(r.dir, "events.log"))
		if !strings.Contains(string(ev), "type=UNCLEAN_STOP prev_boot=boot-before boot=boot-now same_boot=false") {
			t.Errorf("no UNCLEAN_STOP line:\n%s", ev)
		}
		// The boot log is the line's evidence, as snapshot= names it on
		// every incident line.
		if !strings.Contains(string(ev), " snapshot="+boots[0]) {
			t.Errorf("the UNCLEAN_STOP line does not name the boot log %s as snapshot=:\n%s", boots[0], ev)
		}
		if _, err := os.Stat(filepath.Join(r.dir, runstate.CleanStopFile)); err != nil {
			t.Errorf("no clean-stop marker after a clean shutdown: %v", err)
		}
		st, _ := os.ReadFile(filepath.Join(r.dir, runstate.File))
		if !strings.Contains(string(st), "boot_id=boot-now") {
			t.Errorf("run-state not this run's:\n%s", st)
		}

		// A restart after the clean stop writes nothing.
		r2 := newRig(t, 1, func(c *Config) { c.HostRoot = hostRoot; c.LogDir = r.dir })
		r2.run(time.Second, nil)
		boots, _ = filepath.Glob(filepath.Join(r.dir, "crashes", "boot-*.log"))
		ev, _ = os.ReadFile(filepath.Join(r.dir, "events.log"))
		if len(boots) != 1 || strings.Count(string(ev), "UNCLEAN_STOP") != 1 {
			t.Errorf("clean restart wrote a boot log or event: %v\n%s", boots, ev)
		}
	})
}

// TestStalledCleanStopMarkerDoesNotHoldUpTheExit: the clean-stop marker's
// write (a temp file, its fsync, the directory's) on a disk that stopped
// answering is waited for cleanStopBound at most: the final status line,
// nvmlShutdown and "stopped" follow, before systemd's TimeoutStopSec kills
// the daemon. Before, Run waited for the write without a bound.
func TestStalledCleanStopMarkerDoesNotHoldUpTheExit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		r := newRig(t, 1, func(c *Config) {
			c.markCleanStop = func(dir string, at time.Time) error {
				<-release
				return runstate.MarkCleanStop(dir, at)
			}
		})
		stopped := make(chan time.Duration, 1)
		go func() { stopped <- r.run(time.Second, nil) }()
		var stopping time.Duration
		select {
		case stopping = <-stopped:
		case <-time.After(time.Minute):
			close(release)
			t.Fatal("Run still waits on a stalled clean-stop marker after a minute")
		}
		close(release)
		synctest.Wait() // the marker's write ends before the temp dir goes
		logs := r.logs.String()
		if !strings.Contains(logs, "clean-stop marker still being written at exit") || !strings.Contains(logs, `msg=stopped`) {
			t.Errorf("the stalled marker is not logged, or Run did not stop:\n%s", logs)
		}
		if stopping > 10*time.Second {
			t.Errorf("Run took %v to stop with the marker stalled", stopping)
		}
	})
}

// TestSlowCleanStopMarkerIsWaitedFor: a marker whose fsyncs take 2 s (the
// writeback of a host shutting down) is still waited for: it is on disk
// when Run returns, and the next start reports no unclean stop. With a
// bound of 1 s the exit abandoned it, and the next boot wrote a boot log
// and UNCLEAN_STOP for a clean stop.
func TestSlowCleanStopMarkerIsWaitedFor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 1, func(c *Config) {
			c.markCleanStop = func(dir string, at time.Time) error {
				time.Sleep(2 * time.Second)
				return runstate.MarkCleanStop(dir, at)
			}
		})
		r.run(time.Second, nil)
		if _, err := os.Stat(filepath.Join(r.dir, runstate.CleanStopFile)); err != nil {
			t.Errorf("no clean-stop marker when Run returned: %v", err)
		}
		if logs := r.logs.String(); strings.Contains(logs, "clean-stop marker") {
			t.Errorf("the slow marker was abandoned or failed:\n%s", logs)
		}
	})
}
