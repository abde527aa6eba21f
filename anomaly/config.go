package anomaly

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"
)

// Knob declares one threshold of a detector: its name in Config.Knobs, its
// command-line flag if it has one, its default and its valid range.
type Knob struct {
	Name string // key in Config.Knobs, and in Validate's errors: "SpikeThresholdPct"
	// Flag is the command-line flag that sets it, without "--"; empty: none.
	Flag    string
	Help    string  // the flag's help, before " Default: ..."
	Default float64 // the reference logger's value (see the detector's Def)
	Int     bool    // a whole number (the flag parses an integer)
	// Min and Max bound the valid values, both included; Want says so in
	// the words an error gives ("between 1 and 100").
	Min, Max float64
	Want     string
}

// Check returns an error naming the knob as name (its flag, say) when v is
// not a valid value.
func (k Knob) Check(name string, v float64) error {
	if v >= k.Min && v <= k.Max && (!k.Int || v == math.Trunc(v)) {
		return nil // NaN fails the comparisons
	}
	return fmt.Errorf("%s %s: must be %s", name, FormatKnob(v), k.Want)
}

// FormatKnob writes a knob's value as a flag takes it: 15, 0.25.
func FormatKnob(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// Knobs holds the detectors' thresholds by Knob.Name.
type Knobs map[string]float64

// Config holds every threshold the detectors use. DefaultConfig has the
// thresholds the logger has always used.
type Config struct {
	// Knobs holds each detector's knobs (Def.Knobs) by name.
	Knobs Knobs
	// LogCooldown is the shortest time between two log notices of one kind
	// for one GPU: the Python logger's ANOMALY_LOG_COOLDOWN_SEC, which kept
	// a condition that holds for hours from writing a line per sample. Zero
	// logs every notice.
	LogCooldown time.Duration
}

// DefaultConfig returns every knob's default.
func DefaultConfig() Config {
	k := Knobs{}
	for _, kn := range AllKnobs() {
		k[kn.Name] = kn.Default
	}
	return Config{Knobs: k, LogCooldown: 60 * time.Second}
}

// Validate reports every knob that is missing or out of range, naming it.
func (c Config) Validate() error {
	var errs []error
	for _, kn := range AllKnobs() {
		v, ok := c.Knobs[kn.Name]
		if !ok {
			errs = append(errs, fmt.Errorf("anomaly config: %s is missing", kn.Name))
			continue
		}
		if err := kn.Check(kn.Name, v); err != nil {
			errs = append(errs, fmt.Errorf("anomaly config: %w", err))
		}
	}
	if c.LogCooldown < 0 {
		errs = append(errs, fmt.Errorf("anomaly config: LogCooldown is %v, want >= 0", c.LogCooldown))
	}
	return errors.Join(errs...)
}

// AllKnobs returns every detector's knobs in Detectors' order, each once (two
// detectors may share one).
func AllKnobs() []Knob {
	var out []Knob
	seen := map[string]bool{}
	for _, d := range Detectors {
		for _, kn := range d.Knobs {
			if !seen[kn.Name] {
				seen[kn.Name] = true
				out = append(out, kn)
			}
		}
	}
	return out
}

// noLimit is the Max of a knob bounded below only.
var noLimit = math.Inf(1)
