package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpu-telemetry/gpu-telemetry/live"
)

// Hardware health: the GPU-level counters are rows of reading.Table (their
// metrics: counts as health_<name>_total, clock-event times as
// health_<name>_seconds_total, states as health_<name>); here a verdict and
// its reasons, and per-link NVLink series as the series budget allows
// (linkbudget.go): by default only for a link that is not active or has
// errors, so a healthy B200's 18 links export none.
var (
	mVerdict = gpuMetric("health_verdict", "Hardware health verdict: 0 ok, 1 warning, 2 critical, 3 unknown (the GPU is hung, lost or failing and was not critical).", prometheus.GaugeValue)
	mReason  = gpuMetric("health_reason", "A hardware health reason that holds now (value 1); absent when it does not.", prometheus.GaugeValue, "reason")
	mLinkDn  = gpuMetric("nvlink_link_down", "An NVLink link that is not active (value 1); absent for active links.", prometheus.GaugeValue, "link", "state")
	mLinkErr = gpuMetric("nvlink_link_errors_total", "An NVLink per-link counter; by default exported only for a link that is down or has errors.", prometheus.CounterValue, "link", "counter")
	mAction  = gpuMetric("gpu_action", "The GPU's current repair action (value 1): none, watch, recover_fabric, reset_gpu, drain_and_reset, reboot, power_cycle, inspect; one series per GPU.", prometheus.GaugeValue, "action")
	mLinkBER = gpuMetric("nvlink_link_ber", "An NVLink per-link bit error rate; by default exported only for a link that is down or has errors.", prometheus.GaugeValue, "link", "counter")
)

// healthVerdict adds the repair action, always known ("none" until there
// is one), and the verdict (live.GPU.Verdict) and its reasons: from memory,
// also while the GPU does not answer (they are what explains why).
func (w *walker) healthVerdict(g *live.GPU, gpu, uuid string) {
	w.add(mAction, 1, gpu, uuid, g.Action.Action.String())
	v, _, known := g.Verdict()
	if !known {
		return
	}
	w.add(mVerdict, float64(v), gpu, uuid)
	for _, r := range g.HealthReasons {
		w.add(mReason, 1, gpu, uuid, r)
	}
}
