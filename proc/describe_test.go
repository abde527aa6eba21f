package proc

import (
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/testutil"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// describeAt describes the processes pids as a process read started at the
// wall time at that listed them would.
func describeAt(d *Describer, at time.Time, pids ...uint32) []reading.Process {
	list := make([]reading.Process, len(pids))
	for i, pid := range pids {
		list[i].PID = pid
	}
	d.Describe(list, at)
	return list
}

func TestCmdline(t *testing.T) {
	cases := []struct {
		name, in, want string
		cut            bool
	}{
		{"args", "a\x00b c\x00", "a b c", false},
		{"empty (kernel thread)", "", "", false},
		{"control chars", "x\ny\tz\x00", "x y z", false},
		{"long", strings.Repeat("é", 200), strings.Repeat("é", 128), true},
	}
	for _, tc := range cases {
		got, cut := cmdline([]byte(tc.in))
		if got != tc.want || cut != tc.cut {
			t.Errorf("%s: %q %v, want %q %v", tc.name, got, cut, tc.want, tc.cut)
		}
	}
}

// TestDescribeOncePerListing: a process's name is read from /proc when it
// appears in the list, kept from memory while it stays listed (not
// reopened every second), read again once it is a minute old, and read
// afresh when its PID leaves the list and comes back (a reused PID).
func TestDescribeOncePerListing(t *testing.T) {
	root := testutil.FakeProc(t, true, map[int][2]string{100: {"first", "first\x00"}})
	rename := func(name string) {
		if err := os.WriteFile(filepath.Join(root, "100", "comm"), []byte(name+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	d := NewDescriber(root)
	if got := describeAt(d, time.Now(), 100)[0].Name; got != "first" {
		t.Fatalf("first read: %q", got)
	}
	rename("second")
	if got := describeAt(d, time.Now(), 100)[0].Name; got != "first" {
		t.Errorf("still listed: %q, want the name kept from the first read", got)
	}
	if describeAt(d, time.Now()); len(d.descs) != 0 {
		t.Fatalf("emptied list: %d PIDs kept", len(d.descs))
	}
	if got := describeAt(d, time.Now(), 100)[0].Name; got != "second" {
		t.Errorf("PID listed again: %q, want it read afresh", got)
	}
	rename("third")
	// Age the kept name past describeRefresh.
	e := d.descs[100]
	e.at = e.at.Add(-describeRefresh)
	d.descs[100] = e
	if got := describeAt(d, time.Now(), 100)[0].Name; got != "third" {
		t.Errorf("a minute later: %q, want it read again", got)
	}
}

// become makes PID 100 of the fake /proc at root the process name, started
// at start (clock ticks after boot).
func become(t *testing.T, root, name string, start int) {
	t.Helper()
	dir := filepath.Join(root, "100")
	// comm with a space and a parenthesis, as the kernel writes it
	stat := "100 (" + name + " (x)) S 1 100 100 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 " + strconv.Itoa(start) + " 1000 100 18446744073709551615\n"
	for file, s := range map[string]string{"comm": name + "\n", "cmdline": name + "\x00", "stat": stat} {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// trainRead describes PID 100 ("train", started at 5000) once at tick,
// then renames the process in /proc (comm "renamed"): a later read that
// shows "renamed" read /proc again.
func trainRead(t *testing.T) (root string, d *Describer, tick time.Time) {
	t.Helper()
	root = testutil.FakeProc(t, true, map[int][2]string{100: {"train", "python3\x00train.py\x00"}})
	become(t, root, "train", 5000)
	d = NewDescriber(root)
	tick = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	if got := describeAt(d, tick, 100)[0]; got.Name != "train" {
		t.Fatalf("first read: %q", got.Name)
	}
	if err := os.WriteFile(filepath.Join(root, "100", "comm"), []byte("renamed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return root, d, tick
}

// TestDescribeReusedPID: a PID that exited and was reused between two
// reads reuseGap or more apart (reads can be a minute apart while the pacer
// stretches them) is described afresh, told apart by its start time in
// /proc/<pid>/stat; the same process (same start time) keeps its kept name.
func TestDescribeReusedPID(t *testing.T) {
	root, d, tick := trainRead(t)
	tick = tick.Add(reuseGap)
	if got := describeAt(d, tick, 100)[0]; got.Name != "train" {
		t.Errorf("same process (start time unchanged): %q, want the name kept", got.Name)
	}
	become(t, root, "intruder", 7000) // exited and PID 100 reused before the next read
	tick = tick.Add(reuseGap)
	if got := describeAt(d, tick, 100)[0]; got.Name != "intruder" || got.Cmdline != "intruder" {
		t.Errorf("reused PID: %q %q, want the new process", got.Name, got.Cmdline)
	}
}

// TestDescribeConsecutiveReadsSkipStat: a PID listed by two reads less
// than reuseGap apart keeps its description without /proc/<pid>/stat being
// read again (one open per listed process per second). The fake stat is
// removed after the first read: reading it again would find no start time,
// take the PID for another process and describe it afresh ("renamed").
// A PID that leaves the list for one read is looked up afresh when it
// returns.
func TestDescribeConsecutiveReadsSkipStat(t *testing.T) {
	root, d, tick := trainRead(t)
	if err := os.Remove(filepath.Join(root, "100", "stat")); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		tick = tick.Add(time.Second)
		if got := describeAt(d, tick, 100)[0]; got.Name != "train" {
			t.Fatalf("read %d, 1 s after the last: %q: /proc/100/stat was read again", i+2, got.Name)
		}
	}
	become(t, root, "intruder", 7000)
	tick = tick.Add(time.Second)
	if describeAt(d, tick); len(d.descs) != 0 { // a read without PID 100
		t.Fatalf("%d PIDs kept, want none", len(d.descs))
	}
	tick = tick.Add(time.Second)
	if got := describeAt(d, tick, 100)[0]; got.Name != "intruder" {
		t.Errorf("PID 100 back after a read without it: %q, want it described afresh", got.Name)
	}
}

// TestOriginOf: a process that is gone (its /proc entry missing, or ESRCH
// while it was read) is told from one that could not be read.
func TestOriginOf(t *testing.T) {
	for _, c := range []struct {
		err  error
		want reading.ProcOrigin
	}{
		{&fs.PathError{Op: "read", Path: "/proc/7/cmdline", Err: syscall.ESRCH}, reading.ProcGone},
		{&fs.PathError{Op: "open", Path: "/proc/7/cmdline", Err: fs.ErrNotExist}, reading.ProcGone},
		{&fs.PathError{Op: "open", Path: "/proc/7/cmdline", Err: syscall.EACCES}, reading.ProcUnreadable},
	} {
		if got := originOf(c.err); got != c.want {
			t.Errorf("originOf(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
