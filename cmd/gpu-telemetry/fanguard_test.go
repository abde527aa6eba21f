package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/gofrs/flock"

	"github.com/gpu-telemetry/gpu-telemetry/runstate"
	"github.com/gpu-telemetry/gpu-telemetry/sampler/fakenvml"
)

// `fan-guard release` refuses while a logger holds the log dir's lock: the
// logger hands back its fans itself.
func TestFanGuardReleaseRefusesWhileALoggerRuns(t *testing.T) {
	dir := t.TempDir()
	if err := runstate.Write(dir, runstate.State{PID: 7, FanGuard: []runstate.FanHold{{UUID: "GPU-a", Fans: []int{0}}}}); err != nil {
		t.Fatal(err)
	}
	l, err := takeLock("--log-dir", filepath.Join(dir, logDirLock))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock()
	dev := fakenvml.NewDev()
	dev.UUID = "GPU-a"
	lib := &fakenvml.Lib{Devs: []*fakenvml.Dev{dev}}
	var out, errOut bytes.Buffer
	code := releaseFans(&FanGuardCLI{LogDir: dir, Timeout: Interval(time.Second)}, lib, &out, &errOut)
	if code != 1 || strings.Count(errOut.String(), "\n") != 1 || !strings.Contains(errOut.String(), "a logger is running (pid "+strconv.Itoa(os.Getpid())) {
		t.Errorf("exit %d, stderr %q", code, errOut.String())
	}
	if dev.Count("SetDefaultFanSpeed_v2") != 0 {
		t.Error("a fan handed back under a running logger")
	}
}

// Fans it cannot hand back (a GPU's handle fails, a UUID no GPU has) stay
// in run-state, each said with why, and the exit status is 1.
func TestFanGuardReleaseKeepsWhatItCouldNotHandBack(t *testing.T) {
	dir := t.TempDir()
	held := []runstate.FanHold{{UUID: "GPU-a", Fans: []int{0, 1}}, {UUID: "GPU-b", Fans: []int{0}}, {UUID: "GPU-gone", Fans: []int{1}}}
	if err := runstate.Write(dir, runstate.State{PID: 7, FanGuard: held}); err != nil {
		t.Fatal(err)
	}
	// A lock file left by a logger that stopped: free.
	fl := flock.New(filepath.Join(dir, logDirLock))
	if err := fl.Lock(); err != nil {
		t.Fatal(err)
	}
	fl.Unlock()
	a, b := fakenvml.NewDev(), fakenvml.NewDev()
	a.UUID, b.UUID = "GPU-a", "GPU-b"
	a.Set("SetDefaultFanSpeed_v2", nvml.ERROR_NO_PERMISSION)
	lib := &fakenvml.Lib{Devs: []*fakenvml.Dev{a, b}}
	var out, errOut bytes.Buffer
	code := releaseFans(&FanGuardCLI{LogDir: dir, Timeout: Interval(time.Second)}, lib, &out, &errOut)
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	for _, want := range []string{"GPU 0 GPU-a fan 0: not handed back", "GPU 1 GPU-b fan 0: handed back", "GPU-gone fan 1: not handed back: no GPU"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("stdout lacks %q:\n%s", want, out.String())
		}
	}
	st, _, err := runstate.Read(dir)
	if err != nil || len(st.FanGuard) != 2 || st.FanGuard[0].UUID != "GPU-a" || len(st.FanGuard[0].Fans) != 2 || st.FanGuard[1].UUID != "GPU-gone" {
		t.Errorf("run-state keeps %+v, %v; want GPU-a fans 0,1 and GPU-gone fan 1", st.FanGuard, err)
	}
}
