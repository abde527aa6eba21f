package monitor

import (
	"context"
	"encoding/binary"
	"os"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ticker delivers ticks at start + k x interval. A late tick never shifts
// later ones, and ticks missed entirely are reported, not delivered in a
// burst; a tick noticed late (lateTick) is skipped too, so every tick runs
// on the grid.
type ticker interface {
	// Next blocks until the next tick and returns how many ticks were missed
	// before it; ok is false once Stop was called.
	Next() (missed uint64, ok bool)
	Stop() // ends the ticker and unblocks Next; safe to call more than once
}

// newTimerfdTicker returns a ticker on a kernel timerfd read through Go's
// poller: the process wakes once per tick, where Go's timers add an early
// wake-up every tick (measurable at 10 Hz for months: docs/performance.md).
// It falls back to Go's timers where timerfd is unavailable.
func newTimerfdTicker(iv time.Duration) ticker {
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return newGoTicker(iv)
	}
	spec := unix.ItimerSpec{Interval: unix.NsecToTimespec(int64(iv)), Value: unix.NsecToTimespec(int64(iv))}
	start := time.Now()
	if err := unix.TimerfdSettime(fd, 0, &spec, nil); err != nil {
		unix.Close(fd)
		return newGoTicker(iv)
	}
	f := os.NewFile(uintptr(fd), "timerfd")
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return newGoTicker(iv)
	}
	t := &timerfdTicker{f: f, rc: rc, grid: grid{iv: iv, start: start}}
	t.readFn = t.readReady
	return t
}

// lateTick reports whether a tick noticed late after its grid time is
// skipped: a quarter interval is far beyond normal wake-up latency, and a
// tick that late would sit off the grid.
func lateTick(late, iv time.Duration) bool { return late > iv/4 }

// grid is both tickers' position: tick k is due at start + k x iv.
type grid struct {
	iv    time.Duration
	start time.Time
	k     int64
}

func (g *grid) at(k int64) time.Time { return g.start.Add(time.Duration(k) * g.iv) }

// next returns at the next tick on the grid and how many were missed: wait
// returns how many grid points passed (ok false: stopped); all but the last
// are missed, and the last too when it is late (then next waits again).
func (g *grid) next(wait func() (uint64, bool)) (missed uint64, ok bool) {
	for {
		exp, ok := wait()
		if !ok {
			return 0, false
		}
		g.k += int64(exp)
		if !lateTick(time.Since(g.at(g.k)), g.iv) {
			return missed + exp - 1, true
		}
		missed += exp
	}
}

type timerfdTicker struct {
	grid
	f   *os.File
	rc  syscall.RawConn
	buf [8]byte
	// The read in progress, and readReady bound once: a closure per tick
	// cost 1 % of the logger's CPU.
	due    time.Time
	ok     bool
	readFn func(fd uintptr) bool
}

func (t *timerfdTicker) Next() (uint64, bool) { return t.next(t.wait) }

// wait waits until the timer has expired and returns the count of
// expirations (more than one: ticks were missed). It does not try the read
// before the expiry is due (an EAGAIN is one more system call a tick): the
// poller is armed before the callback runs, and the timer started after
// t.start, so never expires before its grid time. The read is a raw system
// call (a ready timerfd never blocks), which does not wake sysmon.
func (t *timerfdTicker) wait() (uint64, bool) {
	t.due = t.at(t.k + 1)
	t.ok = false
	if err := t.rc.Read(t.readFn); err != nil || !t.ok {
		return 0, false
	}
	return binary.LittleEndian.Uint64(t.buf[:]), true
}

// readReady is wait's callback on the poller: false (wait) until the expiry
// is due and read.
func (t *timerfdTicker) readReady(fd uintptr) bool {
	if time.Now().Before(t.due) {
		return false
	}
	n, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&t.buf[0])), uintptr(len(t.buf)))
	if e == syscall.EAGAIN || e == syscall.EINTR {
		return false
	}
	t.ok = e == 0 && n == uintptr(len(t.buf))
	return true
}

func (t *timerfdTicker) Stop() { t.f.Close() }

// goTicker is a ticker on Go's timers (tests run it on fake time).
type goTicker struct {
	grid
	timer *time.Timer
	stop  chan struct{}
	once  sync.Once
}

func newGoTicker(iv time.Duration) ticker {
	t := &goTicker{grid: grid{iv: iv, start: time.Now()}, timer: time.NewTimer(time.Hour), stop: make(chan struct{})}
	t.timer.Stop()
	return t
}

func (t *goTicker) Stop() { t.once.Do(func() { close(t.stop) }) }

func (t *goTicker) Next() (uint64, bool) { return t.next(t.wait) }

func (t *goTicker) wait() (uint64, bool) {
	if d := time.Until(t.at(t.k + 1)); d > 0 {
		t.timer.Reset(d)
		select {
		case <-t.timer.C:
		case <-t.stop:
			return 0, false
		}
	}
	return uint64(time.Since(t.start)/t.iv) - uint64(t.k), true
}

// every calls fn every d, and whenever wake delivers (nil: never), until ctx
// is done, on the caller's goroutine: slow periodic work that needs no grid.
func every(ctx context.Context, d time.Duration, wake <-chan struct{}, fn func()) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-wake:
		}
		fn()
	}
}
