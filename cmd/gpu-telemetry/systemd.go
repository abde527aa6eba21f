package main

import (
	"log/slog"
	"sync"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
)

// systemd implements monitor.Notifier with sd_notify (go-systemd's daemon
// package: a well-kept implementation of the protocol, abstract sockets
// included). Outside systemd every call is a cheap no-op.
type systemd struct {
	log      *slog.Logger
	enabled  bool
	watchdog time.Duration // ping interval: half of WatchdogSec; 0: no watchdog
	mu       sync.Mutex
	last     time.Time
}

func newSystemd(log *slog.Logger) *systemd {
	s := &systemd{log: log}
	// A probe with an empty state tells whether NOTIFY_SOCKET is set.
	sent, err := daemon.SdNotify(false, "")
	s.enabled = sent || err != nil
	if d, err := daemon.SdWatchdogEnabled(false); err == nil && d > 0 {
		s.watchdog = d / 2 // systemd's advice: ping at half the timeout
	}
	return s
}

func (s *systemd) notify(state string) {
	if !s.enabled {
		return
	}
	if _, err := daemon.SdNotify(false, state); err != nil {
		s.log.Warn("sd_notify failed", "state", state, "error", err)
	}
}

// Ready implements monitor.Notifier.
func (s *systemd) Ready() { s.notify(daemon.SdNotifyReady) }

// Stopping implements monitor.Notifier.
func (s *systemd) Stopping() { s.notify(daemon.SdNotifyStopping) }

// Watchdog implements monitor.Notifier. The poll loop calls it every tick;
// it pings once half of WatchdogSec has passed since the last ping, so pings
// come every half timeout (plus at most a tick), as systemd advises.
func (s *systemd) Watchdog() {
	if !s.enabled || s.watchdog == 0 {
		return
	}
	s.mu.Lock()
	now := time.Now()
	due := now.Sub(s.last) >= s.watchdog
	if due {
		s.last = now
	}
	s.mu.Unlock()
	if due {
		s.notify(daemon.SdNotifyWatchdog)
	}
}
