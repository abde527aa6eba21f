package control

import "github.com/gpu-telemetry/gpu-telemetry/internal/counters"

// ServerCounters are the control socket's counters (RegisterCounters).
var ServerCounters = []counters.Field[*Server]{
	{Def: counters.Declare(counters.Def{Name: "control_clients_refused", Loss: true,
		Help: "control socket connections closed at once, busy, because every connection was being answered"}),
		Get: func(s *Server) uint64 { return s.refused.Load() }},
	{Def: counters.Declare(counters.Def{Name: "control_requests_failed", Loss: true,
		Help: "control socket requests not answered: a request the socket does not know, a client silent past the read timeout or closed silent to make room for a new one, or gone before the answer"}),
		Get: func(s *Server) uint64 { return s.failed.Load() }},
	{Def: counters.Declare(counters.Def{Name: "control_requests",
		Help: "control socket requests answered (status, ping)"}),
		Get: func(s *Server) uint64 { return s.served.Load() }},
}

// RegisterCounters makes the socket's counters (ServerCounters) part of r.
func (s *Server) RegisterCounters(r *counters.Registry) {
	counters.Observe(r, func() *Server { return s }, ServerCounters...)
}
