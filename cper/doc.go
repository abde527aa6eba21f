// Package cper decodes Common Platform Error Records (UEFI 2.10 Appendix N):
// the records NVIDIA's driver (R610+) returns through nvmlSystemGetCPER_v1,
// and the host firmware's boot error record (ACPI BERT). It decodes the
// record header and section descriptors only, never the sections' bodies.
// Its Reader reads each source's new records and keeps the cursor that makes
// a restart neither lose nor repeat a record. It does no NVML calls: sampler
// reads the records (handed to the Reader as a function), and monitor
// routes each record the Reader returns.
package cper
