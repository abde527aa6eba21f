package counters

import (
	"slices"
	"strings"
	"sync"
	"testing"
)

type stats struct{ a, b uint64 }

// Declared in this order: the outputs show the losses first, then the
// others, each in this order.
var (
	countC = Declare(Def{Name: "c", Help: "c"})
	lossA  = Declare(Def{Name: "a_lost", Loss: true, Help: "a"})
	lossB  = Declare(Def{Name: "b_lost", Loss: true, Help: "b"})
)

// part reads a and c from a part's own stats.
var part = []Field[stats]{
	{Def: lossA, Get: func(s stats) uint64 { return s.a }},
	{Def: countC, Get: func(s stats) uint64 { return s.b }},
}

func values(vs []Value) map[string]uint64 {
	out := map[string]uint64{}
	for _, v := range vs {
		out[v.Name] = v.Value
	}
	return out
}

func names(vs []Value) []string {
	var out []string
	for _, v := range vs {
		out = append(out, v.Name)
	}
	return out
}

// The outputs' order is the losses first, then the others, each by the
// declaring package (here all one) and in declaration order, whatever order
// the parts count or register in.
func TestOrderIsLossesFirstThenDeclaration(t *testing.T) {
	r := New()
	r.Inc(lossB)
	Observe(r, func() stats { return stats{a: 1, b: 2} }, part...)
	if n := names(r.Read()); !slices.Equal(n, []string{"a_lost", "b_lost", "c"}) {
		t.Fatalf("order %v, want a_lost, b_lost (losses, as declared), then c", n)
	}
}

// Every declared counter is in every registry and reads 0 until counted:
// every output shows the same counters whatever runs.
func TestDeclaredReadsZero(t *testing.T) {
	got := New().Read()
	if len(got) != 3 {
		t.Fatalf("read %+v, want the 3 declared counters", got)
	}
	for _, v := range got {
		if v.Value != 0 {
			t.Errorf("%s = %d, want 0", v.Name, v.Value)
		}
	}
}

// A counter several parts count shows their sum: counted in the registry
// they were given and in parts' stats (Observe).
func TestSeveralPartsSum(t *testing.T) {
	r := New()
	r.Inc(lossA)
	for i := range 2 { // two GPUs, each counting in the registry it was given
		if n := r.Add(lossA, 2); n != uint64(1+2*(i+1)) {
			t.Errorf("Add returned %d, want the registry's count after", n)
		}
	}
	Observe(r, func() stats { return stats{a: 10, b: 20} }, part...)
	got := values(r.Read())
	if got["a_lost"] != 1+2+2+10 || got["c"] != 20 || got["b_lost"] != 0 {
		t.Errorf("read %v, want a_lost 15, c 20, b_lost 0", got)
	}
	if n := r.Load(lossA); n != 5 {
		t.Errorf("Load = %d, want the registry's count 5, without what it observes", n)
	}
}

// Each reading calls a part's stats once, for all of its counters.
func TestStatsReadOncePerReading(t *testing.T) {
	r := New()
	calls := 0
	Observe(r, func() stats { calls++; return stats{} }, part...)
	r.Read()
	if calls != 1 {
		t.Errorf("stats called %d times for one reading, want 1", calls)
	}
}

// Programming errors panic where they are made: a name declared twice, a
// declaration once registries exist, a part built without its registry.
func TestMisusePanics(t *testing.T) {
	New()
	for name, tc := range map[string]struct {
		do   func()
		want string
	}{
		"declared twice": {func() { Declare(Def{Name: "a_lost"}) }, "a_lost declared"},
		"declared late":  {func() { Declare(Def{Name: "late"}) }, "late declared after a registry"},
		"no registry":    {func() { Need(nil, "part.Config.Counters") }, "part.Config.Counters is nil"},
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if p, _ := recover().(string); !strings.Contains(p, tc.want) {
					t.Errorf("panic %q, want one saying %q", p, tc.want)
				}
			}()
			tc.do()
		})
	}
}

func TestLookup(t *testing.T) {
	if d := Lookup("b_lost"); d != lossB {
		t.Errorf("Lookup(b_lost) = %v, want its declaration", d)
	}
	if d := Lookup("b_lost"); d.pkg != "github.com/gpu-telemetry/gpu-telemetry/internal/counters" {
		t.Errorf("b_lost declared by %q, want this package's import path (the outputs' order is by it)", d.pkg)
	}
	if d := Lookup("nothing"); d != nil {
		t.Errorf("Lookup(nothing) = %v, want nil", d)
	}
}

func TestNeedReturnsTheRegistry(t *testing.T) {
	if r := New(); Need(r, "part") != r {
		t.Error("Need did not return the registry it was given")
	}
}

func TestNilRegistryReadsNothing(t *testing.T) {
	var r *Registry
	if r.Read() != nil {
		t.Error("a nil registry reads something")
	}
}

// Counting and reading take no lock: a reading while parts count and
// register sees every counter, and nothing counted is lost.
func TestReadWhileCounting(t *testing.T) {
	r := New()
	var wg sync.WaitGroup
	wg.Go(func() {
		for range 100 {
			r.Inc(lossA)
			Observe(r, func() stats { return stats{b: 1} }, part...)
		}
	})
	for range 100 {
		if got := r.Read(); len(got) != 3 {
			t.Fatalf("a reading of %d counters", len(got))
		}
	}
	wg.Wait()
	if got := values(r.Read()); got["a_lost"] != 100 || got["c"] != 100 {
		t.Errorf("read %v, want a_lost and c 100", got)
	}
}
