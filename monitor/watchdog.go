package monitor

import "time"

// The service manager's watchdog (systemd's WatchdogSec) is pinged every
// Config.WatchdogEvery whatever the poll interval (at --interval 30 s a ping
// per tick would come too late), but only while the poll loop is alive
// (loopAlive): a loop stuck in a tick, or a ticker that stopped waking it,
// stops the pings, and the service manager restarts the logger.

// keepAlive pings the watchdog on every tick of tk while the loop is alive,
// until tk stops; the first ping held back in a stall is logged.
func (m *Monitor) keepAlive(tk ticker) {
	told := false
	for {
		if _, ok := tk.Next(); !ok {
			return
		}
		now := m.cfg.mono()
		switch {
		case m.loopAlive(now):
			m.cfg.Notifier.Watchdog()
			told = false
		case !told:
			told = true
			m.log.Error("poll loop stuck; the watchdog is no longer pinged (the service manager restarts the logger)",
				"tick_began_ago", now-time.Duration(m.loop.began.Load()))
		}
	}
}

// loopAlive reports whether the poll loop is in a tick that began less than
// WatchdogEvery before now, or waits for a tick due less than WatchdogEvery
// ago.
func (m *Monitor) loopAlive(now time.Duration) bool {
	in := m.loop.inTick.Load() // before began: began is stored first
	began := time.Duration(m.loop.began.Load())
	if in {
		return now-began < m.cfg.WatchdogEvery
	}
	// Waiting: the next tick is due at most an interval after the last began.
	return now-began < m.cfg.Interval+m.cfg.WatchdogEvery
}
