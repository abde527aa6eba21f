// Package counters is the daemon's counter registry. Each part declares its
// counters in a table of its own (name, help, whether it counts lost work,
// its place in the outputs, how to read it from the part's stats) and
// registers its stats when it is built; every output (the status line,
// summary.log, the metrics, the status document) walks the registry. Adding
// a counter is one row in the part that counts it: nobody keeps a list of
// other parts' counters.
//
// Order: every output shows the losses first, then the others, each by
// Place. A place is unique in the daemon; the places are spaced by 10 so that
// a new counter can stand between two.
//
// A counter several parts register (each GPU's sampler, both line logs,
// two listeners sharing listen_failures: Def.Sum) shows the sum. A counter declared
// whose part is not built, or not yet (the atop server without --atop, the
// kernel log reader before it runs, the control socket before cmd opens
// it), reads 0: every output shows the same counters whatever runs.
package counters

import (
	"cmp"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
)

// Def declares one counter.
type Def struct {
	Name string // snake_case; the metric is gpu_telemetry_<Name>_total
	Help string // one line: what is counted
	Loss bool   // lost, dropped, skipped, failed or suppressed work
	// OwnLog: the part logs the first occurrence itself, with what was
	// lost; otherwise the monitor logs it, with Help, once it is non-zero.
	OwnLog bool
	Place  int // where it stands among the losses, or among the others
	// Sum: several parts count it (each GPU, both line logs, the listeners)
	// and it shows their sum. A counter without Sum is one part's: a second
	// registration of it panics (a part registered twice would count
	// double).
	Sum bool
}

// Field is one counter of a part, read from the part's stats S.
type Field[S any] struct {
	Def
	Get func(S) uint64
}

// Value is a counter's value as read.
type Value struct {
	Def
	Value uint64
}

// ListenFailures is the one counter several parts share: each listener that
// cannot open its endpoint counts it (the monitor for --metrics-listen, the
// atop server for its own).
var ListenFailures = Def{Name: "listen_failures", Loss: true, OwnLog: true, Place: 300, Sum: true,
	Help: "endpoints that could not be opened (--metrics-listen, --atop's TCP port or unix socket: address in use, or refused by the unit's RestrictAddressFamilies): not served, the logger samples on"}

// Counter is a count a part owns and registers under one Def (Register),
// for a part with no stats of its own to read it from.
type Counter struct{ n atomic.Uint64 }

// Inc counts one.
func (c *Counter) Inc() { c.n.Add(1) }

// Load returns the count.
func (c *Counter) Load() uint64 { return c.n.Load() }

// Register makes c the part's value of d in r.
func (c *Counter) Register(r *Registry, d Def) {
	Add(r, c.Load, []Field[uint64]{{Def: d, Get: func(v uint64) uint64 { return v }}})
}

// Registry holds the counters and how to read them. Reading takes no lock:
// a registration publishes a new table, readers use the one they loaded.
type Registry struct {
	mu  sync.Mutex // serializes registrations
	tab atomic.Pointer[table]
}

// table is one published set of counters, in output order, and the stats
// they are read from.
type table struct {
	defs []Def
	srcs []source
	most int // the most counters one source reads
}

// source is one registered stats reader.
type source struct {
	names []string // its counters
	at    []int    // where each of names stands in defs
	read  func(v []uint64)
}

// New returns an empty registry.
func New() *Registry { return &Registry{} }

// Declare makes fields' counters part of r, reading 0 until their part
// registers its stats with Add. A nil r is nothing to declare to.
func Declare[S any](r *Registry, fields []Field[S]) { Add(r, nil, fields) }

// Add registers a part's counters, read from stats: each reading of the
// registry calls stats once and reads every field from what it returned. A
// counter already in r with the same Def adds this part's value to it when
// the Def says Sum, and panics otherwise; a nil stats only declares the
// counters. A nil r is nothing to register with
// (a part built without a registry, in tests). Add panics when a name or a
// place is another counter's: a programming error, found by every test that
// builds the part.
func Add[S any](r *Registry, stats func() S, fields []Field[S]) {
	if r == nil {
		return
	}
	defs := make([]Def, len(fields))
	for i, f := range fields {
		defs[i] = f.Def
	}
	var read func(v []uint64)
	if stats != nil {
		read = func(v []uint64) {
			s := stats()
			for i, f := range fields {
				v[i] = f.Get(s)
			}
		}
	}
	r.add(defs, read)
}

func (r *Registry) add(defs []Def, read func(v []uint64)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.tab.Load()
	if old == nil {
		old = &table{}
	}
	t := &table{defs: slices.Clone(old.defs), srcs: slices.Clone(old.srcs), most: old.most}
	for _, d := range defs {
		if i := slices.IndexFunc(t.defs, func(e Def) bool { return e.Name == d.Name }); i >= 0 {
			if t.defs[i] != d {
				panic(fmt.Sprintf("counters: %s registered again with another definition", d.Name))
			}
			continue
		}
		if i := slices.IndexFunc(t.defs, func(e Def) bool { return e.Place == d.Place }); i >= 0 {
			panic(fmt.Sprintf("counters: %s and %s both at place %d", t.defs[i].Name, d.Name, d.Place))
		}
		t.defs = append(t.defs, d)
	}
	slices.SortFunc(t.defs, func(a, b Def) int {
		if a.Loss != b.Loss {
			if a.Loss {
				return -1
			}
			return 1
		}
		return cmp.Compare(a.Place, b.Place)
	})
	if read != nil {
		s := source{read: read}
		for _, d := range defs {
			if !d.Sum && slices.ContainsFunc(t.srcs, func(o source) bool { return slices.Contains(o.names, d.Name) }) {
				panic(fmt.Sprintf("counters: %s registered by a second part (registered twice? Def.Sum for a counter several parts count)", d.Name))
			}
			s.names = append(s.names, d.Name)
		}
		t.srcs = append(t.srcs, s)
		t.most = max(t.most, len(defs))
	}
	for i := range t.srcs { // the places in defs moved
		s := &t.srcs[i]
		s.at = make([]int, len(s.names))
		for j, n := range s.names {
			s.at[j] = slices.IndexFunc(t.defs, func(e Def) bool { return e.Name == n })
		}
	}
	r.tab.Store(t)
}

// published is the table readers use; nil for a nil r or before the first
// registration.
func (r *Registry) published() *table {
	if r == nil {
		return nil
	}
	return r.tab.Load()
}

// Read returns every counter's current value, losses first, then by place.
// Safe from any goroutine; a nil r reads nothing.
func (r *Registry) Read() []Value {
	t := r.published()
	if t == nil {
		return nil
	}
	out := make([]Value, len(t.defs))
	for i, d := range t.defs {
		out[i].Def = d
	}
	v := make([]uint64, t.most)
	for _, s := range t.srcs {
		s.read(v[:len(s.at)])
		for i, at := range s.at {
			out[at].Value += v[i]
		}
	}
	return out
}

// Unread names the counters declared that no registered part reads (yet),
// in output order: with every part built, none.
func (r *Registry) Unread() []string {
	t := r.published()
	if t == nil {
		return nil
	}
	read := make([]bool, len(t.defs))
	for _, s := range t.srcs {
		for _, at := range s.at {
			read[at] = true
		}
	}
	var out []string
	for i, d := range t.defs {
		if !read[i] {
			out = append(out, d.Name)
		}
	}
	return out
}
