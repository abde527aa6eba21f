package live

import "sync"

// The events ring's bounds: the last MaxEvents events.log lines, together
// at most maxEventBytes (a longer line is cut to maxEventLine bytes), so
// that a storm of long lines cannot grow the daemon.
const (
	MaxEvents     = 500
	maxEventLine  = 4 << 10
	maxEventBytes = 512 << 10
)

// Events holds the host's last events.log lines in memory (issue 40), for
// the status document's Events (status events=N): the monitor adds each
// line as it writes it; readers copy the newest out. Safe for concurrent
// use; its lock is held for one line's add or the copy of N strings.
type Events struct {
	mu    sync.Mutex
	lines [MaxEvents]string // a ring: the oldest at first, n of them
	first int
	n     int
	bytes int
}

// Add keeps line (without its newline) as the newest, dropping the oldest
// lines beyond the bounds.
func (e *Events) Add(line string) {
	if len(line) > maxEventLine {
		line = line[:maxEventLine]
	}
	line = string([]byte(line)) // its own copy: the caller's may share a larger buffer
	e.mu.Lock()
	defer e.mu.Unlock()
	for e.n > 0 && (e.n == MaxEvents || e.bytes+len(line) > maxEventBytes) {
		e.bytes -= len(e.lines[e.first])
		e.lines[e.first] = ""
		e.first = (e.first + 1) % MaxEvents
		e.n--
	}
	e.lines[(e.first+e.n)%MaxEvents] = line
	e.n++
	e.bytes += len(line)
}

// Newest returns at most n of the lines, newest first (nil when n <= 0 or
// none is held).
func (e *Events) Newest(n int) []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	n = min(n, e.n)
	if n <= 0 {
		return nil
	}
	out := make([]string, n)
	for i := range out {
		out[i] = e.lines[(e.first+e.n-1-i)%MaxEvents]
	}
	return out
}
