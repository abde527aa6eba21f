package sampler

import (
	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpu-telemetry/gpu-telemetry/sampler/nvmlapi"
)

// Device is the part of go-nvml's nvml.Device the sampler uses.
type Device = nvmlapi.Device

// Library is the part of go-nvml's nvml.Interface the sampler uses.
type Library = nvmlapi.Library

// NVML adapts go-nvml's library to Library.
type NVML struct{ nvml.Interface }

// NewNVML returns the real driver library (libnvidia-ml.so.1, loaded on Init).
func NewNVML() *NVML { return &NVML{nvml.New()} }

// DeviceGetHandleByIndex implements Library.
func (n *NVML) DeviceGetHandleByIndex(i int) (Device, nvml.Return) {
	return n.Interface.DeviceGetHandleByIndex(i)
}

// LookupSymbol implements Library.
func (n *NVML) LookupSymbol(name string) error { return n.Extensions().LookupSymbol(name) }
