package xid

import (
	"cmp"
	"strconv"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// Explanation is what the catalog makes of one Xid report: the entry for its
// code, and what the text the driver printed after the code adds to it (the
// NVLink 5 decode of Xid 144-150, the recovery action of Xid 154).
type Explanation struct {
	Info
	Known  bool   // the catalog has the code
	Decode string // what the text decoded to; empty when it added nothing
	Action string // what to do about this report: the decode's advice, else the entry's
	Bucket string // NVIDIA's immediate action for this report; empty: none given
	// LinkFatal is set when the NVLink 5 decode's severity is link fatal:
	// the GPU is in the drain-and-reset state (the decode's Severity column).
	LinkFatal bool
	// Recovery is, for Xid 154 whose text gave it, the new recovery action
	// (HasRecovery says it did).
	Recovery    uint64
	HasRecovery bool
}

// unknownAction is the advice for a code the catalog does not cover.
const unknownAction = "Not in this catalog: look the code up in NVIDIA's Xid catalog (docs.nvidia.com/deploy/xid-errors) and keep nvidia-bug-report.sh output."

// Detail reads what the driver's text after Xid code (after "N, " on the
// kernel log line: package kmsg's XidReport.Text) says that the catalog
// uses: for Xid 154, the new recovery action and the driver's words for it
// (ParseRecovery). Text is text; the process the driver blamed is its
// parser's (kmsg.ParseDriverXid), which fills PID and ProcessName.
func Detail(code int, text string) reading.XidDetail {
	d := reading.XidDetail{Text: text}
	if code == RecoveryXid {
		if v, words, ok := ParseRecovery(text); ok {
			d.RecoveryAction, d.RecoveryWords = reading.Some(v), words
		}
	}
	return d
}

// ExplainDetail explains Xid code as its report was taken apart (d: the
// text's NVLink 5 fields are decoded here, Xid 154's recovery action was
// read by Detail); d is zero for a report from NVML.
func ExplainDetail(code int, d reading.XidDetail) Explanation {
	in, ok := Lookup(code)
	if !ok {
		in = Info{Code: code, Name: unknownName}
	}
	e := Explanation{Info: in, Known: ok, Action: in.Action, Bucket: in.Bucket}
	if !ok {
		e.Action = unknownAction
		return e
	}
	switch {
	case isNVLink5(code):
		if nd, ok := DecodeNVLink5(code, d.Text); ok {
			e.Decode, e.Action, e.Bucket = nd.String(), nd.Action(), nd.Bucket
			e.LinkFatal = nd.Severity == sevLinkFatal.String()
		} else if d.Text != "" {
			e.Decode = "fields not decoded (no row in NVIDIA's Xid 144-150 decode for them)"
		}
	case code == RecoveryXid:
		if v, ok := d.RecoveryAction.Get(); ok {
			e.Recovery, e.HasRecovery = v, true
			e.Decode = RecoveryDescribe(v, d.RecoveryWords)
			e.Action = RecoveryAdvice(v, d.RecoveryWords)
		}
	}
	return e
}

// BucketOrNone returns NVIDIA's immediate action for this report (the
// decode's when the text decoded, else the entry's), or NoBucket when there is
// none. It hides Info.BucketOrNone, which is the catalog entry's.
func (e Explanation) BucketOrNone() string { return cmp.Or(e.Bucket, NoBucket) }

// RecoveryDescribe is recovery action v on one line: the number, our name for
// it (0 to 4 only) and the driver's words, e.g. `0x3 drain P2P (driver: "Drain
// P2P")` or `0x5 (driver: "IMEX Domain Recovery")`.
func RecoveryDescribe(v uint64, words string) string {
	s := "0x" + strconv.FormatUint(v, 16)
	if v < uint64(len(recoveryActions)) {
		s += " " + recoveryActions[v].name
	} else {
		s += " not known to this version"
	}
	if words != "" {
		s += " (driver: " + strconv.Quote(words) + ")"
	}
	return s
}

// Fields returns the report's events.log fields as alternating keys and
// values (unquoted: the writer quotes), in this order: xid, name, then for a
// known code class and bucket, action, decode (when the text decoded), and
// recovery (Xid 154's new action, the number, when its text gave one).
func (e Explanation) Fields() []string {
	kv := []string{"xid", strconv.Itoa(e.Code), "name", e.Name}
	if e.Known {
		kv = append(kv, "class", e.Class.String(), "bucket", e.BucketOrNone())
	}
	kv = append(kv, "action", e.Action)
	if e.Decode != "" {
		kv = append(kv, "decode", e.Decode)
	}
	if e.HasRecovery {
		kv = append(kv, "recovery", strconv.FormatUint(e.Recovery, 10))
	}
	return kv
}

// Reason is the report on one line for a crash snapshot's header and the
// daemon's log: "Xid 46: GPU stopped processing (kmsg). Reset the GPU ...
// [NVIDIA: RESET_GPU]", with the decode after the source when there is one.
// src names where the report came from.
func (e Explanation) Reason(src string) string {
	s := Describe(e.Code) + " (" + src + ")"
	if e.Decode != "" {
		s += ": " + e.Decode
	}
	s += ". " + e.Action
	if e.Known {
		s += " [NVIDIA: " + e.BucketOrNone() + "]"
	}
	return s
}

// RecoveryFields returns a recovery action report (Xid 154's new action, or
// NVML's recovery action event) as alternating keys and values for
// events.log, unquoted: action (the
// number), meaning (our name, or "unknown (0xN)" above 4), driver (the
// driver's words, when the report carried any) and advice.
func RecoveryFields(v uint64, words string) []string {
	kv := []string{"action", strconv.FormatUint(v, 10), "meaning", RecoveryActionName(v)}
	if words != "" {
		kv = append(kv, "driver", words)
	}
	return append(kv, "advice", RecoveryAdvice(v, words))
}

// RecoveryReason is a recovery action report on one line for a crash
// snapshot's header: "GPU recovery action 3: drain P2P (kmsg). Stop the ...".
func RecoveryReason(v uint64, words, src string) string {
	s := "GPU recovery action " + strconv.FormatUint(v, 10) + ": " + RecoveryActionName(v)
	if words != "" {
		s += ", driver: " + strconv.Quote(words)
	}
	return s + " (" + src + "). " + RecoveryAdvice(v, words)
}
