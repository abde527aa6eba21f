package counters

import (
	"slices"
	"strings"
	"sync"
	"testing"
)

type stats struct{ a, b uint64 }

var (
	lossA  = Def{Name: "a_lost", Loss: true, Place: 20, Help: "a", Sum: true}
	lossB  = Def{Name: "b_lost", Loss: true, Place: 10, Help: "b"}
	countC = Def{Name: "c", Place: 5, Help: "c", Sum: true}
)

// part's counters are several parts' (Sum), one's only one part's.
var (
	part = []Field[stats]{
		{Def: lossA, Get: func(s stats) uint64 { return s.a }},
		{Def: countC, Get: func(s stats) uint64 { return s.b }},
	}
	one = []Field[uint64]{{Def: lossB, Get: func(v uint64) uint64 { return v }}}
)

func names(vs []Value) []string {
	var out []string
	for _, v := range vs {
		out = append(out, v.Name)
	}
	return out
}

// The outputs' order is the losses first, then the others, each by place,
// whatever order the parts registered in.
func TestOrderIsLossesFirstThenPlace(t *testing.T) {
	r := New()
	Add(r, func() stats { return stats{a: 1, b: 2} }, part)
	Add(r, func() uint64 { return 7 }, one)
	got := r.Read()
	if n := names(got); !slices.Equal(n, []string{"b_lost", "a_lost", "c"}) {
		t.Fatalf("order %v, want b_lost (loss, place 10), a_lost (loss, 20), c (5, not a loss)", n)
	}
	for i, want := range []uint64{7, 1, 2} {
		if got[i].Value != want {
			t.Errorf("%s = %d, want %d", got[i].Name, got[i].Value, want)
		}
	}
}

// A counter declared before its part is built reads 0 and keeps its place;
// registered by several parts, it shows their sum.
func TestDeclaredReadsZeroRegisteredTwiceSums(t *testing.T) {
	r := New()
	Declare(r, part)
	if got := r.Read(); len(got) != 2 || got[0].Value != 0 || got[1].Value != 0 {
		t.Fatalf("declared: %+v, want both at 0", got)
	}
	if u := r.Unread(); !slices.Equal(u, []string{"a_lost", "c"}) {
		t.Errorf("unread %v, want both", u)
	}
	Add(r, func() stats { return stats{a: 1, b: 10} }, part)
	Add(r, func() stats { return stats{a: 2, b: 20} }, part)
	got := r.Read()
	if got[0].Value != 3 || got[1].Value != 30 {
		t.Errorf("registered twice: %+v, want the sums 3 and 30", got)
	}
	if u := r.Unread(); len(u) != 0 {
		t.Errorf("unread %v, want none", u)
	}
}

// Each reading calls a part's stats once, for all of its counters.
func TestStatsReadOncePerReading(t *testing.T) {
	r := New()
	calls := 0
	Add(r, func() stats { calls++; return stats{} }, part)
	r.Read()
	if calls != 1 {
		t.Errorf("stats called %d times for one reading, want 1", calls)
	}
}

func TestConflictsPanic(t *testing.T) {
	for name, tc := range map[string]struct {
		def  Def
		want string
	}{
		"same name, other help": {Def{Name: "a_lost", Loss: true, Place: 20, Help: "other"}, "another definition"},
		"same place":            {Def{Name: "d", Place: 20, Help: "d"}, "both at place 20"},
	} {
		t.Run(name, func(t *testing.T) {
			r := New()
			Declare(r, part)
			defer func() {
				if p, _ := recover().(string); !strings.Contains(p, tc.want) {
					t.Errorf("panic %q, want one saying %q", p, tc.want)
				}
			}()
			Declare(r, []Field[stats]{{Def: tc.def}})
		})
	}
}

// A counter that is one part's (no Sum) registered a second time is a part
// registered twice: it panics rather than count double; declared first,
// it takes its one part.
func TestOnePartsCounterRegisteredTwicePanics(t *testing.T) {
	r := New()
	Declare(r, one)
	Add(r, func() uint64 { return 7 }, one)
	if got := r.Read(); len(got) != 1 || got[0].Value != 7 {
		t.Fatalf("declared, then registered: %+v, want b_lost 7", got)
	}
	defer func() {
		if p, _ := recover().(string); !strings.Contains(p, "b_lost registered by a second part") {
			t.Errorf("panic %q, want one naming b_lost registered by a second part", p)
		}
	}()
	Add(r, func() uint64 { return 7 }, one)
	t.Errorf("registered twice without Sum: %+v", r.Read())
}

func TestNilRegistryIsNothing(t *testing.T) {
	var r *Registry
	Add(r, func() stats { return stats{} }, part) // no panic
	if r.Read() != nil || r.Unread() != nil {
		t.Error("a nil registry reads something")
	}
}

// Readers take no lock: a reading while parts register sees a whole part.
func TestReadWhileRegistering(t *testing.T) {
	r := New()
	var wg sync.WaitGroup
	wg.Go(func() {
		for range 100 {
			Add(r, func() stats { return stats{a: 1} }, part)
		}
	})
	for range 100 {
		if got := r.Read(); len(got) != 0 && len(got) != 2 {
			t.Fatalf("a reading of %d counters", len(got))
		}
	}
	wg.Wait()
	if got := r.Read(); got[0].Value != 100 {
		t.Errorf("a_lost = %d, want 100", got[0].Value)
	}
}

// A Counter registered under a Def shared with another part adds to it.
func TestCounterAddsToASharedDef(t *testing.T) {
	r := New()
	Add(r, func() stats { return stats{a: 2} }, part)
	var c Counter
	c.Register(r, lossA)
	c.Inc()
	if got := r.Read(); got[0].Name != "a_lost" || got[0].Value != 3 {
		t.Errorf("read %+v, want a_lost = 2 + 1", got)
	}
}
