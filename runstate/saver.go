package runstate

import (
	"errors"
	"maps"
	"slices"
	"sync"

	"github.com/gpu-telemetry/gpu-telemetry/sink"
)

// ErrNotBegun is Save's error before Begin: this run's state is not
// recorded yet.
var ErrNotBegun = errors.New("run-state not written yet")

// Saver is this run's run-state in Dir: Begin writes it once at start,
// Save rewrites it with a change. Its calls are serialized, so that the
// kernel log position (saved on a goroutine of its own), the fans the fan
// guard holds and the board of a GPU that answers late never undo one
// another's change. It also keeps what the start leaves of the previous
// run for the GPUs that answer after it: their fans held, and the boards
// that may be theirs. The zero Saver with Dir set is ready.
type Saver struct {
	Dir string
	// Rewrite writes run-state at each Save (Write when nil); tests stall
	// or fail it. Begin always uses Write.
	Rewrite func(dir string, s State) error

	mu    sync.Mutex
	begun bool
	cur   State    // what run-state holds
	prev  Previous // what Begin found
	// fans are the previous run's fan holds not claimed yet (ClaimFans).
	fans map[string][]int
	// held are boards of the previous run not enumerated at start while
	// some GPUs had no UUID yet (HoldMissing).
	held []sink.InventoryChange
}

// Begin records this run (Begin(s.Dir, cur)) and keeps what it found: the
// Saves after start from cur, with the fans the previous run held (they
// stay recorded until handed back). An error means this run could not be
// recorded; the Saves after still try.
func (s *Saver) Begin(cur State) (Previous, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	prev, err := Begin(s.Dir, cur)
	if cur.FanGuard == nil {
		cur.FanGuard = prev.State.FanGuard
	}
	s.begun, s.cur, s.prev = true, cur, prev
	s.fans = map[string][]int{}
	for _, h := range prev.State.FanGuard {
		s.fans[h.UUID] = h.Fans
	}
	return prev, err
}

// Previous returns what Begin found; begun is false before Begin.
func (s *Saver) Previous() (prev Previous, begun bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.prev, s.begun
}

// Save applies change to this run's state and rewrites run-state; change
// returns false when it changed nothing, and nothing is written. change
// must copy a slice or map before it modifies it: a write that fails
// leaves the state as it was (the next Save writes it). Before Begin it
// returns ErrNotBegun.
func (s *Saver) Save(change func(*State) bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.begun {
		return ErrNotBegun
	}
	next := s.cur
	if !change(&next) {
		return nil
	}
	write := s.Rewrite
	if write == nil {
		write = Write
	}
	if err := write(s.Dir, next); err != nil {
		return err
	}
	s.cur = next
	return nil
}

// ClaimFans returns the fans the previous run held of the GPU uuid, once:
// its fan guard hands them back first. Nil before Begin.
func (s *Saver) ClaimFans(uuid string) []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	fans := s.fans[uuid]
	delete(s.fans, uuid)
	return fans
}

// UnclaimedFans are the previous run's fan holds no GPU has claimed, by
// UUID.
func (s *Saver) UnclaimedFans() []FanHold {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []FanHold
	for _, uuid := range slices.Sorted(maps.Keys(s.fans)) {
		out = append(out, FanHold{UUID: uuid, Fans: s.fans[uuid]})
	}
	return out
}

// HoldMissing keeps c, a board of the previous run not enumerated at start
// while some GPUs had no UUID yet: one of those may be the board.
func (s *Saver) HoldMissing(c sink.InventoryChange) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.held = append(s.held, c)
}

// HeldMissing returns the boards HoldMissing kept that are missing after
// all: once every board of boards (this run's) has a UUID, those not among
// them, once. Nil until then.
func (s *Saver) HeldMissing(boards []sink.Board) []sink.InventoryChange {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.held) == 0 || slices.ContainsFunc(boards, func(b sink.Board) bool { return b.UUID == "" }) {
		return nil
	}
	var missing []sink.InventoryChange
	for _, c := range s.held {
		if !slices.ContainsFunc(boards, func(b sink.Board) bool { return b.UUID == c.Board.UUID }) {
			c.Unidentified = 0
			missing = append(missing, c)
		}
	}
	s.held = nil
	return missing
}
