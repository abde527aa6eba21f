package atop

import "github.com/gpu-telemetry/gpu-telemetry/internal/counters"

// ListenFailures is the one counter several parts share: each listener that
// cannot open its endpoint counts it (the atop server for its own, cmd for
// --metrics-listen).
var ListenFailures = counters.Declare(counters.Def{Name: "listen_failures", Loss: true, OwnLog: true,
	Help: "endpoints that could not be opened (--metrics-listen, --atop's TCP port or unix socket: address in use, or refused by the unit's RestrictAddressFamilies): not served, the logger samples on"})

// ServerCounters are the server's counters (RegisterCounters).
var ServerCounters = []counters.Field[Counters]{
	{Def: ListenFailures, Get: func(c Counters) uint64 { return c.ListenFailed }},
	{Def: counters.Declare(counters.Def{Name: "atop_clients_refused", Loss: true,
		Help: "atop connections closed at once: the connection limit reached with none silent, or the user's limit"}),
		Get: func(c Counters) uint64 { return c.Refused }},
	{Def: counters.Declare(counters.Def{Name: "atop_clients_dropped", Loss: true,
		Help: "atop connections dropped for a request atop never sends, silence (or closed silent to make room for a new one), or a reply not taken"}),
		Get: func(c Counters) uint64 { return c.Bad + c.TimedOut }},
	{Def: counters.Declare(counters.Def{Name: "atop_replies_cut", Loss: true, OwnLog: true,
		Help: "atop replies that left process records out to stay within 8192 bytes (the atop server logs the first)"}),
		Get: func(c Counters) uint64 { return c.CutReply }},
	{Def: counters.Declare(counters.Def{Name: "atop_records_cut", Loss: true,
		Help: "process records left out of atop replies to stay within 8192 bytes (least busy first)"}),
		Get: func(c Counters) uint64 { return c.CutRecord }},
	{Def: counters.Declare(counters.Def{Name: "atop_exits_dropped", Loss: true, OwnLog: true,
		Help: "exited-process records dropped for atop clients that did not ask for over 4096 of them"}),
		Get: func(c Counters) uint64 { return c.ExitedDropped }},
	{Def: counters.Declare(counters.Def{Name: "atop_connections",
		Help: "atop connections accepted and served"}),
		Get: func(c Counters) uint64 { return c.Accepted }},
	{Def: counters.Declare(counters.Def{Name: "atop_requests",
		Help: "atopgpud protocol requests answered"}),
		Get: func(c Counters) uint64 { return c.Requests }},
}

// RegisterCounters makes the server's counters (ServerCounters) part of r.
func (s *Server) RegisterCounters(r *counters.Registry) {
	counters.Observe(r, s.Counters, ServerCounters...)
}
