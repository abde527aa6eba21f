// Package xid is NVIDIA's Xid catalog: what each Xid code the driver prints
// into the kernel log means, how bad it is, and what an operator should do
// about it.
//
// The names, mnemonics and resolution buckets follow NVIDIA's published
// catalog ("Analyzing Xid Errors with the Xid Catalog", docs.nvidia.com/deploy/
// xid-errors) and the driver's own nverror.h; the descriptions and actions are
// short paraphrases meant for a log line or a crash report, not a replacement
// for the catalog. The package does no I/O and knows nothing of the kernel log
// format; see package kmsg for that.
package xid

import (
	"slices"
	"strconv"
)

// Class says roughly where an Xid comes from, so a report can tell "the job
// crashed" apart from "the GPU or its firmware broke".
type Class uint8

// The classes. ClassUnknown is the zero value and is never used in the catalog.
const (
	ClassUnknown       Class = iota
	ClassApplication         // the workload faulted or was torn down; the GPU is usually fine
	ClassDriver              // driver or GPU firmware (GSP, PMU) error
	ClassMemory              // GPU memory / ECC event
	ClassInterconnect        // NVLink or C2C link error
	ClassHardware            // hardware or PCIe bus error: the GPU itself is suspect
	ClassInformational       // reports the consequence of other Xids, not a fault of its own
)

// String returns the class in words, e.g. "driver/firmware error".
func (c Class) String() string {
	switch c {
	case ClassApplication:
		return "application error"
	case ClassDriver:
		return "driver/firmware error"
	case ClassMemory:
		return "memory error"
	case ClassInterconnect:
		return "interconnect error"
	case ClassHardware:
		return "hardware/bus error"
	case ClassInformational:
		return "informational"
	}
	return "unknown"
}

// Info is what the catalog says about one Xid code.
type Info struct {
	Code        int
	Mnemonic    string // the driver's symbol, e.g. "GSP_RPC_TIMEOUT"
	Name        string // NVIDIA's short description, e.g. "GSP RPC timeout"
	Description string // what happened, in a sentence or two
	Action      string // what an operator should do, short
	Bucket      string // NVIDIA's immediate-action resolution bucket, e.g. "RESET_GPU"
	Class       Class
}

// Lookup returns the catalog entry for code; ok is false for a code the
// catalog does not cover (the driver may still print it: report the number).
func Lookup(code int) (Info, bool) {
	in, ok := catalog[code]
	if ok {
		in.Code = code
	}
	return in, ok
}

// Describe returns "Xid N: <name>", or "Xid N: unknown Xid" for a code the
// catalog does not cover.
func Describe(code int) string {
	name := "unknown Xid"
	if in, ok := Lookup(code); ok {
		name = in.Name
	}
	return "Xid " + strconv.Itoa(code) + ": " + name
}

// Codes returns every code the catalog covers, in ascending order.
func Codes() []int {
	codes := make([]int, 0, len(catalog))
	for c := range catalog {
		codes = append(codes, c)
	}
	slices.Sort(codes)
	return codes
}
