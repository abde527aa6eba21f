package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpu-telemetry/gpu-telemetry/live"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// Hardware health: the GPU-level counters are rows of reading.Table (their
// metrics: counts as health_<name>_total, clock-event times as
// health_<name>_seconds_total, states as health_<name>); here a verdict and
// its reasons, and per-link NVLink series only for a link that is not active or
// has a nonzero error counter: a healthy B200's 18 links export none (see
// docs for the series budget).
var (
	mVerdict = &metric{"health_verdict", "Hardware health verdict: 0 ok, 1 warning, 2 critical.", prometheus.GaugeValue, nil}
	mReason  = &metric{"health_reason", "A hardware health reason that holds now (value 1); absent when it does not.", prometheus.GaugeValue, []string{"reason"}}
	mLinkDn  = &metric{"nvlink_link_down", "An NVLink link that is not active (value 1); absent for active links.", prometheus.GaugeValue, []string{"link", "state"}}
	mLinkErr = &metric{"nvlink_link_errors_total", "A nonzero NVLink5 per-link counter; absent while 0.", prometheus.CounterValue, []string{"link", "counter"}}
	mLinkBER = &metric{"nvlink_link_ber", "A nonzero NVLink5 per-link bit error rate; absent while 0.", prometheus.GaugeValue, []string{"link", "counter"}}
)

// healthFamilies lists the health metrics for New.
func healthFamilies() []*metric {
	return []*metric{mVerdict, mReason, mLinkDn, mLinkErr, mLinkBER}
}

var verdictValue = map[string]float64{"": 0, "ok": 0, "warning": 1, "critical": 2}

// healthVerdict adds the verdict and its reasons: from memory, also while
// the GPU does not answer (it is what explains why).
func (w *walker) healthVerdict(g *live.GPU, gpu, uuid string) {
	if g.HealthLevel == "" {
		return
	}
	w.add(mVerdict, verdictValue[g.HealthLevel], gpu, uuid)
	for _, r := range g.HealthReasons {
		w.add(mReason, 1, gpu, uuid, r)
	}
}

// health adds the per-link series of an answering GPU (its counters are
// rows of reading.Table, exported with the other readings).
func (w *walker) health(g *live.GPU, gpu, uuid string) {
	l := g.Links
	if l == nil {
		return
	}
	for i := range min(l.N, reading.MaxLinks) {
		k := &l.L[i]
		link := strconv.Itoa(i)
		if st, ok := k.State.Get(); ok && !k.Up() {
			w.add(mLinkDn, 1, gpu, uuid, link, reading.LinkStateName(st))
		}
		for c, d := range reading.LinkDefs {
			v, ok := k.C[c].Get()
			if !ok || v == 0 {
				continue
			}
			if d.BER {
				w.add(mLinkBER, reading.DecodeBER(v), gpu, uuid, link, d.Name)
			} else {
				w.add(mLinkErr, float64(v), gpu, uuid, link, d.Name)
			}
		}
	}
}
