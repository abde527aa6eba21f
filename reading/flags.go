package reading

import "strconv"

// FlagKind names one kind of flag written into a row's flags cell. The
// kinds reading raises are constants; a detector's kinds are registered by
// package anomaly (RegisterFlagKinds), so that a detector is declared in one file.
type FlagKind uint8

// FlagDef declares one kind of flag.
type FlagDef struct {
	// Name is its label in metrics and status: "spur_throt".
	Name string
	// Text is its CSV form, with {A}, {B} and {S} standing for the flag's
	// arguments: "SPUR_THROT({A}%ofLim)". The forms follow the Python logger
	// (gpu-telemetry-deep.py) where it had one, so grep habits keep working.
	Text string
	// Anomaly: a detector's finding, a warning in `gpu-telemetry status`.
	// Xid, hang, failure and loss flags are critical through the GPU's state
	// instead.
	Anomaly bool
}

// The flags reading's producers raise (the sampler, the monitor, the
// health verdict, the fan guard).
const (
	FlagXid         FlagKind = iota + 1 // XID(<A>)
	FlagNVMLHung                        // NVML_HUNG(<S>,<A>ms) with A in ms
	FlagNVMLFailed                      // NVML_FAILED:<S>
	FlagGPULost                         // GPU_LOST
	FlagHealthWarn                      // HEALTH_WARN(<S>) with S a health reason
	FlagHealthCrit                      // HEALTH_CRIT(<S>) with S a health reason
	FlagFanGuard                        // FAN_GUARD(<A>%): the fan guard holds the GPU's fans at A % (the highest)
	numOwnFlagKinds = int(FlagFanGuard)

	// NumFlagKinds bounds the kinds: arrays indexed by FlagKind have this
	// length (the live view keeps a count and a time per kind and GPU). It
	// leaves room for a dozen more detectors' kinds; RegisterFlagKinds panics when
	// it must grow.
	NumFlagKinds = 24
)

// flagDefs holds every kind's declaration, indexed by FlagKind; the kinds
// after numOwnFlagKinds are registered ones.
var flagDefs = [NumFlagKinds]FlagDef{
	FlagXid:        {Name: "xid", Text: "XID({A})"},
	FlagNVMLHung:   {Name: "nvml_hung", Text: "NVML_HUNG({S},{A}ms)"},
	FlagNVMLFailed: {Name: "nvml_failed", Text: "NVML_FAILED:{S}"},
	FlagGPULost:    {Name: "gpu_lost", Text: "GPU_LOST"},
	FlagHealthWarn: {Name: "health_warning", Text: "HEALTH_WARN({S})"},
	FlagHealthCrit: {Name: "health_critical", Text: "HEALTH_CRIT({S})"},
	FlagFanGuard:   {Name: "fan_guard", Text: "FAN_GUARD({A}%)"},
}

// numFlagKinds is 1 + the highest kind declared.
var numFlagKinds = numOwnFlagKinds + 1

// RegisterFlagKinds registers the detectors' kinds of flag, in the order
// outputs list them, in place of those registered before, and returns
// their kinds in defs' order. Package anomaly calls it while packages
// initialize, each time a detector registers, never later: the kinds are
// read without a lock. It panics when a name is taken or more than
// NumFlagKinds kinds would be in use, programming errors that every test
// finds.
func RegisterFlagKinds(defs []FlagDef) []FlagKind {
	if numOwnFlagKinds+1+len(defs) > NumFlagKinds {
		panic("reading: too many flag kinds")
	}
	numFlagKinds = numOwnFlagKinds + 1
	kinds := make([]FlagKind, len(defs))
	for i, d := range defs {
		if _, ok := FlagKindNamed(d.Name); ok || d.Name == "" {
			panic("reading: flag kind " + strconv.Quote(d.Name) + " registered twice or unnamed")
		}
		kinds[i] = FlagKind(numFlagKinds)
		flagDefs[kinds[i]] = d
		numFlagKinds++
	}
	return kinds
}

// FlagKinds returns every kind in the order outputs list them: the
// registered kinds (the detectors') in the order registered, then reading's own.
func FlagKinds() []FlagKind {
	out := make([]FlagKind, 0, numFlagKinds-1)
	for k := numOwnFlagKinds + 1; k < numFlagKinds; k++ {
		out = append(out, FlagKind(k))
	}
	for k := 1; k <= numOwnFlagKinds; k++ {
		out = append(out, FlagKind(k))
	}
	return out
}

// FlagKindNamed returns the kind whose Name is name.
func FlagKindNamed(name string) (FlagKind, bool) {
	for k := 1; k < numFlagKinds; k++ {
		if flagDefs[k].Name == name {
			return FlagKind(k), true
		}
	}
	return 0, false
}

// Def returns the kind's declaration; the zero FlagDef for an unknown kind.
func (k FlagKind) Def() FlagDef {
	if int(k) < numFlagKinds {
		return flagDefs[k]
	}
	return FlagDef{}
}

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

// AppendText appends the flag's CSV form (FlagDef.Text), FLAG(<kind>) for
// an unknown kind. It does not allocate.
func (f Flag) AppendText(b []byte) []byte {
	t := f.Kind.Def().Text
	if t == "" {
		b = strconv.AppendInt(append(b, "FLAG("...), int64(f.Kind), 10)
		return append(b, ')')
	}
	for i := 0; i < len(t); i++ {
		if t[i] == '{' && i+2 < len(t) && t[i+2] == '}' {
			switch t[i+1] {
			case 'A':
				b, i = strconv.AppendInt(b, f.A, 10), i+2
				continue
			case 'B':
				b, i = strconv.AppendInt(b, f.B, 10), i+2
				continue
			case 'S':
				b, i = append(b, f.S...), i+2
				continue
			}
		}
		b = append(b, t[i])
	}
	return b
}
