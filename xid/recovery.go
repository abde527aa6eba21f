package xid

import "strconv"

// RecoveryActionName names a GPU recovery action: the value NVML reports as
// nvmlDeviceGpuRecoveryAction_t and the driver prints in Xid 154 after "to".
// Values it does not know come back as "unknown (0xN)".
//
// Only 0 to 4 are named: the driver's own words for them differ between
// releases ("GPU Reset Required", "PF FLR"; "Node Reboot Required", "OS
// Reboot"), so these names are ours and stable. Newer NVML headers add values
// above 4; they read as unknown until they are confirmed in a released driver.
func RecoveryActionName(v uint64) string {
	switch v {
	case 0:
		return "none"
	case 1:
		return "GPU reset"
	case 2:
		return "node reboot"
	case 3:
		return "drain P2P"
	case 4:
		return "drain and reset"
	}
	return "unknown (0x" + strconv.FormatUint(v, 16) + ")"
}
