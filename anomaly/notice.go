package anomaly

import (
	"log/slog"
	"strconv"
)

// NoticeKind names one kind of log notice: 1 + the index of the detector
// that gives it in Detectors. Each kind has its own cooldown.
type NoticeKind uint8

// def returns the kind's detector, nil for an unknown kind.
func (k NoticeKind) def() *Def {
	if k == 0 || int(k) > len(Detectors) {
		return nil
	}
	return Detectors[k-1]
}

// String returns the kind's name as used in logs.
func (k NoticeKind) String() string {
	if d := k.def(); d != nil {
		return d.Name
	}
	return "unknown"
}

// Notice is one log line that Observe says is due. It holds no pointers, so
// a Result can carry it without allocating.
type Notice struct {
	Kind NoticeKind
	GPU  int
	// Suppressed is how many notices of this kind the cooldown held back since
	// the previous one was logged.
	Suppressed uint64
	// V holds the finding's values (Finding.V), which the detector's
	// NoticeDef.Attrs writes.
	V [2]uint64
}

// Level returns the level to log the notice at: Warn for anomalies, Info for
// changes an operator may have made on purpose.
func (n Notice) Level() slog.Level {
	if d := n.Kind.def(); d != nil {
		return d.Notice.Level
	}
	return slog.LevelWarn
}

// LogAttrs returns the message and attributes to log the notice with. It
// allocates; notices are rare (at most one per kind per GPU per cooldown).
func (n Notice) LogAttrs() (msg string, attrs []slog.Attr) {
	attrs = []slog.Attr{slog.Int("gpu", n.GPU)}
	if d := n.Kind.def(); d != nil {
		msg = d.Notice.Msg
		attrs = append(attrs, d.Notice.Attrs(n.V)...)
	} else {
		msg = "anomaly: unknown notice"
		attrs = append(attrs, slog.Int("kind", int(n.Kind)))
	}
	if n.Suppressed > 0 {
		attrs = append(attrs, slog.Uint64("suppressed", n.Suppressed))
	}
	return msg, attrs
}

// hexMask formats a clocks event reasons mask as the CSV does: 0x0004.
func hexMask(m uint64) string {
	s := strconv.FormatUint(m, 16)
	for len(s) < 4 {
		s = "0" + s
	}
	return "0x" + s
}
