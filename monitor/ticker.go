package monitor

import (
	"context"
	"encoding/binary"
	"os"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ticker delivers ticks at start + k x interval. A tick that comes late never
// shifts later ones, and ticks missed entirely are reported, not delivered in
// a burst. Both implementations follow lateTick: a tick noticed more than a
// quarter interval after its time is skipped (counted as missed) and the
// next grid point is waited for, so every tick runs on the grid.
type ticker interface {
	// Next blocks until the next tick and returns how many ticks were missed
	// before it; ok is false once Stop was called.
	Next() (missed uint64, ok bool)
	// Stop ends the ticker and unblocks Next. Safe to call more than once.
	Stop()
}

// newTimerfdTicker returns a ticker on a kernel timerfd read through Go's
// poller: the process wakes exactly once per tick. Go's own timers wake the
// poller with millisecond timeouts, which costs an extra early wake-up every
// tick; at 10 Hz for months that is measurable (see docs/performance.md).
// It falls back to a Go timer where timerfd is unavailable.
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
	t := &timerfdTicker{f: f, rc: rc, iv: iv, start: start}
	t.readFn = t.readReady
	return t
}

// lateTick reports whether a tick noticed late after its grid time must be
// skipped: a quarter interval is far beyond normal wake-up latency, and a
// tick run that late would sit off the grid, closer to the next one than to
// the previous.
func lateTick(late, iv time.Duration) bool { return late > iv/4 }

type timerfdTicker struct {
	f     *os.File
	rc    syscall.RawConn
	buf   [8]byte
	iv    time.Duration
	start time.Time // the timer's zero: tick k is due at start + k x iv
	k     int64
	// The read in progress: when the next expiry is due, whether the
	// read succeeded, and readReady bound once, so that a tick allocates
	// no closure (two allocations a tick, 1 % of the logger's CPU in perf).
	due    time.Time
	ok     bool
	readFn func(fd uintptr) bool
}

func (t *timerfdTicker) Next() (uint64, bool) {
	var missed uint64
	for {
		if !t.read() {
			return 0, false
		}
		// The kernel counts expirations since the last read: more than
		// one means ticks were missed.
		exp := binary.LittleEndian.Uint64(t.buf[:])
		t.k += int64(exp)
		missed += exp - 1
		late := time.Since(t.start.Add(time.Duration(t.k) * t.iv))
		if !lateTick(late, t.iv) {
			return missed, true
		}
		missed++ // this one too: wait for the next grid point
	}
}

// read waits until the timer has expired and reads the count of expirations
// into buf. Before the next expiry is due it does not try the read (it would
// fail with EAGAIN: one more system call every tick): the poller is armed
// before the callback runs, so an expiry from then on wakes it, and the timer
// started after t.start, so it never expires before its grid time. The read
// is a raw system call (a ready timerfd never blocks), which does not wake
// the runtime's sysmon thread.
func (t *timerfdTicker) read() bool {
	t.due = t.start.Add(time.Duration(t.k+1) * t.iv)
	t.ok = false
	err := t.rc.Read(t.readFn)
	return err == nil && t.ok
}

// readReady is read's callback on the poller: false (wait for the poller)
// until the expiry is due and the timerfd has it.
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
	iv    time.Duration
	start time.Time
	k     int64
	timer *time.Timer
	stop  chan struct{}
	once  chan struct{}
}

func newGoTicker(iv time.Duration) ticker {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &goTicker{iv: iv, start: time.Now(), timer: t, stop: make(chan struct{}), once: make(chan struct{}, 1)}
}

func (t *goTicker) Next() (uint64, bool) {
	t.k++
	var missed uint64
	for {
		if due := int64(time.Since(t.start) / t.iv); due >= t.k {
			// Ticks whose time already passed: skipped, unless the last
			// one is only a little late.
			if late := time.Since(t.start.Add(time.Duration(due) * t.iv)); !lateTick(late, t.iv) {
				missed += uint64(due - t.k)
				t.k = due
				return missed, true
			}
			missed += uint64(due - t.k + 1)
			t.k = due + 1
		}
		t.timer.Reset(time.Until(t.start.Add(time.Duration(t.k) * t.iv)))
		select {
		case <-t.timer.C:
		case <-t.stop:
			return 0, false
		}
		if late := time.Since(t.start.Add(time.Duration(t.k) * t.iv)); !lateTick(late, t.iv) {
			return missed, true
		}
		missed++
		t.k++
	}
}

func (t *goTicker) Stop() {
	select {
	case t.once <- struct{}{}:
		close(t.stop)
	default:
	}
}

// every calls fn every d, and whenever wake delivers (nil: never), until ctx
// is done; fn runs on the caller's goroutine, one call at a time. For the
// slow periodic work beside the poll loop, which needs no grid.
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
