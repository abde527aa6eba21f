package monitor

import (
	"errors"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/action/board"
)

// The writing of the boards' state files (action-<UUID>.json): each
// judgement saves its board without waiting for another write
// (board.Board.Save), judgeActions saves again within a second what a
// save left or failed, and the stop writes what is left, bounded.

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
// write failed, is counted and logged.
func (m *Monitor) saveBoardsAtExit(d time.Duration) {
	var (
		mu   sync.Mutex // bs, once listed
		bs   []*board.Board
		errs []error // the goroutine's until done is closed
	)
	done := make(chan struct{})
	go func() {
		defer close(done)
		var found []*board.Board
		for _, gs := range m.gpus {
			// A worker abandoned at stop may hold its lock, reading the
			// board's file on a stalled disk: in here, under d.
			gs.repair.mu.Lock()
			if b := gs.repair.b; b != nil {
				found = append(found, b)
			}
			gs.repair.mu.Unlock()
		}
		m.states.mu.Lock()
		for _, mb := range m.states.missing {
			found = append(found, mb.Board)
		}
		m.states.mu.Unlock()
		mu.Lock()
		bs = slices.DeleteFunc(found, func(b *board.Board) bool { return !b.Pending() })
		errs = make([]error, len(bs))
		mu.Unlock()
		for {
			busy := false
			for i, b := range bs {
				if errs[i] == nil && b.Pending() {
					errs[i] = b.Save()
					busy = busy || errs[i] == nil && b.Pending() // another write, maybe stuck, has the file
				}
			}
			if !busy {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	var err func(i int) error
	select {
	case <-done:
		err = func(i int) error { return errs[i] }
	case <-time.After(d):
		err = func(int) error { return errors.New("a write still in progress (a stalled disk)") }
	}
	mu.Lock()
	left := bs // nil: the boards were not listed in time (a worker holds one)
	mu.Unlock()
	if left == nil {
		select {
		case <-done:
		default:
			lose(m.reg, m.log, boardStateFails, "the boards' state files not checked by exit (a stuck worker holds one)")
		}
	}
	for i, b := range left {
		if b.Pending() {
			lose(m.reg, m.log, boardStateFails, "a board's state file not written by exit", slog.String("uuid", b.UUID()), slog.Any("error", err(i)))
		}
	}
}
