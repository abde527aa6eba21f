package atop

import "github.com/gpu-telemetry/gpu-telemetry/internal/counters"

// ListenFailures is the one counter several parts share: each listener that
// cannot open its endpoint counts it (the atop server for its own, cmd for
// --metrics-listen).
var ListenFailures = counters.Declare(counters.Def{Name: "listen_failures", Loss: true, OwnLog: true,
	Help: "endpoints that could not be opened (--metrics-listen, --atop's TCP port or unix socket: address in use, or refused by the unit's RestrictAddressFamilies): not served, the logger samples on"})

// The server's counters and its accumulator's (atop_exits_dropped), counted
// in the registry each is given (NewServer, NewAccumulator). Nothing is
// dropped without being counted here (and logged the first time).
var (
	clientsRefused = counters.Declare(counters.Def{Name: "atop_clients_refused", Loss: true,
		Help: "atop connections closed at once: the connection limit reached with none silent, or the user's limit"})
	clientsDropped = counters.Declare(counters.Def{Name: "atop_clients_dropped", Loss: true,
		Help: "atop connections dropped for a request atop never sends, silence (or closed silent to make room for a new one), or a reply not taken"})
	repliesCut = counters.Declare(counters.Def{Name: "atop_replies_cut", Loss: true, OwnLog: true,
		Help: "atop replies that left process records out to stay within 8192 bytes (the atop server logs the first)"})
	recordsCut = counters.Declare(counters.Def{Name: "atop_records_cut", Loss: true,
		Help: "process records left out of atop replies to stay within 8192 bytes (least busy first)"})
	exitsDropped = counters.Declare(counters.Def{Name: "atop_exits_dropped", Loss: true, OwnLog: true,
		Help: "exited-process records dropped for atop clients that did not ask for over 4096 of them"})
	connsAccepted = counters.Declare(counters.Def{Name: "atop_connections",
		Help: "atop connections accepted and served"})
	requestsAnswered = counters.Declare(counters.Def{Name: "atop_requests",
		Help: "atopgpud protocol requests answered"})
)
