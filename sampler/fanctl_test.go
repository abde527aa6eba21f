package sampler

import (
	"errors"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpu-telemetry/gpu-telemetry/sampler/fakenvml"
)

// The fan setters classify the driver's answers once, here: a refusal (no
// permission, not supported, a driver without the function) is Refused, a
// lost GPU Lost; a missing symbol is never called.
func TestFanControlClassifies(t *testing.T) {
	for _, tc := range []struct {
		name           string
		missing        string
		ret            nvml.Return
		refused, lost  bool
		calls          int
		wantSpeedAfter uint32
	}{
		{"set", "", nvml.SUCCESS, false, false, 1, 78},
		{"no permission", "", nvml.ERROR_NO_PERMISSION, true, false, 1, 30},
		{"not supported", "", nvml.ERROR_NOT_SUPPORTED, true, false, 1, 30},
		{"lost", "", nvml.ERROR_GPU_IS_LOST, false, true, 1, 30},
		{"other", "", nvml.ERROR_UNKNOWN, false, false, 1, 30},
		{"symbol missing", "nvmlDeviceSetFanSpeed_v2", nvml.SUCCESS, true, false, 0, 30},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := fakenvml.NewDev()
			d.Set("SetFanSpeed_v2", tc.ret)
			g := openFake(t, &fakenvml.Lib{Devs: []*fakenvml.Dev{d}, Missing: map[string]bool{tc.missing: tc.missing != ""}}).GPUs[0]
			err := g.FanControl().SetSpeed(0, 78)
			var fe *CallError
			if (err == nil) != (tc.ret == nvml.SUCCESS && tc.missing == "") || (err != nil && (!errors.As(err, &fe) || fe.Refused() != tc.refused || fe.Lost() != tc.lost)) {
				t.Fatalf("SetSpeed = %v; want refused %v, lost %v", err, tc.refused, tc.lost)
			}
			if n := d.Count("SetFanSpeed_v2"); n != tc.calls {
				t.Errorf("%d calls, want %d", n, tc.calls)
			}
			if d.FanSpeed[0] != tc.wantSpeedAfter {
				t.Errorf("fan 0 at %d %%, want %d", d.FanSpeed[0], tc.wantSpeedAfter)
			}
		})
	}
}

// ReleaseFans hands back the fans named by UUID, or every fan with all,
// without a running logger, and shuts the driver down.
func TestReleaseFans(t *testing.T) {
	a, b := fakenvml.NewDev(), fakenvml.NewDev()
	a.UUID, b.UUID = "GPU-a", "GPU-b"
	lib := &fakenvml.Lib{Devs: []*fakenvml.Dev{a, b}}
	out, err := ReleaseFans(lib, map[string][]int{"GPU-b": {1}}, false, time.Second)
	if err != nil || len(out) != 1 || out[0].GPU != 1 || out[0].Fan != 1 || out[0].Err != nil {
		t.Fatalf("ReleaseFans = %+v, %v", out, err)
	}
	if a.Count("SetDefaultFanSpeed_v2") != 0 || b.Count("SetDefaultFanSpeed_v2") != 1 || lib.Shut != 1 {
		t.Errorf("calls: a %d, b %d, shutdown %d", a.Count("SetDefaultFanSpeed_v2"), b.Count("SetDefaultFanSpeed_v2"), lib.Shut)
	}
	out, err = ReleaseFans(lib, nil, true, time.Second)
	if err != nil || len(out) != 4 {
		t.Fatalf("--all: %+v, %v", out, err)
	}
	b.Set("SetDefaultFanSpeed_v2", nvml.ERROR_NO_PERMISSION)
	out, _ = ReleaseFans(lib, map[string][]int{"GPU-b": {0}}, false, time.Second)
	if len(out) != 1 || out[0].Err == nil {
		t.Errorf("refused hand-back: %+v", out)
	}
}

// ReleaseFans skips nothing in silence: a GPU whose handle fails and a UUID
// no GPU has are results with an error.
func TestReleaseFansSaysWhatItCouldNotHandBack(t *testing.T) {
	a, b := fakenvml.NewDev(), fakenvml.NewDev()
	a.UUID, b.UUID = "GPU-a", "GPU-b"
	lib := &fakenvml.Lib{Devs: []*fakenvml.Dev{a, b}, HandleRet: map[int]nvml.Return{1: nvml.ERROR_UNKNOWN}}
	out, err := ReleaseFans(lib, map[string][]int{"GPU-a": {0}, "GPU-b": {0, 1}}, false, time.Second)
	if err != nil || len(out) != 4 {
		t.Fatalf("ReleaseFans = %+v, %v; want GPU-a fan 0, GPU 1's handle, GPU-b fans 0 and 1", out, err)
	}
	if out[0].UUID != "GPU-a" || out[0].Err != nil || out[1].GPU != 1 || out[1].Fan != -1 || out[1].Err == nil ||
		out[2].UUID != "GPU-b" || out[2].GPU != -1 || out[2].Err == nil || out[3].Fan != 1 || out[3].Err == nil {
		t.Errorf("results %+v", out)
	}
}
