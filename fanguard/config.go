package fanguard

import (
	"fmt"
	"time"
)

// Config is how the guard decides; DefaultConfig gives the defaults.
type Config struct {
	Curve Curve
	// EngageC: the guard takes a GPU's fans when its die reaches this
	// temperature (or the fan inversion detector fires).
	EngageC int
	// ReleaseC and ReleaseAfter: it hands them back once the die has stayed
	// below ReleaseC for ReleaseAfter.
	ReleaseC     int
	ReleaseAfter time.Duration
	// MinChange is the shortest time between two changes of one fan.
	MinChange time.Duration
	// HysteresisC: the fans slow down only once the die is this much
	// cooler than the temperature that called for their speed, so a die
	// wavering by a degree does not make them hunt.
	HysteresisC int
	// CallDeadline: a setter still inside the driver after this long is a
	// hang; the GPU's fans are not touched again.
	CallDeadline time.Duration
}

// Defaults, from the issue that asked for the guard: engage at 70 C, 15 C
// below where the firmware of issue 1045 let the die sit (85-92 C) and
// 3 C under where user-space control held it (73 C); release below 65 C for
// a minute, so that a load pausing between batches does not toggle the
// fans; one change a second, what a fan's spin-up takes to show; 2 C of
// hysteresis, twice the sensor's 1 C step.
const (
	DefaultEngageC      = 70
	DefaultReleaseC     = 65
	DefaultReleaseAfter = 60 * time.Second
	DefaultMinChange    = time.Second
	DefaultHysteresisC  = 2
	DefaultCallDeadline = 2 * time.Second
)

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{Curve: DefaultCurve, EngageC: DefaultEngageC, ReleaseC: DefaultReleaseC, ReleaseAfter: DefaultReleaseAfter,
		MinChange: DefaultMinChange, HysteresisC: DefaultHysteresisC, CallDeadline: DefaultCallDeadline}
}

// Temperature bounds of EngageC and ReleaseC. Engaging low is the safe
// direction (the fans only run faster than the firmware would have them),
// and a check on a real GPU engages at an idle die's temperature
// (real-gpu-check.sh: --fan-guard-engage 30 --fan-guard-release 25); below
// 20 C no die runs, so a lower value is a typo. Above 100 C the guard would
// act after the GPU slows itself down.
const (
	MinEngageC  = 20
	MaxEngageC  = 100
	MinReleaseC = 15
)

// Validate checks the configuration; each error is one line naming the
// setting as the command line does (--fan-guard-...).
func (c Config) Validate() error {
	if err := c.Curve.Validate(); err != nil {
		return fmt.Errorf("--fan-guard-curve %s: %w", c.Curve, err)
	}
	if c.EngageC < MinEngageC || c.EngageC > MaxEngageC {
		return fmt.Errorf("--fan-guard-engage %d: must be between %d and %d (C)", c.EngageC, MinEngageC, MaxEngageC)
	}
	if c.ReleaseC < MinReleaseC || c.ReleaseC >= c.EngageC {
		return fmt.Errorf("--fan-guard-release %d: must be at least %d and below --fan-guard-engage (%d C)", c.ReleaseC, MinReleaseC, c.EngageC)
	}
	if c.ReleaseAfter < 0 || c.MinChange < 0 || c.HysteresisC < 0 || c.CallDeadline <= 0 {
		return fmt.Errorf("fan guard timings: release after %s, min change %s, hysteresis %d C, call deadline %s: must not be negative (the deadline > 0)",
			c.ReleaseAfter, c.MinChange, c.HysteresisC, c.CallDeadline)
	}
	return nil
}
