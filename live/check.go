package live

import (
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/action"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// Exit codes of `gpu-telemetry status`, following the monitoring-plugin
// convention (Nagios, Icinga, Consul checks).
const (
	CheckOK       = 0 // every GPU answering, nothing critical in the last 10 minutes
	CheckWarning  = 1 // anomaly flags, disk paused or rows dropped in the last 10 minutes
	CheckCritical = 2 // a GPU hung, lost or failing, or an Xid or recovery action in the last 10 minutes
	CheckUnknown  = 3 // no daemon, or bad flags
)

// anomalyFlag reports whether the flag kind named name makes a warning: a
// detector's finding (reading.FlagDef.Anomaly). Xid, hang, failure and loss
// flags are critical through the GPU's state and last Xid instead.
func anomalyFlag(name string) bool {
	k, ok := reading.FlagKindNamed(name)
	return ok && k.Def().Anomaly
}

// Check returns the document's exit code and the reasons for it, worst
// first: critical reasons, then warnings. A missing board is critical
// while its action takes the node out, a warning while it is watched.
func Check(d Doc) (code int, reasons []string) {
	var crit, warn []string
	for _, g := range d.GPUs {
		c, w := CheckGPU(g, d.Time)
		crit, warn = append(crit, c...), append(warn, w...)
	}
	// A board of the previous run that is not enumerated now is judged by
	// its action (a board that a warm reboot did not bring back is the
	// case of a power cycle): it has no state or Xid in this run to judge.
	for _, b := range d.Host.MissingBoards {
		switch a := b.Action.Name; {
		case a.Drains():
			crit = append(crit, "missing board "+b.UUID+" "+a.String())
		case a == action.Watch:
			warn = append(warn, "missing board "+b.UUID+" "+a.String())
		}
	}
	if d.Host.Disk != "ok" {
		warn = append(warn, "disk "+d.Host.Disk)
	}
	if d.Host.RowsDropped10 > 0 {
		warn = append(warn, utoa(d.Host.RowsDropped10)+" rows dropped in the last 10 minutes")
	}
	switch {
	case len(crit) > 0:
		return CheckCritical, append(crit, warn...)
	case len(warn) > 0:
		return CheckWarning, warn
	}
	return CheckOK, nil
}

// CheckGPU returns one GPU's critical reasons and warnings as Check counts
// them, now being the document's time: critical when it is hung, lost or
// failing, or had an Xid or a recovery action in the last RecentWindow.
func CheckGPU(g GPUDoc, now time.Time) (crit, warn []string) {
	recent := func(t time.Time, age *float64) bool { return within(t, age, now, RecentWindow) }
	name := "GPU " + itoa(g.Index)
	switch g.State {
	case StateHung.String(), StateLost.String(), StateFailing.String():
		crit = append(crit, name+" "+g.State)
	case StateNotStarted.String():
		warn = append(warn, name+" not answering yet")
	}
	if g.LastXid != nil && recent(g.LastXid.Time, g.LastXid.AgeS) {
		crit = append(crit, name+" Xid "+utoa(g.LastXid.Code)+" in the last 10 minutes")
	}
	if g.LastRecovery != nil && recent(g.LastRecovery.Time, g.LastRecovery.AgeS) {
		crit = append(crit, name+" recovery action "+utoa(g.LastRecovery.Code)+" in the last 10 minutes")
	}
	for _, f := range g.Flags {
		if anomalyFlag(f.Kind) && recent(f.Last, f.AgeS) {
			warn = append(warn, name+" "+f.Kind+" in the last 10 minutes")
		}
	}
	return crit, warn
}
