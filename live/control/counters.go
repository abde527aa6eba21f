package control

import "github.com/gpu-telemetry/gpu-telemetry/internal/counters"

// The control socket's counters, counted in the registry it is given
// (Config.Counters).
var (
	clientsRefused = counters.Declare(counters.Def{Name: "control_clients_refused", Loss: true,
		Help: "control socket connections closed at once, busy, because every connection was being answered"})
	requestsFailed = counters.Declare(counters.Def{Name: "control_requests_failed", Loss: true,
		Help: "control socket requests not answered: a request the socket does not know, a client silent past the read timeout or closed silent to make room for a new one, or gone before the answer; a watch refused, or ended because its client did not take a document in time"})
	requestsServed = counters.Declare(counters.Def{Name: "control_requests",
		Help: "control socket requests answered (status, ping, watch)"})
)
