package atop

import (
	"strconv"
	"strings"
	"testing"

	"github.com/gpu-telemetry/gpu-telemetry/internal/counters"
	"github.com/gpu-telemetry/gpu-telemetry/internal/testutil"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// scripted returns an accumulator after two seconds of a fixed story: GPU 0
// busy with processes 100 (both kinds), 300 (memory not available, no
// per-process utilization), 200 exited in the second second; GPU 1 with
// utilization unsupported and process lists refused.
func scripted(t testing.TB) (*Accumulator, *Client) {
	t.Helper()
	a := NewAccumulator(twoGPUs(), nil, counters.New())
	c := a.Register()
	noMem := reading.Process{PID: 300, Kind: reading.ProcGraphics}
	both := proc(100, 70, 30000)
	both.Kind |= reading.ProcGraphics
	for sec := range 2 {
		for range 10 {
			a.Sample(row(0, 75, 20, 40000))
			s := row(1, 0, 0, 14)
			s.Values[reading.GPUUtil], s.Values[reading.MemUtil] = reading.Opt[uint64]{}, reading.Opt[uint64]{}
			a.Sample(s)
		}
		list := []reading.Process{both, noMem}
		if sec == 0 {
			list = append(list, proc(200, 5, 2048))
		}
		a.Procs(procs(0, list...))
		a.Procs(&reading.Procs{GPU: 1, Status: reading.ProcUnsupported})
		a.Second()
	}
	return a, c
}

func TestGoldenReplies(t *testing.T) {
	for _, v := range []byte{1, 2} {
		a, c := scripted(t)
		srv := NewServer(a, DefaultConfig(), nil, counters.New())
		tr, ok := srv.Reply([2]byte{'T', v}, c)
		if !ok {
			t.Fatal("T refused")
		}
		testutil.Golden(t, "types-v"+strconv.Itoa(int(v))+".golden", tr)
		sr, _ := srv.Reply([2]byte{'S', v}, c)
		testutil.Golden(t, "stats-v"+strconv.Itoa(int(v))+".golden", sr)
	}
}

// TestReplyAtLimit: 400 processes do not fit in 8192 bytes; the busiest are
// kept, the body is at most 8192 bytes, and the cut is counted, in both
// versions.
func TestReplyAtLimit(t *testing.T) {
	a := NewAccumulator(twoGPUs(), nil, counters.New())
	var list []reading.Process
	for i := range 400 {
		list = append(list, proc(uint32(10000+i), uint32(i%100), uint64(i)))
	}
	a.Procs(procs(0, list...))
	a.Second()
	srv := NewServer(a, DefaultConfig(), nil, counters.New())
	cut := uint64(0)
	for v := byte(1); v <= Newest; v++ {
		r, _ := srv.Reply([2]byte{'S', v}, nil)
		body := r[4:]
		if len(body) > MaxBody || len(body) < MaxBody-64 {
			t.Fatalf("v%d: body %d bytes, want just under %d", v, len(body), MaxBody)
		}
		testutil.Golden(t, "stats-limit-v"+strconv.Itoa(int(v))+".golden", r)
		// Every kept record is at least as busy as every left-out one (one
		// second: version 2's sum is the second's busy %).
		busyAt := map[byte]int{1: 1, 2: 2}[v]
		minKept := 100
		for _, rec := range strings.Split(string(body), "#A ")[1:] {
			f := strings.Fields(rec)
			busy, _ := strconv.Atoi(f[busyAt])
			minKept = min(minKept, busy)
		}
		kept := strings.Count(string(body), "#A ")
		left := 0
		for _, p := range list {
			if int(p.SMUtil.V) > minKept {
				left++
			}
		}
		if left > kept {
			t.Errorf("v%d: a busier process was left out (min kept busy %d)", v, minKept)
		}
		cut += uint64(400 - kept)
		if replies, records := srv.counts.Load(repliesCut), srv.counts.Load(recordsCut); replies != uint64(v) || records != cut {
			t.Errorf("v%d: %d replies and %d records cut, want %d %d; kept %d", v, replies, records, v, cut, kept)
		}
	}
}

func TestVersionChoice(t *testing.T) {
	for _, tc := range []struct{ asked, want byte }{{0, 2}, {1, 1}, {2, 2}, {3, 2}, {255, 2}} {
		if got := Version(tc.asked); got != tc.want {
			t.Errorf("Version(%d) = %d, want %d", tc.asked, got, tc.want)
		}
	}
}
