package main

import (
	"log/slog"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
	"github.com/coreos/go-systemd/v22/journal"

	"github.com/gpu-telemetry/gpu-telemetry/monitor"
)

// systemd implements monitor.Notifier with sd_notify (go-systemd's daemon
// package: a well-kept implementation of the protocol, abstract sockets
// included). Outside systemd every call is a cheap no-op.
type systemd struct {
	log      *slog.Logger
	enabled  bool
	watchdog time.Duration // ping interval: half of WatchdogSec; 0: no watchdog
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

// Watchdog implements monitor.Notifier: one ping. The monitor calls it every
// half WatchdogSec (Config.WatchdogEvery, from watchdog) while its poll loop
// is alive, whatever the interval, as systemd advises.
func (s *systemd) Watchdog() {
	if s.watchdog > 0 {
		s.notify(daemon.SdNotifyWatchdog)
	}
}

// journalSender returns the events.log lines' way into the systemd journal
// (go-systemd's journal package: the native protocol over journald's
// socket) when the logger runs under systemd with its stderr connected to
// the journal (JOURNAL_STREAM), else nil.
func journalSender() monitor.JournalFunc {
	if ok, err := journal.StderrIsJournalStream(); err != nil || !ok || !journal.Enabled() {
		return nil
	}
	return func(msg string, prio int, fields map[string]string) error {
		return journal.Send(msg, journal.Priority(prio), fields)
	}
}
