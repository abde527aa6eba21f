package reading

import "strconv"

// FlagKind names one kind of flag written into a row's flags cell.
type FlagKind uint8

// The flags a row can carry. Their text forms follow the seed script where it
// had one, so existing grep habits keep working.
const (
	FlagFanSpike    FlagKind = iota + 1 // FAN_SPIKE
	FlagTempFanInv                      // TEMP_FAN_INV(<A>C@<B>%)
	FlagSpurThrot                       // SPUR_THROT(<A>%ofLim)
	FlagPowerOver                       // PWR+<A>W
	FlagTDPReduced                      // TDP_REDUCED(<A>W)
	FlagTDPRestored                     // TDP_RESTORED(<A>W)
	FlagXid                             // XID(<A>)
	FlagNVMLHung                        // NVML_HUNG(<S>,<A>ms) with A in ms
	FlagNVMLFailed                      // NVML_FAILED:<S>
	FlagGPULost                         // GPU_LOST
	FlagHealthWarn                      // HEALTH_WARN(<S>) with S a health reason
	FlagHealthCrit                      // HEALTH_CRIT(<S>) with S a health reason

	// NumFlagKinds bounds the kinds: arrays indexed by FlagKind have this length.
	NumFlagKinds = int(FlagHealthCrit) + 1
)

// Flag is one flag with its numeric arguments. S is used by NVML_HUNG (the
// function) and NVML_FAILED (the error); it must not contain ',' or '"'.
type Flag struct {
	Kind FlagKind
	A, B int64
	S    string
}

// MaxFlags is how many flags one row can carry; further ones are dropped and
// counted in Flags.Dropped.
const MaxFlags = 8

// Flags is a fixed-capacity list of flags; the zero value is empty. It never
// allocates.
type Flags struct {
	n       uint8
	Dropped uint8
	f       [MaxFlags]Flag
}

// Add appends a flag, or counts it as dropped when the list is full.
func (fs *Flags) Add(f Flag) {
	if int(fs.n) == MaxFlags {
		if fs.Dropped < 255 {
			fs.Dropped++
		}
		return
	}
	fs.f[fs.n] = f
	fs.n++
}

// Len returns the number of flags.
func (fs *Flags) Len() int { return int(fs.n) }

// At returns flag i.
func (fs *Flags) At(i int) Flag { return fs.f[i] }

// Has reports whether a flag of kind k is present.
func (fs *Flags) Has(k FlagKind) bool {
	for i := 0; i < int(fs.n); i++ {
		if fs.f[i].Kind == k {
			return true
		}
	}
	return false
}

// Reset empties the list.
func (fs *Flags) Reset() { *fs = Flags{} }

// AppendText appends the flags joined by '|' in their CSV form.
func (fs *Flags) AppendText(b []byte) []byte {
	for i := 0; i < int(fs.n); i++ {
		if i > 0 {
			b = append(b, '|')
		}
		b = fs.f[i].AppendText(b)
	}
	return b
}

// String returns the flags joined by '|'.
func (fs *Flags) String() string { return string(fs.AppendText(nil)) }

// AppendText appends the flag's CSV form.
func (f Flag) AppendText(b []byte) []byte {
	switch f.Kind {
	case FlagFanSpike:
		return append(b, "FAN_SPIKE"...)
	case FlagTempFanInv:
		return appendNum(appendNum(b, "TEMP_FAN_INV(", f.A, "C@"), "", f.B, "%)")
	case FlagSpurThrot:
		return appendNum(b, "SPUR_THROT(", f.A, "%ofLim)")
	case FlagPowerOver:
		return appendNum(b, "PWR+", f.A, "W")
	case FlagTDPReduced:
		return appendNum(b, "TDP_REDUCED(", f.A, "W)")
	case FlagTDPRestored:
		return appendNum(b, "TDP_RESTORED(", f.A, "W)")
	case FlagXid:
		return appendNum(b, "XID(", f.A, ")")
	case FlagNVMLHung:
		return appendNum(append(append(b, "NVML_HUNG("...), f.S...), ",", f.A, "ms)")
	case FlagNVMLFailed:
		return append(append(b, "NVML_FAILED:"...), f.S...)
	case FlagGPULost:
		return append(b, "GPU_LOST"...)
	case FlagHealthWarn:
		return append(append(append(b, "HEALTH_WARN("...), f.S...), ')')
	case FlagHealthCrit:
		return append(append(append(b, "HEALTH_CRIT("...), f.S...), ')')
	}
	return appendNum(b, "FLAG(", int64(f.Kind), ")")
}

// appendNum appends pre, n in decimal and post.
func appendNum(b []byte, pre string, n int64, post string) []byte {
	b = append(b, pre...)
	b = strconv.AppendInt(b, n, 10)
	return append(b, post...)
}
