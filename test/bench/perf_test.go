package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestParsePerfScript classes a perf script excerpt (-F comm,tid,ip,sym;
// testdata/perf-script.txt) with one sample of each class.
func TestParsePerfScript(t *testing.T) {
	f, err := os.Open(filepath.Join("testdata", "perf-script.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p, err := parsePerfScript(f)
	if err != nil {
		t.Fatal(err)
	}
	want := [numShares]int{
		shareFsync:   1,
		shareWrite:   2, // in the kernel, and in Go's wrapper on the way in
		shareWakeups: 2, // epoll_pwait in the kernel, futex at its stub
		shareKernel:  1,
		shareDriver:  1,
		shareRuntime: 1,
		shareOurs:    2, // formatting the row is not its write(2)
	}
	if p.n != want || p.total != 10 {
		t.Errorf("classes %v (total %d), want %v (10)", p.n, p.total, want)
	}
	if f := p.frac(shareWrite); f != 2.0/10 {
		t.Errorf("write fraction %v, want 2/10", f)
	}
	var none *profile
	if f := none.frac(shareWrite); f != 0 {
		t.Errorf("no profile: fraction %v, want 0", f)
	}
}

func TestSpread(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want spread
	}{
		{[]float64{3, 1, 2}, spread{2, 1, 3}},
		{[]float64{4, 1, 3, 2}, spread{2.5, 1, 4}},
		{[]float64{5}, spread{5, 5, 5}},
	} {
		if got := spreadOf(c.in); got != c.want {
			t.Errorf("spreadOf(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}
