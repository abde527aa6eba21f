package kclock

import (
	"strings"
	"testing"
	"time"
)

func TestKernelClockFitRoundTrip(t *testing.T) {
	f := Fit{Ref: 1000 * time.Second, Offset: 37 * time.Second, Rate: 300e-6, Records: 1}
	for _, mono := range []time.Duration{0, 999 * time.Second, 1000 * time.Second, 30 * 24 * time.Hour} {
		p := f.PrintkAt(mono)
		want := mono - 37*time.Second - time.Duration(300e-6*float64(mono-1000*time.Second))
		if d := p - want; d > time.Microsecond || d < -time.Microsecond {
			t.Errorf("PrintkAt(%v) = %v, want %v", mono, p, want)
		}
		if back := f.MonoAt(p); back-mono > time.Microsecond || mono-back > time.Microsecond {
			t.Errorf("MonoAt(PrintkAt(%v)) = %v", mono, back)
		}
	}
}

func TestKernelClockFitZeroIsIdentity(t *testing.T) {
	var f Fit
	if f.Valid() || f.PrintkAt(5*time.Second) != 5*time.Second || f.MonoAt(7*time.Second) != 7*time.Second {
		t.Errorf("the zero fit must map CLOCK_MONOTONIC to itself")
	}
}

func TestKernelClockFitDescribe(t *testing.T) {
	f := Fit{Ref: 100 * time.Second, Offset: 37000412 * time.Microsecond, Rate: 200e-6, Confirmed: 90 * time.Second, Records: 1234, Markers: 2}
	tests := []struct {
		name     string
		f        Fit
		readable bool
		want     string
	}{
		{"estimate", f, true, "printk clock = CLOCK_MONOTONIC - 37.000412 s, drift +200.0 ppm; last confirmed 10.0 s ago (1234 records, 2 of them our markers, 0 steps)"},
		{"printk ahead", Fit{Ref: 100 * time.Second, Offset: -2 * time.Second, Rate: -5e-6, Confirmed: 100 * time.Second, Records: 3, Steps: 1}, true,
			"printk clock = CLOCK_MONOTONIC + 2.000000 s, drift -5.0 ppm; last confirmed 0.0 s ago (3 records, 0 of them our markers, 1 steps)"},
		{"nothing seen", Fit{}, true, "no kernel log record seen yet: dmesg_time is on CLOCK_MONOTONIC, unchecked"},
		{"no kernel log", f, false, "no kernel log readable: dmesg_time is on CLOCK_MONOTONIC, unchecked"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.f.Describe(100*time.Second, tt.readable); got != tt.want {
				t.Errorf("Describe = %q\nwant       %q", got, tt.want)
			}
			if !strings.Contains(tt.want, "dmesg_time") && !strings.Contains(tt.want, "CLOCK_MONOTONIC") {
				t.Fatal("bad case")
			}
		})
	}
}
