package events

import (
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func TestDedup(t *testing.T) {
	xid := func(src reading.Source, at time.Duration, gpu int, code uint64) reading.Event {
		return reading.Event{Time: t0.Add(at), GPU: gpu, Kind: reading.EventXid, Source: src, Data: code}
	}
	nvml, kmsg, op := reading.SourceNVML, reading.SourceKmsg, reading.SourceOpEvent
	for _, tc := range []struct {
		name   string
		events []reading.Event
		dup    []bool // per event
	}{
		{"the other source within the window", []reading.Event{xid(nvml, 0, 0, 79), xid(kmsg, time.Second, 0, 79)}, []bool{false, true}},
		{"the kernel log first", []reading.Event{xid(kmsg, 0, 0, 79), xid(nvml, time.Second, 0, 79)}, []bool{false, true}},
		{"the same source again is a repeat", []reading.Event{xid(nvml, 0, 0, 79), xid(nvml, time.Second, 0, 79)}, []bool{false, false}},
		{"after the window", []reading.Event{xid(nvml, 0, 0, 79), xid(kmsg, 5*time.Second, 0, 79)}, []bool{false, false}},
		{"another GPU", []reading.Event{xid(nvml, 0, 0, 79), xid(kmsg, time.Second, 1, 79)}, []bool{false, false}},
		{"another code", []reading.Event{xid(nvml, 0, 0, 79), xid(kmsg, time.Second, 0, 119)}, []bool{false, false}},
		{"a second report from the first source is new again",
			[]reading.Event{xid(nvml, 0, 0, 79), xid(kmsg, time.Second, 0, 79), xid(nvml, 2*time.Second, 0, 79)}, []bool{false, true, false}},
		{"three sources are one report", []reading.Event{xid(op, 0, 0, 79), xid(nvml, time.Second, 0, 79), xid(kmsg, 2*time.Second, 0, 79)}, []bool{false, true, true}},
		{"the operational event last", []reading.Event{xid(kmsg, 0, 0, 79), xid(op, time.Second, 0, 79)}, []bool{false, true}},
		{"a source's second report among three is new again",
			[]reading.Event{xid(kmsg, 0, 0, 79), xid(op, time.Second, 0, 79), xid(op, 2*time.Second, 0, 79), xid(nvml, 3*time.Second, 0, 79)}, []bool{false, true, false, true}},
		{"a kernel record read after the fact takes no part", []reading.Event{
			xid(nvml, 0, 0, 79),
			{Time: t0.Add(time.Second), GPU: 0, Kind: reading.EventXid, Source: kmsg, Data: 79, Backlog: true},
			xid(kmsg, 2*time.Second, 0, 79),
		}, []bool{false, false, true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Dedup{Window: 5 * time.Second}
			for i, e := range tc.events {
				dup, first := d.Duplicate(e)
				if dup != tc.dup[i] {
					t.Fatalf("event %d: duplicate %v, want %v", i, dup, tc.dup[i])
				}
				if dup && first == e.Source {
					t.Errorf("event %d: duplicate of its own source %v", i, first)
				}
			}
		})
	}
}

func TestDedupForgetsOldReports(t *testing.T) {
	d := Dedup{Window: time.Second}
	for i := range maxSeen + 10 {
		d.Duplicate(reading.Event{Time: t0, GPU: i, Kind: reading.EventXid, Source: reading.SourceNVML, Data: 79})
	}
	d.Duplicate(reading.Event{Time: t0.Add(time.Hour), GPU: -1, Kind: reading.EventXid, Source: reading.SourceNVML, Data: 79})
	if n := len(d.seen); n != 1 {
		t.Errorf("%d reports held, want the newest only", n)
	}
}

func TestClockBurst(t *testing.T) {
	var b ClockBurst
	var alone, bursts []int
	for i := range 25 {
		// 20 events 10 ms apart, then 5 more after a pause: a new window.
		at := time.Duration(i) * 10 * time.Millisecond
		if i >= 20 {
			at += 2 * time.Second
		}
		n, one, burst := b.Add(t0.Add(at))
		if one {
			alone = append(alone, n)
		}
		if burst {
			bursts = append(bursts, i)
		}
	}
	if len(alone) != 6 || len(bursts) != 1 || bursts[0] != ClockBurstMark-1 {
		t.Errorf("written alone %v (want 1 2 3, twice), burst marked at %v (want the tenth event only)", alone, bursts)
	}
}

func TestKernelLines(t *testing.T) {
	var k LineLimit
	allowed := 0
	for i := range LineBurst + 5 {
		ok, held := k.Allow(1, "AER/corrected", t0.Add(time.Duration(i)*time.Second))
		if held != 0 {
			t.Fatalf("line %d: %d held in a window still running", i, held)
		}
		if ok {
			allowed++
		}
	}
	if allowed != LineBurst {
		t.Errorf("%d lines let through, want %d", allowed, LineBurst)
	}
	if ok, _ := k.Allow(0, "AER/corrected", t0.Add(20*time.Second)); !ok {
		t.Error("another GPU's line held back")
	}
	if ok, _ := k.Allow(1, "FALLEN_OFF_BUS", t0.Add(20*time.Second)); !ok {
		t.Error("another kind's line held back")
	}
	ok, held := k.Allow(1, "AER/corrected", t0.Add(LineWindow))
	if !ok || held != 5 {
		t.Errorf("first line of the next window: allowed %v, held %d, want true and 5", ok, held)
	}
}
