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
type NVML struct{ Lib nvml.Interface }

// NewNVML returns the real driver library (libnvidia-ml.so.1, loaded on Init).
func NewNVML() *NVML { return &NVML{Lib: nvml.New()} }

// Init implements Library.
func (n *NVML) Init() nvml.Return { return n.Lib.Init() }

// Shutdown implements Library.
func (n *NVML) Shutdown() nvml.Return { return n.Lib.Shutdown() }

// SystemGetDriverVersion implements Library.
func (n *NVML) SystemGetDriverVersion() (string, nvml.Return) {
	return n.Lib.SystemGetDriverVersion()
}

// SystemGetNVMLVersion implements Library.
func (n *NVML) SystemGetNVMLVersion() (string, nvml.Return) { return n.Lib.SystemGetNVMLVersion() }

// SystemGetCudaDriverVersion implements Library.
func (n *NVML) SystemGetCudaDriverVersion() (int, nvml.Return) {
	return n.Lib.SystemGetCudaDriverVersion()
}

// DeviceGetCount implements Library.
func (n *NVML) DeviceGetCount() (int, nvml.Return) { return n.Lib.DeviceGetCount() }

// DeviceGetHandleByIndex implements Library.
func (n *NVML) DeviceGetHandleByIndex(i int) (Device, nvml.Return) {
	return n.Lib.DeviceGetHandleByIndex(i)
}

// LookupSymbol implements Library.
func (n *NVML) LookupSymbol(name string) error { return n.Lib.Extensions().LookupSymbol(name) }
