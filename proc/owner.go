package proc

import (
	"bytes"
	"cmp"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// procOwner returns the real uid of the process whose /proc directory is
// dir: the first value of status's "Uid:" line, else the directory's owner
// (what the kernel gives the process's effective uid); absent when neither
// can be read.
func procOwner(dir string) reading.Opt[uint32] {
	if b, err := readCapped(filepath.Join(dir, "status"), 4096); err == nil {
		if uid, ok := parseStatusUID(b); ok {
			return reading.Some(uid)
		}
	}
	if fi, err := os.Stat(dir); err == nil {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			return reading.Some(st.Uid)
		}
	}
	return reading.Opt[uint32]{}
}

// parseStatusUID reads the real uid from /proc/<pid>/status
// ("Uid:\t<real>\t<effective>\t<saved>\t<fs>").
func parseStatusUID(b []byte) (uint32, bool) {
	for line := range bytes.Lines(b) {
		rest, ok := bytes.CutPrefix(line, []byte("Uid:"))
		if !ok {
			continue
		}
		f := bytes.Fields(rest)
		if len(f) == 0 {
			return 0, false
		}
		v, err := strconv.ParseUint(string(f[0]), 10, 32)
		if err != nil {
			return 0, false
		}
		return uint32(v), true
	}
	return 0, false
}

// userNames resolves uids to user names for the process readers, shared by
// all GPUs. os/user.LookupId may call getpwuid_r, which asks NSS (LDAP,
// sssd) and can block for as long as the directory does: a lookup runs on
// a goroutine of its own and only one is out at a time (a hung directory
// costs one goroutine, not one per process). The callers for the uid being
// looked up (the readers of every GPU a job runs on, at once) wait for its
// answer until wait after it started, then take the uid as text; a caller
// for another uid takes its text at once. Answers are kept for userTTL in
// at most maxUsers entries.
type userNames struct {
	lookup func(uid string) (string, error)
	wait   time.Duration
	now    func() time.Time

	mu    sync.Mutex
	names map[uint32]userName
	out   *userLookup // the lookup that has not returned yet; nil: none
}

type userName struct {
	name string // "" when the uid has no name: the uid as text is shown
	at   time.Time
}

// userLookup is a lookup under way: name is set before done is closed.
type userLookup struct {
	uid      uint32
	deadline time.Time // when its callers stop waiting for it
	done     chan struct{}
	name     string
}

// Bounds of the user name cache: a host's GPU jobs run under a few users;
// a name looked up again after userTTL follows a renamed account.
const (
	maxUsers   = 256
	userTTL    = 10 * time.Minute
	userWait   = 200 * time.Millisecond
	userNoName = time.Minute // a lookup that failed is tried again after this
)

// processUsers is the daemon's one cache (the process readers of every GPU).
var processUsers = newUserNames(func(uid string) (string, error) {
	u, err := user.LookupId(uid)
	if err != nil {
		return "", err
	}
	return u.Username, nil
}, userWait, time.Now)

func newUserNames(lookup func(string) (string, error), wait time.Duration, now func() time.Time) *userNames {
	return &userNames{lookup: lookup, wait: wait, now: now, names: map[uint32]userName{}}
}

// Name returns uid's user name, or the uid as text when it has none, the
// lookup failed, did not answer within the wait, or another uid's lookup
// is out. The text of an unanswered lookup is not an answer: the caller
// asks again next time rather than keep it.
func (u *userNames) Name(uid uint32) string {
	num := strconv.FormatUint(uint64(uid), 10)
	now := u.now()
	u.mu.Lock()
	e, ok := u.names[uid]
	ttl := userTTL
	if e.name == "" {
		ttl = userNoName
	}
	if ok && now.Sub(e.at) < ttl && now.Sub(e.at) >= 0 {
		u.mu.Unlock()
		return cmp.Or(e.name, num)
	}
	l := u.out
	if l != nil && l.uid != uid {
		u.mu.Unlock()
		return cmp.Or(e.name, num)
	}
	if l == nil {
		l = &userLookup{uid: uid, deadline: time.Now().Add(u.wait), done: make(chan struct{})}
		u.out = l
		go u.run(l, num)
	}
	u.mu.Unlock()

	t := time.NewTimer(time.Until(l.deadline))
	defer t.Stop()
	select {
	case <-l.done:
		return cmp.Or(l.name, num)
	case <-t.C:
		return cmp.Or(e.name, num)
	}
}

// run looks l's uid up, keeps the answer (a failed lookup as no name) and
// hands it to the callers waiting.
func (u *userNames) run(l *userLookup, num string) {
	name, err := u.lookup(num)
	if err != nil {
		name = ""
	}
	l.name = reading.Text(name)
	u.mu.Lock()
	u.out = nil
	if len(u.names) >= maxUsers {
		clear(u.names)
	}
	u.names[l.uid] = userName{name: l.name, at: u.now()}
	u.mu.Unlock()
	close(l.done)
}
