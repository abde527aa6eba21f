package snapshot

import (
	"cmp"
	"strconv"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/action"
	"github.com/gpu-telemetry/gpu-telemetry/xid"
)

// Stage is how far a GPU's failure has gone. The crash cooldown holds back
// a flood of events of one stage, never the next, worse stage.
type Stage int

// Stages, least severe first.
const (
	StageNotice      Stage = iota // the consequence of other events (Xid 45, 154): part of the story, never a new stage
	StageApplication              // the workload faulted (Xid 13, 31, 43: class application): the GPU is usually fine, so a hardware fault after it is a worse stage
	StageFault                    // an Xid, an NVML hang or failure, an uncorrectable AER error: how incidents start
	StageFirmware                 // the GSP firmware timed out or failed (Xid 119, 120, the driver's GSP lines)
	StageLost                     // fell off the bus, or NVML reports the GPU lost
)

// Event is one critical event of a GPU, as its incident keeps it.
type Event struct {
	Time   time.Time // when it happened; zero: when Decide was called
	What   string    // a few words for the headline: "GSP RPC Timeout (Xid 119)"; empty: Reason
	Reason string    // the whole reason line
	Stage  Stage
	Asks   action.Action // what it asks of the operator (package action's one table)

	file string // in an incident's list: the snapshot the event took ("" none)
}

// XidEvent is the event of an Xid report: its stage from the code and the
// catalog's class, what it asks for as the repair action does
// (action.XidAction: its recovery action, Xid 154, or NVIDIA's bucket).
func XidEvent(t time.Time, e xid.Explanation, reason string) Event {
	ev := Event{Time: t, What: e.Name + " (Xid " + strconv.Itoa(e.Code) + ")", Reason: reason, Stage: StageFault}
	switch {
	case e.Code == 79:
		ev.Stage = StageLost
	case e.Code == 119 || e.Code == 120:
		ev.Stage = StageFirmware
	case e.Known && e.Class == xid.ClassInformational:
		ev.Stage = StageNotice
	case e.Known && e.Class == xid.ClassApplication:
		ev.Stage = StageApplication
	}
	ev.Asks = action.XidAction(e)
	return ev
}

// RecoveryEvent is the event of a recovery action report: a notice that
// asks for what the action says.
func RecoveryEvent(t time.Time, v uint64, reason string) Event {
	return Event{Time: t, What: "recovery action " + strconv.FormatUint(v, 10) + " (" + xid.RecoveryActionName(v) + ")",
		Reason: reason, Stage: StageNotice, Asks: action.RecoveryAction(v)}
}

// what is the event's few words.
func (e Event) what() string { return cmp.Or(e.What, e.Reason) }
