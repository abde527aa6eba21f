package live

import (
	"testing"
	"time"

	_ "github.com/gpu-telemetry/gpu-telemetry/anomaly" // registers the detectors' flag kinds
	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// The detectors' flag kinds the tests raise.
var flagSpurThrot, flagPowerOver, flagFanSpike = flagKind("spur_throt"), flagKind("power_over"), flagKind("fan_spike")

// flagKind returns the flag kind named name.
func flagKind(name string) reading.FlagKind {
	k, ok := reading.FlagKindNamed(name)
	if !ok {
		panic("no flag kind " + name)
	}
	return k
}

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func sample(at time.Duration, throttle uint64, flags ...reading.FlagKind) reading.Sample {
	s := reading.Sample{Time: t0.Add(at), Values: reading.Values{reading.Throttle: reading.Some(throttle), reading.TempC: reading.Some[uint64](50)}}
	for _, k := range flags {
		s.Flags.Add(reading.Flag{Kind: k})
	}
	return s
}

func TestObserve(t *testing.T) {
	const iv = 100 * time.Millisecond
	var g GPU
	for i, s := range []reading.Sample{
		sample(0, reading.ThrottleSwPowerCap),
		sample(100*time.Millisecond, reading.ThrottleSwPowerCap|reading.ThrottleHwSlowdown, flagSpurThrot),
		sample(200*time.Millisecond, reading.ThrottleSwPowerCap, flagSpurThrot, flagPowerOver),
		// A 5 s gap adds at most two intervals.
		sample(5200*time.Millisecond, reading.ThrottleSwPowerCap),
	} {
		g.Observe(&s, iv)
		if g.Sample.Time != s.Time || g.State.Kind != StateAnswering {
			t.Fatalf("sample %d: view holds %v in state %v", i, g.Sample.Time, g.State.Kind)
		}
	}
	if g.Samples != 4 || g.State.Since != t0 {
		t.Errorf("samples %d, ok since %v", g.Samples, g.State.Since)
	}
	want := map[string]time.Duration{"SwPowerCap": 400 * time.Millisecond, "HwSlowdown": 100 * time.Millisecond}
	for i, r := range reading.ThrottleReasons {
		if g.ThrottleTime[i] != want[r.Name] {
			t.Errorf("%s: %v, want %v", r.Name, g.ThrottleTime[i], want[r.Name])
		}
	}
	if g.FlagCount[flagSpurThrot] != 2 || g.FlagCount[flagPowerOver] != 1 {
		t.Errorf("flag counts %v", g.FlagCount)
	}
	if at := t0.Add(200 * time.Millisecond); g.FlagLast[flagSpurThrot] != at || g.FlagLast[flagPowerOver] != at ||
		!g.FlagLast[flagFanSpike].IsZero() {
		t.Errorf("flags last seen %v", g.FlagLast)
	}

	// Hung, then a failure, then answers again: throttle time does not
	// count the outage.
	g.Hung("nvmlDeviceGetTemperature", t0.Add(6*time.Second), 6*time.Second)
	g.Hung("nvmlDeviceGetTemperature", t0.Add(7*time.Second), 7*time.Second)
	if g.State.Kind != StateHung || g.State.Since != t0.Add(6*time.Second) || g.State.SinceMono != 6*time.Second {
		t.Errorf("hung state %+v", g.State)
	}
	f := reading.Sample{Time: t0.Add(8 * time.Second), Status: reading.StatusFailed, Err: "Unknown Error"}
	g.Observe(&f, iv)
	if g.State.Kind != StateFailing || g.State.Err != "Unknown Error" || g.Failures != 1 || g.Sample.Time != t0.Add(5200*time.Millisecond) {
		t.Errorf("failing: %+v, failures %d, last good sample %v", g.State, g.Failures, g.Sample.Time)
	}
	s := sample(8100*time.Millisecond, reading.ThrottleSwPowerCap)
	g.Observe(&s, iv)
	if g.ThrottleTime[2] != 400*time.Millisecond || g.State.Kind != StateAnswering {
		t.Errorf("after the outage: SwPowerCap %v, state %v", g.ThrottleTime[2], g.State.Kind)
	}
}

func TestXidCounts(t *testing.T) {
	var g GPU
	for i := range MaxXidCodes + 2 {
		g.Xid(uint64(i), t0, "x")
	}
	g.Xid(3, t0.Add(time.Second), "three")
	if g.Xids[3].Count != 2 || g.XidsOther != 2 || g.LastXid.Code != 3 || g.LastXid.Name != "three" {
		t.Errorf("xids %v other %d last %+v", g.Xids, g.XidsOther, g.LastXid)
	}
}

func TestStateNames(t *testing.T) {
	for k, want := range map[StateKind]string{StateNotStarted: "not started", StateAnswering: "ok", StateHung: "hung", StateLost: "lost", StateFailing: "failing", 99: "unknown"} {
		if k.String() != want {
			t.Errorf("%d: %q, want %q", k, k.String(), want)
		}
	}
}

// BenchmarkPublish is the pipeline's publish stage: one sample into a slot
// under its lock. It must not allocate.
func BenchmarkPublish(b *testing.B) {
	sl := NewSlot(reading.GPU{Index: 0, Name: "sim"})
	s := sample(0, reading.ThrottleSwPowerCap, flagPowerOver)
	b.ReportAllocs()
	for b.Loop() {
		s.Time = s.Time.Add(100 * time.Millisecond)
		sl.Update(func(g *GPU) { g.Observe(&s, 100*time.Millisecond) })
	}
}

// BenchmarkRead is what every reader pays per GPU: one copy under the lock.
func BenchmarkRead(b *testing.B) {
	sl := NewSlot(reading.GPU{Index: 0, Name: "sim"})
	var g GPU
	b.ReportAllocs()
	for b.Loop() {
		sl.Load(&g)
	}
}

// TestPublishedBoardServesTheLastHost: a published board's readers get the
// host view published last, as it was published (only Now is the time of
// the read), and the zero Host before the first.
func TestPublishedBoardServesTheLastHost(t *testing.T) {
	b := NewPublishedBoard(nil, func() time.Duration { return time.Minute })
	if v := b.View(); v.Host.Version != "" || v.Host.Now.IsZero() {
		t.Errorf("before the first publication: %+v", v.Host)
	}
	published := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	b.PublishHost(Host{Now: published, Version: "one", Counters: []Counter{{Name: CounterTicks, Value: 7}}})
	b.PublishHost(Host{Now: published, Version: "two", Counters: []Counter{{Name: CounterTicks, Value: 9}}})
	v := b.View()
	if n, _ := v.Host.Counter(CounterTicks); v.Host.Version != "two" || n != 9 {
		t.Errorf("host view %+v, want the one published last", v.Host)
	}
	if v.Host.Mono != time.Minute {
		t.Errorf("host view's Mono %v, want the board's clock's", v.Host.Mono)
	}
	if !v.Host.Now.After(published) {
		t.Errorf("Now %v is the publication's, not the read's", v.Host.Now)
	}
}
