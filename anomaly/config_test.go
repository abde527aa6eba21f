package anomaly

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestDefaultConfigIsSeed(t *testing.T) {
	c := DefaultConfig()
	if err := c.Validate(); err != nil {
		t.Fatalf("DefaultConfig().Validate() = %v", err)
	}
	want := Config{
		SpikeThresholdPct: 15, SpikeWarmup: 2, Warmup: 10, InversionTempC: 85, InversionFanPct: 55,
		SpuriousPowerFraction: 0.25, PowerOverFlagW: 50, TDPEpsilonW: 5, LogCooldown: 60 * time.Second,
	}
	if c != want {
		t.Errorf("DefaultConfig() = %+v, want %+v", c, want)
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		change  func(*Config)
		wantErr string // substring; "" for valid
	}{
		{"defaults", func(*Config) {}, ""},
		{"spike threshold 1", func(c *Config) { c.SpikeThresholdPct = 1 }, ""},
		{"spike threshold 100", func(c *Config) { c.SpikeThresholdPct = 100 }, ""},
		{"spike threshold 0", func(c *Config) { c.SpikeThresholdPct = 0 }, "SpikeThresholdPct"},
		{"spike threshold 101", func(c *Config) { c.SpikeThresholdPct = 101 }, "SpikeThresholdPct"},
		{"negative spike warm-up", func(c *Config) { c.SpikeWarmup = -1 }, "SpikeWarmup"},
		{"negative warm-up", func(c *Config) { c.Warmup = -1 }, "Warmup"},
		{"no warm-up", func(c *Config) { c.Warmup, c.SpikeWarmup = 0, 0 }, ""},
		{"inversion temp too low", func(c *Config) { c.InversionTempC = 29 }, "InversionTempC"},
		{"inversion temp too high", func(c *Config) { c.InversionTempC = 121 }, "InversionTempC"},
		{"inversion fan 100 %", func(c *Config) { c.InversionFanPct = 100 }, "InversionFanPct"},
		{"inversion fan 0 %", func(c *Config) { c.InversionFanPct = 0 }, ""},
		{"fraction 0", func(c *Config) { c.SpuriousPowerFraction = 0 }, "SpuriousPowerFraction"},
		{"fraction 1", func(c *Config) { c.SpuriousPowerFraction = 1 }, "SpuriousPowerFraction"},
		{"fraction NaN", func(c *Config) { c.SpuriousPowerFraction = math.NaN() }, "SpuriousPowerFraction"},
		{"TDP epsilon 0", func(c *Config) { c.TDPEpsilonW = 0 }, "TDPEpsilonW"},
		{"negative cooldown", func(c *Config) { c.LogCooldown = -time.Second }, "LogCooldown"},
		{"zero cooldown", func(c *Config) { c.LogCooldown = 0 }, ""},
		{"two bad fields both named", func(c *Config) { c.SpikeThresholdPct, c.TDPEpsilonW = 0, 0 }, "TDPEpsilonW"},
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
