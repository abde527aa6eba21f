package anomaly

import (
	"log/slog"
	"strconv"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// NoticeKind names one kind of log notice. Each kind has its own cooldown.
type NoticeKind uint8

// Notice kinds, in the order Observe produces them.
const (
	NoticeThrottleChange   NoticeKind = iota + 1 // the clocks event reasons mask changed
	NoticeTDPChange                              // the power limit changed
	NoticeFanInversion                           // hot GPU, slow fans
	NoticeSpuriousThrottle                       // SwPowerCap at low power
	NoticePowerOver                              // power above the limit by more than the flag threshold
)

// noticeDef is how one kind of notice is logged.
type noticeDef struct {
	name, msg string
	level     slog.Level
}

// noticeKinds declares each kind once, indexed by NoticeKind: its name in
// logs, its message, and its level: Warn for anomalies, Info for changes an
// operator may have made on purpose. Index 0 is what an unknown kind gets.
var noticeKinds = [...]noticeDef{
	0:                      {"unknown", "anomaly: unknown notice", slog.LevelWarn},
	NoticeThrottleChange:   {"throttle_change", "throttle reasons changed", slog.LevelInfo},
	NoticeTDPChange:        {"tdp_change", "power limit changed", slog.LevelInfo},
	NoticeFanInversion:     {"fan_inversion", "anomaly: GPU hot but fans slow", slog.LevelWarn},
	NoticeSpuriousThrottle: {"spurious_throttle", "anomaly: SwPowerCap throttle at low power", slog.LevelWarn},
	NoticePowerOver:        {"power_over", "anomaly: power above limit", slog.LevelWarn},
}

// numNoticeKinds is how many notice kinds there are: at most one of each per sample.
const numNoticeKinds = len(noticeKinds) - 1

// def returns the kind's entry in noticeKinds, entry 0 for an unknown kind.
func (k NoticeKind) def() noticeDef {
	if int(k) < len(noticeKinds) {
		return noticeKinds[k]
	}
	return noticeKinds[0]
}

// String returns the kind's name as used in logs.
func (k NoticeKind) String() string { return k.def().name }

// Notice is one log line that Observe says is due. Only the fields of its kind
// are set; it holds no pointers, so a Result can carry it without allocating.
type Notice struct {
	Kind NoticeKind
	GPU  int
	// Suppressed is how many notices of this kind the cooldown held back since
	// the previous one was logged.
	Suppressed uint64

	TempC  uint32 // NoticeFanInversion: GPU temperature
	FanPct uint32 // NoticeFanInversion: fastest fan's speed

	PowerMW uint32 // NoticeSpuriousThrottle, NoticePowerOver: power draw
	LimitMW uint32 // NoticeSpuriousThrottle, NoticePowerOver: power limit

	TDP TDPChange // NoticeTDPChange

	FromMask uint64 // NoticeThrottleChange: previous clocks event reasons
	ToMask   uint64 // NoticeThrottleChange: current clocks event reasons
}

// Level returns the level to log the notice at: Warn for anomalies, Info for
// changes an operator may have made on purpose.
func (n Notice) Level() slog.Level { return n.Kind.def().level }

// LogAttrs returns the message and attributes to log the notice with. It
// allocates; notices are rare (at most one per kind per GPU per cooldown).
func (n Notice) LogAttrs() (msg string, attrs []slog.Attr) {
	msg = n.Kind.def().msg
	attrs = make([]slog.Attr, 0, 8)
	attrs = append(attrs, slog.Int("gpu", n.GPU))
	switch n.Kind {
	case NoticeThrottleChange:
		attrs = append(attrs,
			slog.String("from", reading.ThrottleNames(n.FromMask)),
			slog.String("to", reading.ThrottleNames(n.ToMask)),
			slog.String("from_mask", hexMask(n.FromMask)),
			slog.String("to_mask", hexMask(n.ToMask)))
	case NoticeTDPChange:
		attrs = append(attrs,
			slog.Int64("from_w", n.TDP.FromW()),
			slog.Int64("to_w", n.TDP.ToW()),
			slog.Int64("delta_w", n.TDP.DeltaW()))
	case NoticeFanInversion:
		attrs = append(attrs,
			slog.Int64("temp_c", int64(n.TempC)),
			slog.Int64("fan_pct", int64(n.FanPct)))
	case NoticeSpuriousThrottle:
		attrs = append(attrs,
			slog.Int64("power_w", roundW(n.PowerMW)),
			slog.Int64("limit_w", roundW(n.LimitMW)),
			slog.Int64("pct_of_limit", pctOrZero(n.PowerMW, n.LimitMW)))
	case NoticePowerOver:
		attrs = append(attrs,
			slog.Int64("power_w", roundW(n.PowerMW)),
			slog.Int64("limit_w", roundW(n.LimitMW)),
			slog.Int64("over_w", roundDeltaW(int64(n.PowerMW)-int64(n.LimitMW))))
	default:
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

// pctOrZero is roundPct that tolerates a zero whole.
func pctOrZero(part, whole uint32) int64 {
	if whole == 0 {
		return 0
	}
	return roundPct(part, whole)
}
