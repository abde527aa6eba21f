package proc

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/testutil"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

func TestParseStatusUID(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     uint32
		ok       bool
	}{
		{"real uid first", "Name:\tpython3\nUmask:\t0022\nUid:\t1001\t0\t0\t0\nGid:\t100\t100\t100\t100\n", 1001, true},
		{"root", "Uid:\t0\t0\t0\t0\n", 0, true},
		{"no Uid line", "Name:\tx\nGid:\t1\t1\t1\t1\n", 0, false},
		{"empty Uid line", "Uid:\n", 0, false},
		{"not a number", "Uid:\tabc\t0\t0\t0\n", 0, false},
		{"out of range", "Uid:\t4294967296\t0\t0\t0\n", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := parseStatusUID([]byte(tc.in))
			if got != tc.want || ok != tc.ok {
				t.Errorf("parseStatusUID(%q) = %d, %v; want %d, %v", tc.in, got, ok, tc.want, tc.ok)
			}
		})
	}
}

// A lookup that answers is cached; a uid without a name, or whose lookup
// fails, gives the uid as text.
func TestUserNamesCache(t *testing.T) {
	var calls atomic.Int32
	now := time.Unix(1000, 0)
	u := newUserNames(func(uid string) (string, error) {
		calls.Add(1)
		if uid == "1001" {
			return "alice", nil
		}
		return "", errors.New("unknown user")
	}, time.Second, func() time.Time { return now })
	for range 3 {
		if got := u.Name(1001); got != "alice" {
			t.Fatalf("Name(1001) = %q, want alice", got)
		}
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("%d lookups for three names of one uid, want 1 (cached)", n)
	}
	if got := u.Name(4242); got != "4242" {
		t.Errorf("Name(4242) with no such user = %q, want the uid", got)
	}
	now = now.Add(userTTL + time.Second)
	u.Name(1001)
	if n := calls.Load(); n != 3 {
		t.Errorf("%d lookups after the cache's time, want 3 (looked up again)", n)
	}
}

// A lookup that blocks (a hung LDAP or sssd) is waited for at most the
// wait: the uid as text is given, and no second lookup starts while it is
// out, for its uid or another, from however many readers (a hung directory
// costs one goroutine). When it answers at last, its name is kept.
func TestUserNamesBoundedLookup(t *testing.T) {
	release := make(chan struct{})
	var calls atomic.Int32
	u := newUserNames(func(uid string) (string, error) {
		calls.Add(1)
		<-release
		return "bob", nil
	}, 20*time.Millisecond, time.Now)
	start := time.Now()
	if got := u.Name(1002); got != "1002" {
		t.Errorf("Name with the lookup hung = %q, want the uid", got)
	}
	if got := u.Name(1003); got != "1003" {
		t.Errorf("Name of another uid while one lookup is out = %q, want the uid", got)
	}
	var wg sync.WaitGroup
	for i := range uint32(8) {
		wg.Go(func() {
			for _, id := range []uint32{1002, 2000 + i} {
				if got := u.Name(id); got != strconv.FormatUint(uint64(id), 10) {
					t.Errorf("Name(%d) with the lookup hung = %q, want the uid", id, got)
				}
			}
		})
	}
	wg.Wait()
	if el := time.Since(start); el > 2*time.Second {
		t.Errorf("two names took %s with the lookup hung", el)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("%d lookups started while one was hung, want 1", n)
	}
	close(release)
	deadline := time.Now().Add(5 * time.Second)
	for u.Name(1002) != "bob" {
		if time.Now().After(deadline) {
			t.Fatal("the late answer was never kept")
		}
		time.Sleep(time.Millisecond)
	}
}

// The readers of every GPU a job runs on ask for its uid at once: one
// lookup answers them all, none is given the uid as text for the lookup
// being out.
func TestUserNamesSameUIDWaits(t *testing.T) {
	var calls atomic.Int32
	u := newUserNames(func(uid string) (string, error) {
		calls.Add(1)
		time.Sleep(10 * time.Millisecond)
		return "carol", nil
	}, time.Minute, time.Now)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if got := u.Name(1000); got != "carol" {
				t.Errorf("Name(1000) while its lookup is out = %q, want carol", got)
			}
		})
	}
	wg.Wait()
	if n := calls.Load(); n != 1 {
		t.Errorf("%d lookups for one uid asked at once, want 1", n)
	}
}

// A process's owner given as text because the lookup did not answer in
// time is not kept with the process: the next read names it once the
// lookup has answered.
func TestDescribeNamesTheOwnerLater(t *testing.T) {
	root := testutil.FakeProc(t, true, map[int][2]string{100: {"python3", "python3\x00"}})
	if err := os.WriteFile(filepath.Join(root, "100", "status"), []byte("Name:\tpython3\nUid:\t1001\t1001\t1001\t1001\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	d := NewDescriber(root)
	release := make(chan struct{})
	d.users = newUserNames(func(uid string) (string, error) {
		<-release
		return "alice", nil
	}, time.Millisecond, time.Now)
	if got := describeAt(d, time.Now(), 100); got[0].User != "1001" {
		t.Fatalf("read with the lookup out: %+v, want the uid as text", got)
	}
	close(release)
	deadline := time.Now().Add(5 * time.Second)
	for d.users.Name(1001) != "alice" {
		if time.Now().After(deadline) {
			t.Fatal("the lookup never answered")
		}
		time.Sleep(time.Millisecond)
	}
	if got := describeAt(d, time.Now(), 100); got[0].User != "alice" {
		t.Errorf("read after the lookup answered: %+v, want alice", got)
	}
}

// The process reader records each process's owner: the real uid of its
// status file, named through the cache; a process whose status cannot be
// read has its directory's owner.
func TestDescribeRecordsTheOwner(t *testing.T) {
	root := testutil.FakeProc(t, true, map[int][2]string{100: {"python3", "python3\x00"}, 200: {"bash", "bash\x00"}})
	if err := os.WriteFile(filepath.Join(root, "100", "status"), []byte("Name:\tpython3\nUid:\t1001\t1001\t1001\t1001\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	d := NewDescriber(root)
	d.users = newUserNames(func(uid string) (string, error) {
		if uid == "1001" {
			return "alice", nil
		}
		return "", errors.New("unknown")
	}, time.Second, time.Now)
	got := describeAt(d, time.Now(), 100, 200)
	if a := got[0]; a.UID != reading.Some(uint32(1001)) || a.User != "alice" {
		t.Errorf("pid 100 owner: %v %q, want 1001 alice", a.UID, a.User)
	}
	me := uint32(os.Getuid())
	if b := got[1]; b.UID != reading.Some(me) || b.User == "" {
		t.Errorf("pid 200 (no status file) owner: %v %q, want the directory's owner %d", b.UID, b.User, me)
	}
}
