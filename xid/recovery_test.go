package xid

import "testing"

func TestRecoveryActionName(t *testing.T) {
	tests := []struct {
		name string
		v    uint64
		want string
	}{
		{"none", 0, "none"},
		{"GPU reset", 1, "GPU reset"},
		{"node reboot", 2, "node reboot"},
		{"drain P2P", 3, "drain P2P"},
		{"drain and reset", 4, "drain and reset"},
		{"first unknown", 5, "unknown (0x5)"},
		{"hex spelled lower case", 0xdeadbeef, "unknown (0xdeadbeef)"},
		{"max", ^uint64(0), "unknown (0xffffffffffffffff)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := RecoveryActionName(tt.v); got != tt.want {
				t.Errorf("RecoveryActionName(%d) = %q, want %q", tt.v, got, tt.want)
			}
		})
	}
}
