package monitor

import (
	"errors"
	"log/slog"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/action/board"
)

// saveBoard writes board b's state file if a version of its history is
// not on disk (board.Board.Save); a failure is counted and logged (who
// names the board), and the next save writes it again.
func (m *Monitor) saveBoard(b *board.Board, who slog.Attr) {
	if err := b.Save(); err != nil {
		lose(m.reg, m.log, boardStateFails, "a board's state file", who, slog.String("error", err.Error()))
	}
}

// saveBoardsAtExit writes every board's newest copy not on disk yet (a
// Save that met another write in progress leaves it to the next
// judgement, and none comes after the loop stops), waiting at most d for a
// write stuck on a stalled disk. A board still not written then, or whose
// write failed, is counted and logged. save is (*board.Board).Save (a
// test's is slow).
func (m *Monitor) saveBoardsAtExit(d time.Duration, save func(*board.Board) error) {
	listed, done := make(chan []*board.Board, 1), make(chan []error, 1)
	go func() {
		var bs []*board.Board
		for _, gs := range m.gpus {
			// A worker abandoned at stop may hold its lock, reading the
			// board's file on a stalled disk: in here, under d.
			gs.repair.mu.Lock()
			if b := gs.repair.b; b != nil && b.Pending() {
				bs = append(bs, b)
			}
			gs.repair.mu.Unlock()
		}
		m.states.mu.Lock()
		for _, mb := range m.states.missing {
			if mb.Pending() {
				bs = append(bs, mb.Board)
			}
		}
		m.states.mu.Unlock()
		listed <- bs
		errs := make([]error, len(bs))
		for busy := true; busy; {
			busy = false
			for i, b := range bs {
				if errs[i] == nil && b.Pending() {
					errs[i] = save(b)
					busy = busy || errs[i] == nil && b.Pending() // another write, maybe stuck, has the file
				}
			}
			if busy {
				time.Sleep(10 * time.Millisecond)
			}
		}
		done <- errs
	}()
	timeout := time.After(d)
	var bs []*board.Board
	select {
	case bs = <-listed:
	case <-timeout:
		select {
		case bs = <-listed: // listed as the bound ran out: its boards are said one by one
		default:
			lose(m.reg, m.log, boardStateFails, "the boards' state files not checked by exit (a stuck worker holds one)")
			return
		}
	}
	var errs []error
	select {
	case errs = <-done:
	case <-timeout:
	}
	for i, b := range bs {
		if !b.Pending() {
			continue
		}
		err := errors.New("a write still in progress (a stalled disk)")
		if errs != nil {
			err = errs[i]
		}
		lose(m.reg, m.log, boardStateFails, "a board's state file not written by exit", slog.String("uuid", b.UUID()), slog.Any("error", err))
	}
}
