package board

import (
	"strconv"
	"strings"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/action"
	"github.com/gpu-telemetry/gpu-telemetry/anomaly"
	"github.com/gpu-telemetry/gpu-telemetry/sink"
)

// Missing is a board of the previous run that is not enumerated now
// (host.missing_boards): its repair action, judged from its state file as
// the board's that is missing, and that file. Under its owner's lock, but
// for Save.
type Missing struct {
	*Board
	Index  int            // its index in the run that last saw it; -1: no run this one can read saw it
	Action action.Current // its action as last judged (the host view's)
}

// NewMissing judges b as a board of the previous run (index in it) that
// is not enumerated at now: after a boot that ended in Xid 79 or a
// recovery action it is a power cycle (a warm reboot did not bring it
// back).
func NewMissing(b *Board, index int, now time.Time) *Missing {
	return &Missing{Board: b, Index: index, Action: b.Judge(anomaly.RepairInput{Now: now, Missing: true})}
}

// Line is the ACTION line of the board's action at t, from none (at
// start), by its UUID and its index in the run that last saw it (prev_gpu
// empty when unknown).
func (m *Missing) Line(t time.Time) sink.EventLine {
	return sink.EventLine{Time: t, UUID: m.uuid, GPU: -1, Type: sink.TypeAction,
		Fields: sink.KV("prev_gpu", m.prevGPU(), "action", m.Action.Action.String(), "from", action.None.String(), "reason", m.Action.Reason())}
}

// Ack acknowledges the board's action at now as Board.Ack does a GPU's,
// and judges it again: it returns the ACK line and, when the action
// changed, the ACTION line after it (by its UUID and prev_gpu=). Under the
// owner's lock.
func (m *Missing) Ack(want action.Action, now time.Time, by, note string) (action.AckRecord, []sink.EventLine, error) {
	in := anomaly.RepairInput{Now: now, Missing: true}
	rec, err := m.Board.Ack("the missing board "+m.uuid, m.Judge(in), want, now, by, note)
	if err != nil {
		return rec, nil, err
	}
	after := m.Judge(in)
	prev := m.prevGPU()
	lines := []sink.EventLine{{Time: now, UUID: m.uuid, GPU: -1, Type: sink.TypeAck,
		Fields: sink.KV("prev_gpu", prev, "action", rec.Action.String(), "by", by, "note", note, "classes", strings.Join(rec.Classes, ","))}}
	if !after.Equal(m.Action) {
		lines = append(lines, sink.EventLine{Time: now, UUID: m.uuid, GPU: -1, Type: sink.TypeAction,
			Fields: sink.KV("prev_gpu", prev, "action", after.Action.String(), "from", m.Action.Action.String(), "reason", after.Reason())})
	}
	m.Action = after
	return rec, lines, nil
}

// prevGPU is the board's index in the run that last saw it, empty when
// unknown (absent, not -1).
func (m *Missing) prevGPU() string {
	if m.Index < 0 {
		return ""
	}
	return strconv.Itoa(m.Index)
}
