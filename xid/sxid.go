package xid

import "strconv"

// SXid is an NVSwitch error code, as the NVSwitch driver logs it to the
// kernel ("nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 12028, ..."): the
// switch's, not a GPU's. SXidInfo is the little the catalog says of one.
type SXidInfo struct {
	Name string
	// Fatal: NVIDIA lists it among the fatal (or always fatal) NVSwitch
	// SXids: the switch port's traffic is lost (Xid 74 on the GPUs
	// behind it); a restart of the system resets the switch.
	Fatal bool
}

// sxids is a small catalog of the common SXids, from NVIDIA's Fabric
// Manager User Guide (DU-09883-001, appendix "NVSwitch SXid Errors":
// non-fatal, fatal and always fatal), as gpud's catalog
// (leptonai/gpud pkg/nvidia-query/sxid) also carries them. A code not
// listed is written as its number, never dropped.
var sxids = map[int]SXidInfo{
	11004: {"ingress invalid ACL", false}, // only from an incorrect partition configuration; NVLink traffic stalls (Xid 45 on the GPUs)
	11012: {"single-bit ECC error", false},
	11021: {"single-bit ECC error", false},
	11022: {"single-bit ECC error", false},
	11023: {"single-bit ECC error", false},
	12021: {"single-bit ECC error", false},
	12023: {"single-bit ECC error", false},
	15008: {"single-bit ECC error", false},
	15011: {"single-bit ECC error", false},
	19049: {"single-bit ECC error", false},
	14017: {"TS ATO timeout", true},
	15001: {"route buffer over/underflow", true},
	15006: {"route transdone over/underflow", true},
	15009: {"route GLT DBE", true},
	15010: {"route parity", true},
	15012: {"route incoming DBE", true},
	15013: {"route credit parity", true},
	19047: {"NCISOC header ECC DBE", true},
	19048: {"NCISOC data ECC DBE", true},
	19054: {"header RAM ECC DBE", true},
	19056: {"DAT0 RAM ECC DBE", true},
	19058: {"DAT1 RAM ECC DBE", true},
}

// LookupSXid returns the catalog's entry for code.
func LookupSXid(code int) (SXidInfo, bool) {
	i, ok := sxids[code]
	return i, ok
}

// SXidName names code: the catalog's name, else "SXid N".
func SXidName(code int) string {
	if i, ok := sxids[code]; ok {
		return i.Name
	}
	return "SXid " + strconv.Itoa(code)
}
