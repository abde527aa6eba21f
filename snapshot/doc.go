// Package snapshot writes the diagnostic files an operator reads after a GPU
// incident: a crash snapshot when a GPU reports an Xid, fails or hangs in
// NVML, or is lost, with follow-up captures some seconds later, and a spike
// snapshot when a fan spikes.
//
// It is the only package that runs external programs (dmesg, journalctl,
// lspci, setpci, nvidia-smi, free, uptime: the table Programs, with the
// package that provides each). They run through a Runner, never through a shell,
// each with its own timeout, and never on the caller's goroutine.
//
// A snapshot goes one way. The caller asks for the decision first
// (Manager.Decide for a critical event, Manager.DecideSpike for a fan
// spike: the cooldowns and the incident's stages, a value with nothing to
// finish), gathers what it knows only when the decision accepts, and hands
// the request, complete, to Manager.Crash or Manager.Spike, which return at
// once; the files are written in the background.
//
// Every file is written atomically (temp file, fsync, rename or link, fsync of
// the directory), so a reader sees a complete file or none. A crash snapshot
// is written twice under the same name: first at once with the header and the
// last telemetry rows (stage 1), then replaced by the full version once the
// diagnostics are in (stage 2), so a hung nvidia-smi cannot keep the operator
// from the rows.
package snapshot
