package reading

import "testing"

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
