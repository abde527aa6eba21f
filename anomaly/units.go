package anomaly

// roundW converts milliwatts to watts, rounding half up.
func roundW(mw uint32) int64 { return (int64(mw) + 500) / 1000 }

// roundDeltaW converts a signed milliwatt difference to watts, rounding half
// away from zero, so +4.5 W and -4.5 W print as +5 and -5.
func roundDeltaW(dmw int64) int64 {
	if dmw < 0 {
		return -((-dmw + 500) / 1000)
	}
	return (dmw + 500) / 1000
}

// roundPct returns part as a percentage of whole, rounded half up; whole must
// not be zero.
func roundPct(part, whole uint32) int64 {
	return int64((200*uint64(part) + uint64(whole)) / (2 * uint64(whole)))
}
