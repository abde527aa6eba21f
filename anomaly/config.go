package anomaly

import (
	"errors"
	"fmt"
	"time"
)

// Config holds every threshold the detectors use. The defaults are the
// thresholds the logger has always used (DefaultConfig).
type Config struct {
	// SpikeThresholdPct is the change of one fan's speed between two samples,
	// in percentage points, that counts as a spike (seed: DEFAULT_SPIKE_THRESHOLD).
	SpikeThresholdPct uint32
	// SpikeWarmup is how many good samples must have been seen before a spike
	// can be flagged (seed: _total_samples > 2), so fans settling after start
	// or after an outage are not mistaken for spikes.
	SpikeWarmup int
	// Warmup is how many good samples must have been seen before a fan/temp
	// inversion or a spurious throttle can be flagged (seed: _total_samples > 10).
	Warmup int
	// InversionTempC is the temperature at or above which slow fans are an
	// inversion (seed: FAN_TEMP_INVERSION_TEMP).
	InversionTempC uint32
	// InversionFanPct is the fastest fan's speed at or below which a hot GPU's
	// fans count as slow (seed: FAN_TEMP_INVERSION_FAN).
	InversionFanPct uint32
	// SpuriousPowerFraction is the fraction of the power limit below which a
	// SwPowerCap throttle is spurious (seed: SPURIOUS_THROTTLE_POWER_PCT).
	SpuriousPowerFraction float64
	// PowerOverFlagW is the overage above the power limit, in W, beyond which a
	// breach is flagged on the row; every breach is counted (seed: overage_w > 50).
	PowerOverFlagW uint32
	// TDPEpsilonW is the smallest power limit change, in W, reported as a TDP
	// change; smaller ones are rounding noise (seed: TDP_CHANGE_EPSILON_W).
	TDPEpsilonW uint32
	// LogCooldown is the shortest time between two log notices of one kind for
	// one GPU (seed: ANOMALY_LOG_COOLDOWN_SEC). Zero logs every notice.
	LogCooldown time.Duration
}

// DefaultConfig returns the seed script's thresholds.
func DefaultConfig() Config {
	return Config{
		SpikeThresholdPct:     15,
		SpikeWarmup:           2,
		Warmup:                10,
		InversionTempC:        85,
		InversionFanPct:       55,
		SpuriousPowerFraction: 0.25,
		PowerOverFlagW:        50,
		TDPEpsilonW:           5,
		LogCooldown:           60 * time.Second,
	}
}

// Bounds for Validate. A GPU below 30 C is idle, so an inversion threshold
// there would flag every idle GPU; above 120 C every GPU has long shut down
// (shutdown thresholds are around 90-110 C).
const (
	minInversionTempC = 30
	maxInversionTempC = 120
)

// Validate reports every field that is out of range, naming it.
func (c Config) Validate() error {
	var errs []error
	if c.SpikeThresholdPct < 1 || c.SpikeThresholdPct > 100 {
		errs = append(errs, fmt.Errorf("anomaly config: SpikeThresholdPct is %d, want 1..100", c.SpikeThresholdPct))
	}
	if c.SpikeWarmup < 0 {
		errs = append(errs, fmt.Errorf("anomaly config: SpikeWarmup is %d, want >= 0", c.SpikeWarmup))
	}
	if c.Warmup < 0 {
		errs = append(errs, fmt.Errorf("anomaly config: Warmup is %d, want >= 0", c.Warmup))
	}
	if c.InversionTempC < minInversionTempC || c.InversionTempC > maxInversionTempC {
		errs = append(errs, fmt.Errorf("anomaly config: InversionTempC is %d, want %d..%d",
			c.InversionTempC, minInversionTempC, maxInversionTempC))
	}
	// 100 % or more would call every hot GPU's fans slow.
	if c.InversionFanPct > 99 {
		errs = append(errs, fmt.Errorf("anomaly config: InversionFanPct is %d, want 0..99", c.InversionFanPct))
	}
	if !(c.SpuriousPowerFraction > 0 && c.SpuriousPowerFraction < 1) {
		errs = append(errs, fmt.Errorf("anomaly config: SpuriousPowerFraction is %v, want a fraction in (0,1)",
			c.SpuriousPowerFraction))
	}
	// Zero would report an unchanged limit as a change on every sample.
	if c.TDPEpsilonW < 1 {
		errs = append(errs, errors.New("anomaly config: TDPEpsilonW is 0, want >= 1"))
	}
	if c.LogCooldown < 0 {
		errs = append(errs, fmt.Errorf("anomaly config: LogCooldown is %v, want >= 0", c.LogCooldown))
	}
	return errors.Join(errs...)
}
