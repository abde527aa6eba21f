// Package snapshot writes the diagnostic files an operator reads after a GPU
// incident: a crash snapshot when a GPU reports an Xid, fails or hangs in
// NVML, or is lost, with follow-up captures some seconds later; a spike
// snapshot when a fan spikes; a boot log after an unclean stop.
//
// It is the only package that runs external programs (the table Programs),
// through a Runner, never through a shell, each with its own timeout, and
// never on the caller's goroutine.
//
// A snapshot goes one way: the caller asks for the decision (Decide,
// DecideSpike), gathers what it knows only when it accepts, and hands the
// request, complete, to Crash or Spike, which return at once.
//
// Every file is written atomically, so a reader sees a complete file or
// none. A crash snapshot is written twice under one name: at once with the
// header and the last rows (stage 1), then with the diagnostics (stage 2),
// so a hung nvidia-smi cannot keep the operator from the rows.
package snapshot
