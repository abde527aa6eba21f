// Package fanguard takes a GPU's fans from a firmware fan controller that
// has stopped reacting to temperature, and hands them back once the die has
// cooled: opt-in (--fan-guard), never on the sample path.
//
// The cause it acts on was measured on RTX PRO 6000 Blackwell boards
// (NVIDIA/open-gpu-kernel-modules issue 1045, comment of 2026-04-09): with
// the firmware's controller the die ran at 87-92 C with the fans at 53 %,
// 2,888 fan/temperature inversions in 17 minutes and 6+ GSP crashes in 5
// days; with the fan speed set from user space (nvmlDeviceSetFanSpeed_v2)
// the same 500 W load ran at 73 C with the fans at 78 %, and did not crash.
//
// Policy is the pure decision over a GPU's samples (engage, curve,
// hysteresis, floors, rate limit, release); Guard carries its decisions out
// through a Driver (the sampler's setters) on a goroutine of its own, under
// a deadline: a setter stuck in the driver is recorded and the GPU's fans
// are never touched again, and the sample path never waits on it.
package fanguard
