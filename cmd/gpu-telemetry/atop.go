package main

import "github.com/gpu-telemetry/gpu-telemetry/live/atop"

// AtopFlags are the flags of the atopgpud replacement (embedded in CLI).
type AtopFlags struct {
	Atop bool `help:"Serve atop's GPU statistics as atopgpud does (stop atopgpud first): API version 1 on TCP 127.0.0.1:59123, version 2 on the abstract unix socket atopgpud_nvidia. Figures come from the samples already taken: no extra NVML calls."`
}

// atopConfig returns the server's configuration, nil when --atop is off.
func (f *AtopFlags) atopConfig() *atop.Config {
	if !f.Atop {
		return nil
	}
	c := atop.DefaultConfig()
	return &c
}
