package snapshot

import (
	"sync"
	"sync/atomic"
)

// stuckSet counts, by key (a program's name), the work abandoned while
// still blocked in the kernel and not yet back: work of a key with some is
// not started again, so a wedged GPU costs no more blocked processes with
// every snapshot. A key at 0 stays: the keys are few.
type stuckSet struct{ m sync.Map } // key -> *atomic.Int32

func (s *stuckSet) count(key string) *atomic.Int32 {
	n, _ := s.m.LoadOrStore(key, new(atomic.Int32))
	return n.(*atomic.Int32)
}

// busy reports whether work of key abandoned earlier is still blocked.
func (s *stuckSet) busy(key string) bool { return s.count(key).Load() > 0 }

// abandon counts work of key as stuck until wait returns.
func (s *stuckSet) abandon(key string, wait func()) {
	n := s.count(key)
	n.Add(1)
	go func() {
		wait()
		n.Add(-1)
	}()
}
