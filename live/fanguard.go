package live

// FanGuard is the fan guard's state on a GPU as published (--fan-guard;
// nil when it is off), and its object in the status document.
type FanGuard struct {
	State string `json:"state"`         // watching, holding, no fans, refused, hung, GPU lost, starting, stopped
	Why   string `json:"why,omitempty"` // why it holds (temperature, fan inversion), or was refused or hung
	Fans  []int  `json:"fans"`          // the fans it holds
	// SpeedPct is the highest speed it commands, FirmwarePct the highest
	// the firmware asked for when the guard took over, TempC the die's
	// temperature at the last change; null when not holding.
	SpeedPct    *int    `json:"speed_pct"`
	FirmwarePct *uint32 `json:"firmware_pct"`
	TempC       *uint32 `json:"temp_c"`
	Text        string  `json:"text"` // "holding fans 0,1 at 78 % (firmware wanted 53 %), 73 °C"
}

// Holding reports whether the guard holds the GPU's fans.
func (f *FanGuard) Holding() bool { return f != nil && len(f.Fans) > 0 }

// fanGuardLine is the status screen's line of a GPU's fan guard; "" when off.
func fanGuardLine(f *FanGuard) []string {
	if f == nil {
		return nil
	}
	return []string{"  fan guard: " + f.Text}
}
