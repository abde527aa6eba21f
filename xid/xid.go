// Package xid is NVIDIA's Xid catalog: what each Xid code the driver prints
// into the kernel log means, how bad it is, and what an operator should do
// about it.
//
// Source: NVIDIA, "Analyzing Xid Errors with the Xid Catalog",
// https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html, as
// published when read on 2026-11-30 (the revision that lists Xids up to 172
// and decodes Xid 144-150 for drivers before and from R575). From it come the
// mnemonics, the names ("Description" column), the resolution buckets
// (immediate and investigatory action), which Xids apply to Hopper and
// Blackwell, the Xid 144-150 decode table, and the per-bucket workflows
// (WORKFLOW_XID_13, _31, _45, _48, XID_154, ...). Where the catalog gives no
// bucket (Xid 162 to 172 in that revision) the entry says so and Bucket is
// empty: nothing here invents one. The descriptions and the advice are our
// own short wording for a log line or a crash report; they are not NVIDIA's
// text and do not replace the catalog.
//
// The package does no I/O. It reads the text the driver prints after an Xid
// code (the NVLink 5 fields of Xid 144-150, the recovery action of Xid 154),
// because what that text means is catalog knowledge; taking a kernel log line
// apart (address, code, pid) is package kmsg's job.
package xid

import (
	"cmp"
	"slices"
	"strconv"
)

// Class says roughly where an Xid comes from, so a report can tell "the job
// crashed" apart from "the GPU or its firmware broke". The class is ours; the
// catalog has no such column.
type Class uint8

// The classes. ClassUnknown is the zero value and is never used in the catalog.
const (
	ClassUnknown       Class = iota
	ClassApplication         // the workload faulted or was torn down; the GPU is usually fine
	ClassDriver              // driver or GPU firmware (GSP, PMU, SEC2) error
	ClassMemory              // GPU memory / ECC event
	ClassInterconnect        // NVLink or C2C link error
	ClassHardware            // hardware, power or PCIe bus error: the GPU itself is suspect
	ClassInformational       // reports the consequence of other Xids, not a fault of its own
)

// classNames gives each class its words and its key in catalog.json.
var classNames = [...]struct{ key, words string }{
	ClassUnknown:       {"", "unknown"},
	ClassApplication:   {"application", "application error"},
	ClassDriver:        {"driver", "driver/firmware error"},
	ClassMemory:        {"memory", "memory error"},
	ClassInterconnect:  {"interconnect", "interconnect error"},
	ClassHardware:      {"hardware", "hardware/bus error"},
	ClassInformational: {"informational", "informational"},
}

// String returns the class in words, e.g. "driver/firmware error".
func (c Class) String() string {
	if int(c) < len(classNames) {
		return classNames[c].words
	}
	return "unknown"
}

// Info is what the catalog says about one Xid code. Name is the catalog's
// "Description" column, except for Xid 167 (whose column repeats the
// mnemonic) and 171/172 (whose column is a sentence saying they detail Xid
// 48), where it is the mnemonic in words.
type Info struct {
	Code        int
	Mnemonic    string // the driver's symbol, e.g. "GSP_RPC_TIMEOUT"
	Name        string // NVIDIA's short description, e.g. "GSP RPC Timeout"
	Bucket      string // NVIDIA's immediate action (resolution bucket), e.g. "RESET_GPU"; empty: NVIDIA gives none
	Investigate string // NVIDIA's investigatory action, e.g. "CONTACT_SUPPORT"; empty: NVIDIA gives none
	Description string // what happened, in a sentence or two (ours)
	Action      string // what an operator should do now (ours)
	Class       Class
}

// NoBucket is shown where NVIDIA's catalog gives no resolution bucket.
const NoBucket = "none given"

// BucketOrNone returns the immediate-action bucket, or NoBucket when the
// catalog gives none.
func (in Info) BucketOrNone() string { return cmp.Or(in.Bucket, NoBucket) }

// Lookup returns the catalog entry for code; ok is false for a code the
// catalog does not cover (the driver may still print it: report the number).
func Lookup(code int) (Info, bool) {
	in, ok := catalog[code]
	if ok {
		in.Code = code
	}
	return in, ok
}

// unknownName is the name of a code the catalog does not cover.
const unknownName = "unknown Xid"

// Name returns the catalog's name for code, or "unknown Xid" for a code the
// catalog does not cover.
func Name(code int) string {
	if in, ok := Lookup(code); ok {
		return in.Name
	}
	return unknownName
}

// Describe returns "Xid N: <name>", or "Xid N: unknown Xid" for a code the
// catalog does not cover.
func Describe(code int) string {
	return "Xid " + strconv.Itoa(code) + ": " + Name(code)
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
