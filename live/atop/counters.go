package atop

import "github.com/gpu-telemetry/gpu-telemetry/internal/counters"

// ServerCounters are the server's counters (RegisterCounters).
var ServerCounters = []counters.Field[Counters]{
	{Def: counters.ListenFailures, Get: func(c Counters) uint64 { return c.ListenFailed }},
	{Def: counters.Def{Name: "atop_clients_refused", Loss: true, Place: 310,
		Help: "atop connections closed at once: the connection limit reached with none silent, or the user's limit"},
		Get: func(c Counters) uint64 { return c.Refused }},
	{Def: counters.Def{Name: "atop_clients_dropped", Loss: true, Place: 320,
		Help: "atop connections dropped for a request atop never sends, silence (or closed silent to make room for a new one), or a reply not taken"},
		Get: func(c Counters) uint64 { return c.Bad + c.TimedOut }},
	{Def: counters.Def{Name: "atop_replies_cut", Loss: true, OwnLog: true, Place: 330,
		Help: "atop replies that left process records out to stay within 8192 bytes (the atop server logs the first)"},
		Get: func(c Counters) uint64 { return c.CutReply }},
	{Def: counters.Def{Name: "atop_records_cut", Loss: true, Place: 340,
		Help: "process records left out of atop replies to stay within 8192 bytes (least busy first)"},
		Get: func(c Counters) uint64 { return c.CutRecord }},
	{Def: counters.Def{Name: "atop_exits_dropped", Loss: true, OwnLog: true, Place: 350,
		Help: "exited-process records dropped for atop clients that did not ask for over 4096 of them"},
		Get: func(c Counters) uint64 { return c.ExitedDropped }},
	{Def: counters.Def{Name: "atop_connections", Place: 560,
		Help: "atop connections accepted and served"},
		Get: func(c Counters) uint64 { return c.Accepted }},
	{Def: counters.Def{Name: "atop_requests", Place: 570,
		Help: "atopgpud protocol requests answered"},
		Get: func(c Counters) uint64 { return c.Requests }},
}

// RegisterCounters makes the server's counters (ServerCounters) part of r.
func (s *Server) RegisterCounters(r *counters.Registry) { counters.Add(r, s.Counters, ServerCounters) }
