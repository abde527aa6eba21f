package limit

import "github.com/gpu-telemetry/gpu-telemetry/internal/counters"

// The metrics endpoint's counters, counted in the registry each limit is
// given (NewConns, NewLogins).
var (
	clientsRefused = counters.Declare(counters.Def{Name: "metrics_clients_refused", Loss: true,
		Help: "metrics endpoint connections closed at once because their client address already held its share of the connections, none of them idle"})
	loginsRefused = counters.Declare(counters.Def{Name: "metrics_logins_refused", Loss: true,
		Help: "metrics endpoint requests with credentials not known to be good answered 429 without their password checked: over the failed-login budget"})
)
