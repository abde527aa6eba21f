package limit

import "github.com/gpu-telemetry/gpu-telemetry/internal/counters"

// The metrics endpoint's counters, counted in each limit's own registry.
var (
	clientsRefused = counters.Declare(counters.Def{Name: "metrics_clients_refused", Loss: true,
		Help: "metrics endpoint connections closed at once because their client address already held its share of the connections, none of them idle"})
	loginsRefused = counters.Declare(counters.Def{Name: "metrics_logins_refused", Loss: true,
		Help: "metrics endpoint requests with credentials not known to be good answered 429 without their password checked: over the failed-login budget"})
)

// Endpoint is the metrics endpoint's limits, whose counters it registers.
type Endpoint struct {
	Conns  *Conns
	Logins *Logins
}

// Register makes r show the endpoint's counts.
func (e Endpoint) Register(r *counters.Registry) {
	r.Include(e.Conns.counts)
	r.Include(e.Logins.counts)
}
