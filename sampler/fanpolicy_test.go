package sampler

import (
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
	"github.com/gpu-telemetry/gpu-telemetry/sampler/fakenvml"
)

// The fans' control policies are read as part of a sample (the first, then
// one every fanPolicyEvery), not when a spike snapshot asks for them:
// FanPolicies answers from memory, with the age of a policy not read by the
// latest sample.
func TestFanPoliciesReadWithTheSampleNowAndThen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := fakenvml.NewDev()
		g := openFake(t, &fakenvml.Lib{Devs: []*fakenvml.Dev{d}}).GPUs[0]
		var s reading.Sample
		sample := func() {
			g.Sample(&s)
			if s.Status != reading.StatusAnswered {
				t.Fatalf("sample: %v %s", s.Status, s.Err)
			}
		}
		if got, want := g.FanPolicies(), []string{"n/a", "n/a"}; !slices.Equal(got, want) {
			t.Errorf("before any sample: %q, want %q", got, want)
		}
		sample()
		auto := "auto (temperature-controlled)"
		if got, want := g.FanPolicies(), []string{auto, auto}; !slices.Equal(got, want) {
			t.Errorf("after the first sample: %q, want %q", got, want)
		}
		for range 12 {
			time.Sleep(100 * time.Millisecond)
			sample()
		}
		if n := d.Count("GetFanControlPolicy_v2"); n != 2 {
			t.Errorf("%d policy calls after 13 samples, want 2 (one per fan, the first sample)", n)
		}
		old := auto + " (read 1.2s before this sample)"
		if got, want := g.FanPolicies(), []string{old, old}; !slices.Equal(got, want) {
			t.Errorf("12 samples later: %q, want %q", got, want)
		}
		if n := d.Count("GetFanControlPolicy_v2"); n != 2 {
			t.Errorf("FanPolicies called the driver: %d policy calls, want 2", n)
		}
		time.Sleep(fanPolicyEvery)
		d.Set("GetFanControlPolicy_v2", nvml.ERROR_NOT_SUPPORTED)
		sample()
		if n := d.Count("GetFanControlPolicy_v2"); n != 4 {
			t.Errorf("%d policy calls after %v, want 4", n, fanPolicyEvery)
		}
		// Refused: absent, not the last value read.
		if got, want := g.FanPolicies(), []string{"n/a", "n/a"}; !slices.Equal(got, want) {
			t.Errorf("refused: %q, want %q", got, want)
		}
	})
}

// TestOldDriverFanSpeed: a driver without nvmlDeviceGetFanSpeed_v2 gives
// fan 0's speed through nvmlDeviceGetFanSpeed (the FanTable row's old
// drivers' call); the other fans' speeds are absent, their targets read;
// the probe times that call.
func TestOldDriverFanSpeed(t *testing.T) {
	d := fakenvml.NewDev()
	h := openFake(t, &fakenvml.Lib{Devs: []*fakenvml.Dev{d}, Missing: map[string]bool{"nvmlDeviceGetFanSpeed_v2": true}})
	var s reading.Sample
	h.GPUs[0].Sample(&s)
	if s.NumFans != 2 || s.Fans[0].Speed != reading.Some[uint32](30) || s.Fans[1].Speed.OK {
		t.Errorf("fans %d, speeds %+v %+v; want 2, fan 0 at 30 %% (nvmlDeviceGetFanSpeed), fan 1 absent", s.NumFans, s.Fans[0].Speed, s.Fans[1].Speed)
	}
	if !s.Fans[1].Target.OK {
		t.Errorf("fan 1's target absent: %+v", s.Fans[1].Target)
	}
	if n := d.Count("GetFanSpeed"); n != 1 {
		t.Errorf("nvmlDeviceGetFanSpeed made %d times in a sample, want 1", n)
	}
	var fns []Fn
	for _, pc := range probeCalls(h.GPUs) {
		if pc.c != cProcs {
			fns = append(fns, callFn[pc.c].fn)
		}
	}
	if !slices.Contains(fns, FnFanSpeed) || slices.Contains(fns, fnOf("nvmlDeviceGetFanSpeed_v2")) {
		t.Errorf("the probe times %v; want nvmlDeviceGetFanSpeed and not the missing _v2", fns)
	}
}

// The policies reach the sample as reading.FanTable's Policy row: the
// value read, carried forward by the samples that make no policy call,
// absent once the driver refuses it and on a driver without the function.
func TestFanPolicyIsAFanReading(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := fakenvml.NewDev()
		g := openFake(t, &fakenvml.Lib{Devs: []*fakenvml.Dev{d}}).GPUs[0]
		var s reading.Sample
		g.Sample(&s)
		if s.Fans[0].Policy != reading.Some[uint32](reading.FanPolicyAuto) || s.Fans[1].Policy != reading.Some[uint32](reading.FanPolicyAuto) {
			t.Errorf("first sample: policies %v %v, want auto (0)", s.Fans[0].Policy, s.Fans[1].Policy)
		}
		if r := d.SetFanControlPolicy(1, nvml.FAN_POLICY_MANUAL); r != nvml.SUCCESS {
			t.Fatalf("manual fan 1: %v", r)
		}
		time.Sleep(time.Second)
		s = reading.Sample{}
		g.Sample(&s)
		if s.Fans[1].Policy != reading.Some[uint32](reading.FanPolicyAuto) {
			t.Errorf("a second later: fan 1 %v, want auto carried (read every %v)", s.Fans[1].Policy, fanPolicyEvery)
		}
		time.Sleep(fanPolicyEvery)
		s = reading.Sample{}
		g.Sample(&s)
		if s.Fans[1].Policy != reading.Some[uint32](reading.FanPolicyManual) {
			t.Errorf("after %v: fan 1 %v, want manual (1)", fanPolicyEvery, s.Fans[1].Policy)
		}
		time.Sleep(fanPolicyEvery)
		d.Set("GetFanControlPolicy_v2", nvml.ERROR_NOT_SUPPORTED)
		g.Sample(&s)
		if s.Fans[0].Policy.OK || s.Fans[1].Policy.OK {
			t.Errorf("refused: %v %v, want absent", s.Fans[0].Policy, s.Fans[1].Policy)
		}
	})
	old := openFake(t, &fakenvml.Lib{Devs: []*fakenvml.Dev{fakenvml.NewDev()}, Missing: map[string]bool{"nvmlDeviceGetFanControlPolicy_v2": true}}).GPUs[0]
	var s reading.Sample
	old.Sample(&s)
	if s.Status != reading.StatusAnswered || s.Fans[0].Policy.OK {
		t.Errorf("old driver: %v, policy %v; want answered, absent", s.Status, s.Fans[0].Policy)
	}
}
