// Package reading holds the values that flow between the sampler, the anomaly
// detectors, the sinks and the snapshots: one GPU's static facts, one sample of
// its live state, and the flags raised on it.
//
// It calls nothing of NVML and opens no files; its table of readings
// (table.go) names where NVML gives each reading, as data the sampler acts
// on. Every live value is an Opt: a reading that NVML refused, does not
// support or did not deliver in time is absent (OK false), never a fake zero.
package reading
