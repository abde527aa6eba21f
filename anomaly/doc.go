// Package anomaly flags the precursors of Blackwell GSP firmware crashes in a
// GPU's samples: fan speed spikes, fans that stay slow while the GPU is hot,
// SwPowerCap throttling at low power, power above the limit, power limit
// changes and throttle reason transitions.
//
// Each detector lives in its own file: a Def that declares its flags, its
// counter, its log notice and its knobs, a small type whose one method,
// Check, looks at the previous and the current sample, and an init func
// that registers the Def. Detectors holds them, in the Python logger's order
// and then by name; a Tracker (one per GPU) runs them in that order, adds
// their flags to the sample, counts what they found and says which log
// notices are due, and the counters, the notices, Config, the flag kinds in
// package reading and the command line are built from the same list.
// Detectors do no I/O and never read the clock: the time of a sample is
// passed in.
//
// The package knows readings, not NVML. A reading that is absent never raises
// a flag, and a sample that stands for a failure (failed, hung, lost) is not
// examined: it resets every detector's memory of the previous sample, so the
// first good sample after an outage is compared with nothing rather than with
// stale or fake values.
//
// Beside the detectors, the package judges a GPU's hardware health from its
// health counters (healthverdict.go, after DCGM's watches) and derives its
// repair action (repair.go: package action's values) from its Xids, the
// driver's recovery action, that verdict, its state and the board's
// history across boots; both pure, time passed in.
//
// Observe runs about 80 times a second on an 8-GPU host for months, so it does
// not allocate.
package anomaly
