package reading

import (
	"encoding/binary"
	"testing"
)

// healthyMask is a B200's mask with every field reported and nothing wrong:
// bandwidth not degraded, no route recovery, routes healthy, no
// access-timeout recovery, configuration correct, partition assigned, GFM
// connected.
const healthyMask = 2 | 2<<2 | 2<<4 | 2<<6 | 1<<8 | 1<<12 | 1<<14

func TestFabricHealthDecode(t *testing.T) {
	for _, tc := range []struct {
		name      string
		mask      uint64
		text      string
		unhealthy bool
		config    string
	}{
		{"healthy", healthyMask,
			"degraded_bandwidth:false,route_recovery:false,route_unhealthy:false,access_timeout_recovery:false,incorrect_configuration:none,partition_assigned:true,global_fabric_manager:connected", false, ""},
		{"nothing reported", 0,
			"degraded_bandwidth:not_supported,route_recovery:not_supported,route_unhealthy:not_supported,access_timeout_recovery:not_supported,incorrect_configuration:not_supported,partition_assigned:not_supported,global_fabric_manager:not_supported", false, ""},
		{"route unhealthy, degraded", healthyMask&^(3|3<<4) | 1 | 1<<4,
			"degraded_bandwidth:true,route_recovery:false,route_unhealthy:true,access_timeout_recovery:false,incorrect_configuration:none,partition_assigned:true,global_fabric_manager:connected", true, ""},
		{"insufficient nvlinks", healthyMask&^(0xf<<8) | 5<<8,
			"degraded_bandwidth:false,route_recovery:false,route_unhealthy:false,access_timeout_recovery:false,incorrect_configuration:insufficient_nvlinks,partition_assigned:true,global_fabric_manager:connected", false, "insufficient_nvlinks"},
		{"unknown values keep their number", 3 | 0xf<<8,
			"degraded_bandwidth:3,route_recovery:not_supported,route_unhealthy:not_supported,access_timeout_recovery:not_supported,incorrect_configuration:15,partition_assigned:not_supported,global_fabric_manager:not_supported", false, "15"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := FabricHealthText(tc.mask); got != tc.text {
				t.Errorf("FabricHealthText(%#x) =\n %s\nwant\n %s", tc.mask, got, tc.text)
			}
			if got := FabricTrue(tc.mask, FabricRouteUnhealthy); got != tc.unhealthy {
				t.Errorf("route unhealthy = %v, want %v", got, tc.unhealthy)
			}
			if got := FabricBadConfig(tc.mask); got != tc.config {
				t.Errorf("FabricBadConfig = %q, want %q", got, tc.config)
			}
		})
	}
}

func TestFabricNames(t *testing.T) {
	for v, want := range []string{"not_supported", "not_started", "in_progress", "completed", "state_4"} {
		if got := FabricStateName(uint64(v)); got != want {
			t.Errorf("FabricStateName(%d) = %q, want %q", v, got, want)
		}
	}
	for v, want := range []string{"not_supported", "healthy", "unhealthy", "limited_capacity", "summary_4"} {
		if got := FabricSummaryName(uint64(v)); got != want {
			t.Errorf("FabricSummaryName(%d) = %q, want %q", v, got, want)
		}
	}
	if FabricStatusText(0) != "success" || FabricStatusText(3) != "error_3" {
		t.Errorf("FabricStatusText: %q %q", FabricStatusText(0), FabricStatusText(3))
	}
}

// TestFabricClusterUUID: the cluster UUID's two 8-byte halves, as the
// sampler copies them (native order), give the bytes in order as the
// canonical text; none when a half is absent or the UUID is all zero (the
// GPU in no cluster).
func TestFabricClusterUUID(t *testing.T) {
	var u [16]byte
	for i := range u {
		u[i] = byte(i) | 0xa0
	}
	lo, hi := binary.NativeEndian.Uint64(u[:8]), binary.NativeEndian.Uint64(u[8:])
	for _, tc := range []struct {
		name   string
		lo, hi Opt[uint64]
		want   string
	}{
		{"a cluster", Some(lo), Some(hi), "a0a1a2a3-a4a5-a6a7-a8a9-aaabacadaeaf"},
		{"first half zero", Some[uint64](0), Some(hi), "00000000-0000-0000-a8a9-aaabacadaeaf"},
		{"all zero: no cluster", Some[uint64](0), Some[uint64](0), ""},
		{"a half absent", Some(lo), Opt[uint64]{}, ""},
		{"not read", Opt[uint64]{}, Opt[uint64]{}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var v Values
			v[FabricCluster0], v[FabricCluster8] = tc.lo, tc.hi
			got, ok := FabricClusterUUID(&v)
			if got != tc.want || ok != (tc.want != "") {
				t.Errorf("FabricClusterUUID = %q, %v; want %q", got, ok, tc.want)
			}
		})
	}
}
