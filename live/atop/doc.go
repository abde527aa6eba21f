// Package atop serves atop's GPU statistics the way atopgpud does, from the
// samples gpu-telemetry already takes, so a host needs no second NVML poller.
//
// The contract is atop's own client (gpucom.c): a client sends two-byte
// requests, 'T' (GPU types) or 'S' (statistics) followed by its API version;
// each reply is a 4-byte big-endian prelude (version in the top byte, body
// length in the low 24 bits) and an ASCII body of at most 8192 bytes. API
// version 1 is served on TCP 127.0.0.1:59123 (atop 2.8 to 2.12), version 2 on
// the abstract unix socket "atopgpud_nvidia" (atop 2.13 and later).
//
// An Accumulator turns the 100 ms rows and the slow tier's process lists into
// atopgpud's per-second counters; a Server answers clients from it. No request
// ever waits on NVML: replies are built from memory under a short lock.
package atop
