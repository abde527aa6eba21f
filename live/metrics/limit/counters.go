package limit

import "github.com/gpu-telemetry/gpu-telemetry/internal/counters"

// Endpoint is the metrics endpoint's limits, read for its counters.
type Endpoint struct {
	Conns  *Conns
	Logins *Logins
}

// Counters are the metrics endpoint's counters (Register).
var Counters = []counters.Field[Endpoint]{
	{Def: counters.Declare(counters.Def{Name: "metrics_clients_refused", Loss: true,
		Help: "metrics endpoint connections closed at once because their client address already held its share of the connections, none of them idle"}),
		Get: func(e Endpoint) uint64 { return e.Conns.Refused() }},
	{Def: counters.Declare(counters.Def{Name: "metrics_logins_refused", Loss: true,
		Help: "metrics endpoint requests with credentials not known to be good answered 429 without their password checked: over the failed-login budget"}),
		Get: func(e Endpoint) uint64 { return e.Logins.Refused() }},
}

// Register makes the endpoint's counters (Counters) part of r.
func (e Endpoint) Register(r *counters.Registry) {
	counters.Observe(r, func() Endpoint { return e }, Counters...)
}
