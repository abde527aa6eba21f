// Package counters is the daemon's one counter mechanism. A counter is
// declared once, in a package-level var beside the code that counts it
// (Declare), and counted in the daemon's Registry (Inc, Add); every output
// (the status line, summary.log, the metrics gpu_telemetry_<name>_total,
// the status document) walks Registry.Read. Adding a counter is that one
// declaration and the Inc where the work is counted: nobody keeps a list
// of other parts' counters.
//
// A part is given the registry it counts in when it is built (a required
// argument or config field: nil panics, Need), and counts straight into it:
// the daemon builds its one registry first and hands it to every part, a
// test of a part alone gives it New() and reads that. No part keeps a
// registry of its own for someone to forget to show.
//
// Every registry holds every declared counter, so every output shows the
// same counters whatever runs: a counter whose part is not built (the atop
// server without --atop, the kernel log reader before it runs, the control
// socket before cmd opens it) reads 0. Counts are the registry's, not the
// process's: tests build many daemons in one process.
//
// A counter several parts count (each GPU's sampler, both line logs, two
// listeners sharing listen_failures) is one counter they all add to.
//
// Order: the losses first, then the others, each by the import path of the
// package that declares it, then in declaration order (in a package, the
// order of its files' names and of the declarations in them). Not Go's
// package initialization order: that depends on which packages a binary
// links (a test's order would not be the daemon's).
//
// Why not client_golang's registry: its Gatherer sorts by name (the outputs
// show the losses first), a Desc carries no "loss" or "logged by its part"
// (a side table again), and its collectors are read by gathering a
// protobuf per family, where the status line and the loss check read every
// counter once a second; the metrics endpoint exports this registry
// through the published host view (live/metrics), as it does every reading.
package counters

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
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

	id  int    // its place among the declared counters
	pkg string // the import path of the package that declared it
}

// Value is a counter's value as read.
type Value struct {
	Def
	Value uint64
}

// The declared counters, in declaration order; made is set once a registry
// exists, after which nothing may be declared (a registry has one count
// per counter declared).
var (
	declMu   sync.Mutex
	declared []*Def
	order    []int // declared's indexes, losses first
	made     atomic.Bool
)

// Declare adds d to the counters every registry holds and returns it, the
// key to count it with. Call it in a package-level var: a name declared
// twice, or a declaration after the first registry was made, panics (a
// programming error, found by every test of the package).
func Declare(d Def) *Def {
	declMu.Lock()
	defer declMu.Unlock()
	if made.Load() {
		panic(fmt.Sprintf("counters: %s declared after a registry was made (declare counters in package-level vars)", d.Name))
	}
	if slices.ContainsFunc(declared, func(e *Def) bool { return e.Name == d.Name }) {
		panic(fmt.Sprintf("counters: %s declared twice", d.Name))
	}
	d.id, d.pkg = len(declared), callerPackage()
	p := &d
	declared = append(declared, p)
	return p
}

// callerPackage returns the import path of the package that called Declare.
func callerPackage() string {
	pc, _, _, ok := runtime.Caller(2)
	if !ok {
		return ""
	}
	name := runtime.FuncForPC(pc).Name() // "github.com/x/y/pkg.init" or "...pkg.F"
	slash := strings.LastIndexByte(name, '/')
	if dot := strings.IndexByte(name[slash+1:], '.'); dot >= 0 {
		return name[:slash+1+dot]
	}
	return name
}

// Lookup returns the counter declared as name, nil if none is.
func Lookup(name string) *Def {
	declMu.Lock()
	defer declMu.Unlock()
	if i := slices.IndexFunc(declared, func(e *Def) bool { return e.Name == name }); i >= 0 {
		return declared[i]
	}
	return nil
}

// Registry holds one count per declared counter, and the counts it shows
// from parts' own stats (Observe). Counting and reading take no lock.
type Registry struct {
	n    []atomic.Uint64 // by Def.id
	mu   sync.Mutex      // serializes Observe
	srcs atomic.Pointer[[]source]
}

// source adds counts a part keeps in its own stats into v, indexed by Def.id.
type source func(v []uint64)

// New returns a registry with every declared counter at 0.
func New() *Registry {
	declMu.Lock()
	defer declMu.Unlock()
	if !made.Swap(true) {
		order = make([]int, len(declared))
		for i := range order {
			order[i] = i
		}
		slices.SortStableFunc(order, func(a, b int) int {
			da, db := declared[a], declared[b]
			if da.Loss != db.Loss {
				if da.Loss {
					return -1
				}
				return 1
			}
			return strings.Compare(da.pkg, db.pkg)
		})
	}
	return &Registry{n: make([]atomic.Uint64, len(declared))}
}

// Inc counts one of d.
func (r *Registry) Inc(d *Def) { r.n[d.id].Add(1) }

// Add counts n of d and returns r's own count of it after (1 for the first
// occurrence, which the part may log).
func (r *Registry) Add(d *Def, n uint64) uint64 { return r.n[d.id].Add(n) }

// Need returns r, the registry the part who is given to count in; nil
// panics, naming who: a part built without one would count where no output
// reads.
func Need(r *Registry, who string) *Registry {
	if r == nil {
		panic("counters: " + who + " is nil: a part is given the registry it counts in")
	}
	return r
}

// Field is one counter a part keeps in its own stats S, for its own logic.
type Field[S any] struct {
	*Def
	Get func(S) uint64
}

// Observe makes r show counts a part keeps in its own stats: each reading
// of r calls stats once and adds each field's value to its counter.
func Observe[S any](r *Registry, stats func() S, fields ...Field[S]) {
	add := func(v []uint64) {
		s := stats()
		for _, f := range fields {
			v[f.id] += f.Get(s)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var srcs []source
	if p := r.srcs.Load(); p != nil {
		srcs = slices.Clone(*p)
	}
	srcs = append(srcs, add)
	r.srcs.Store(&srcs)
}

// Load returns r's count of d (Inc, Add), without what it observes (Read
// has that).
func (r *Registry) Load(d *Def) uint64 { return r.n[d.id].Load() }

// Read returns every declared counter's value, the losses first, then in
// declaration order. Safe from any goroutine; a nil r reads nothing.
func (r *Registry) Read() []Value {
	if r == nil {
		return nil
	}
	v := make([]uint64, len(r.n))
	for i := range r.n {
		v[i] = r.n[i].Load()
	}
	if p := r.srcs.Load(); p != nil {
		for _, add := range *p {
			add(v)
		}
	}
	out := make([]Value, len(order))
	for i, at := range order {
		out[i] = Value{Def: *declared[at], Value: v[at]}
	}
	return out
}
