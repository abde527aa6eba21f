package fanguard

import (
	"testing"

	_ "github.com/gpu-telemetry/gpu-telemetry/anomaly" // registers the detectors' flags
	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// The guard engages on the fan inversion detector's flag, found by name:
// the name must be the detector's.
func TestInversionFlagIsTheDetectors(t *testing.T) {
	k, ok := reading.FlagKindNamed(inversionFlag)
	if !ok || !k.Def().Anomaly {
		t.Fatalf("no anomaly flag named %q: %+v", inversionFlag, k.Def())
	}
}
