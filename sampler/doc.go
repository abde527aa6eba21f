// Package sampler is the only package that talks to NVML.
//
// It opens the driver once, enumerates the selected GPUs, reads their static
// facts once, and then reads each GPU's live state into a reading.Sample on
// demand. It classifies every NVML result (not supported, no permission,
// function missing from the installed driver, GPU lost, timeout, other) so no
// other package interprets NVML codes; it caches capabilities so that a call
// the driver refused is not repeated every tick; it checks newer symbols with
// LookupSymbol before calling them, because calling a function the installed
// libnvidia-ml lacks kills the process; and it runs every GPU's calls on that
// GPU's own goroutine (Worker) so that a call stuck inside the driver during a
// GSP fault delays nobody else and can be reported while it is still stuck.
package sampler
