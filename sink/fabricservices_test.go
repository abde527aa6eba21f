package sink

import (
	"testing"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

func TestFabricServicesText(t *testing.T) {
	got := FabricServicesText([]reading.FabricService{
		{Name: "nvidia-fabricmanager", Exe: "nv-fabricmanager", PID: 812},
		{Name: "nvidia-imex", Exe: "nvidia-imex"},
		{Name: "nvlsm", Exe: "nvlsm"},
	})
	if want := "nvidia-fabricmanager running (pid 812), nvidia-imex not running, nvlsm not running"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
