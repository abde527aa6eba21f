package anomaly

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestDefaultConfigIsReference(t *testing.T) {
	c := DefaultConfig()
	if err := c.Validate(); err != nil {
		t.Fatalf("DefaultConfig().Validate() = %v", err)
	}
	// The Python logger's thresholds (gpu-telemetry-deep.py).
	want := Knobs{
		"SpikeThresholdPct": 15, "SpikeWarmup": 2, "Warmup": 10, "InversionTempC": 85, "InversionFanPct": 55,
		"SpuriousPowerFraction": 0.25, "PowerOverFlagW": 50, "TDPEpsilonW": 5,
	}
	// Knobs the Python logger did not have (later detectors') keep their
	// own declared defaults; these must be its values.
	for k, v := range want {
		if got, ok := c.Knobs[k]; !ok || got != v {
			t.Errorf("DefaultConfig().Knobs[%s] = %v, want the reference %v", k, got, v)
		}
	}
	if c.LogCooldown != 60*time.Second {
		t.Errorf("DefaultConfig().LogCooldown = %v, want 60s", c.LogCooldown)
	}
}

func TestConfigValidate(t *testing.T) {
	set := func(kv ...any) func(*Config) {
		return func(c *Config) {
			for i := 0; i < len(kv); i += 2 {
				c.Knobs[kv[i].(string)] = kv[i+1].(float64)
			}
		}
	}
	tests := []struct {
		name    string
		change  func(*Config)
		wantErr string // substring; "" for valid
	}{
		{"defaults", func(*Config) {}, ""},
		{"spike threshold 1", set("SpikeThresholdPct", 1.0), ""},
		{"spike threshold 100", set("SpikeThresholdPct", 100.0), ""},
		{"spike threshold 0", set("SpikeThresholdPct", 0.0), "SpikeThresholdPct"},
		{"spike threshold 101", set("SpikeThresholdPct", 101.0), "SpikeThresholdPct"},
		{"spike threshold 1.5", set("SpikeThresholdPct", 1.5), "SpikeThresholdPct"},
		{"negative spike warm-up", set("SpikeWarmup", -1.0), "SpikeWarmup"},
		{"negative warm-up", set("Warmup", -1.0), "Warmup"},
		{"no warm-up", set("Warmup", 0.0, "SpikeWarmup", 0.0), ""},
		{"inversion temp too low", set("InversionTempC", 29.0), "InversionTempC"},
		{"inversion temp too high", set("InversionTempC", 121.0), "InversionTempC"},
		{"inversion fan 100 %", set("InversionFanPct", 100.0), "InversionFanPct"},
		{"inversion fan 0 %", set("InversionFanPct", 0.0), ""},
		{"fraction 0", set("SpuriousPowerFraction", 0.0), "SpuriousPowerFraction"},
		{"fraction 1", set("SpuriousPowerFraction", 1.0), "SpuriousPowerFraction"},
		{"fraction NaN", set("SpuriousPowerFraction", math.NaN()), "SpuriousPowerFraction"},
		{"TDP epsilon 0", set("TDPEpsilonW", 0.0), "TDPEpsilonW"},
		{"knob missing", func(c *Config) { delete(c.Knobs, "TDPEpsilonW") }, "TDPEpsilonW is missing"},
		{"negative cooldown", func(c *Config) { c.LogCooldown = -time.Second }, "LogCooldown"},
		{"zero cooldown", func(c *Config) { c.LogCooldown = 0 }, ""},
		{"two bad fields both named", set("SpikeThresholdPct", 0.0, "TDPEpsilonW", 0.0), "TDPEpsilonW"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := DefaultConfig()
			tt.change(&c)
			err := c.Validate()
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("Validate() = %v, want nil", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("Validate() = %v, want an error naming %s", err, tt.wantErr)
			}
		})
	}
}
