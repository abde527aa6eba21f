package snapshot

import (
	"context"
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/sink"
)

// DefaultFollowUps are the offsets, from the incident, of the follow-up
// captures: after an Xid 79 the kernel keeps logging for minutes (recovery,
// GSP timeouts), so one capture at the moment misses how the GPU ends up.
var DefaultFollowUps = []time.Duration{10 * time.Second, 60 * time.Second, 300 * time.Second}

// Why follow-ups are cancelled: a newer incident's own follow-ups capture
// the same things from a later start; Close.
var (
	errSuperseded = errors.New("superseded by a newer incident on this GPU")
	errClosing    = errors.New("snapshot manager closing")
)

// FirstFollowUp is the offset of an incident's first follow-up capture; 0:
// none are taken.
func (m *Manager) FirstFollowUp() time.Duration {
	if len(m.cfg.FollowUps) == 0 {
		return 0
	}
	return m.cfg.FollowUps[0] // sorted, all positive (New)
}

// offsetLabel is "+10s" for whole seconds (as in the file names), else the
// duration as Go prints it ("+1.5s").
func offsetLabel(d time.Duration) string {
	if d%time.Second == 0 {
		return "+" + strconv.FormatInt(int64(d/time.Second), 10) + "s"
	}
	return "+" + d.String()
}

// followUpName is the incident's base name with the offset: the follow-ups
// of crash-<stamp>-gpu3.log are crash-<stamp>-gpu3+10s.log and so on.
func followUpName(incident string, offset time.Duration) string {
	return strings.TrimSuffix(filepath.Base(incident), ".log") + offsetLabel(offset)
}

// ParseFollowUpName reads back a follow-up's file name (followUpName, then
// ".log"): the name of its incident's crash snapshot and the offset label
// ("+10s", "+1m30.5s"). ok is false for any other name.
func ParseFollowUpName(name string) (incident, offset string, ok bool) {
	base, isLog := strings.CutSuffix(name, ".log")
	i := strings.LastIndexByte(base, '+')
	if _, err := time.ParseDuration(base[i+1:]); !isLog || i < 0 || err != nil {
		return "", "", false
	}
	return base[:i] + ".log", base[i:], true
}

// renderFollowUp renders one follow-up capture. Its header is short: the
// counters of the incident's header would be stale by now.
func renderFollowUp(h *Header, incident string, offset time.Duration, now time.Time, headline string, sections []Section) []byte {
	var b strings.Builder
	top := *h
	top.Title, top.Time, top.Headline = "GPU CRASH FOLLOW-UP "+offsetLabel(offset), now, headline
	incidentLine := "Incident: " + filepath.Base(incident)
	if !h.Time.IsZero() {
		incidentLine += " at " + h.Time.Format(sink.TimestampLayout)
	}
	writeTop(&b, &top, incidentLine+"\n")
	return writeEnd(&b, sections, "End of snapshot")
}

// followUps captures the follow-ups of one incident, each at its offset from
// start on the monotonic clock (so tests run it under testing/synctest),
// each listing the incident's events so far, while the incident has a
// snapshot on disk (one whose time comes before any is written is
// cancelled). Cancelling ctx cancels those not yet started.
func (m *Manager) followUps(ctx context.Context, gpu int, incident string, h *Header, start time.Time, inc *incident) {
	for i, off := range m.cfg.FollowUps {
		select {
		case <-time.After(off - time.Since(start)): // a past offset fires at once
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			m.followUpsCanceled(gpu, incident, len(m.cfg.FollowUps)-i, context.Cause(ctx).Error())
			return
		}
		m.mu.Lock()
		onDisk := inc.onDisk
		m.mu.Unlock()
		if !onDisk { // its evidence would hang on no snapshot
			m.followUpsCanceled(gpu, incident, 1, "no snapshot of the incident written by then")
			continue
		}
		t0 := time.Now()
		diags := m.diagnose(h.BusID, true)
		m.mu.Lock()
		headline, events := gpuHeadline(gpu, inc.headline()), inc.eventsSection(-1)
		m.mu.Unlock()
		data := renderFollowUp(h, incident, off, m.cfg.Now(), headline, append([]Section{events}, diags...))
		m.save("follow-up", gpu, 0, m.crashDir, followUpName(incident, off), data, t0, followUpsWritten)
	}
}

// followUpsCanceled counts and logs n follow-ups of the incident that will
// not be taken, and why.
func (m *Manager) followUpsCanceled(gpu int, incident string, n int, why string) {
	if n == 0 {
		return
	}
	m.counts.Add(followUpsCanceled, uint64(n))
	m.log.Info("crash follow-ups canceled", "gpu", gpu, "incident", incident, "canceled", n, "why", why)
}
