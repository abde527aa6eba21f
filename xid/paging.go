package xid

import "slices"

// paging are the Xids a fleet is paged for: the shipped alert rules page on
// exactly these (GPUCriticalXid, and GPUFellOffTheBus for 79, GPUGSPTimeout
// for 119, GPURecoveryActionRequested for 154), and the fleet dashboard
// counts exactly these as "critical now" (test/fleet checks both against
// this list). They are the Xids NVIDIA's catalog answers with a GPU reset
// or a node restart, or with its workflows that end in one, which stop the
// GPU's work: double-bit ECC (48), micro-controller halt (62), row remap
// failure (64), NVLink (74), fallen off the bus (79), contained and
// uncontained ECC (94, 95), GSP timeout and error (119, 120), unrecovered
// ECC (140), and the driver asking for a recovery action (154). Not here:
// application Xids (13, 31, 43: the job's fault), and those NVIDIA says to
// ignore, the row remapping event (63) and a high single-bit ECC rate (92),
// which the health counters report as warnings (remap pending, SBE rate).
var paging = []int{48, 62, 64, 74, 79, 94, 95, 119, 120, 140, 154}

// Paging returns the Xids that page, sorted (see paging).
func Paging() []int { return slices.Clone(paging) }
