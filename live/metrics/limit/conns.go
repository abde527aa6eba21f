// Package limit bounds what clients of the metrics endpoint can hold and
// cost: connections (Conns, a listener that closes idle connections first
// and limits each client address) and password checks (Logins, a handler
// that rate-limits logins with credentials not known to be good before
// exporter-toolkit runs bcrypt on them). Both count what they refuse
// (counters.go).
package limit

import (
	"crypto/tls"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/counters"
)

// ConnLimits bounds the endpoint's connections.
type ConnLimits struct {
	Max     int // connections open at once
	PerAddr int // of them busy from one client address (an IPv6 client: its /64)
	// Silent: a connection accepted this long ago that has not sent a
	// request (or finished its TLS handshake) is busy, and may be closed
	// for a new one.
	Silent time.Duration
}

// Conns is a listener that keeps at most Max connections open, at most
// PerAddr of them busy (reading a request or answering, or silent) from one
// client address. A new connection at Max takes the place of the oldest
// idle keep-alive one, then of the oldest silent one: idle connections never
// hold the slots a scrape needs. With every slot busy (each bounded by the
// server's timeouts) a new connection waits in Accept, as
// netutil.LimitListener's do. A new connection from an address with PerAddr
// busy takes the place of that address's oldest silent one, or is closed at
// once and counted (Refused): one host cannot hold every slot busy. The
// server's ConnState must be c.ConnState so that Conns knows which
// connections are idle.
type Conns struct {
	net.Listener
	lim ConnLimits

	mu      sync.Mutex
	wake    *sync.Cond // a connection closed or went idle, or the listener closed
	open    map[*conn]struct{}
	waiting bool
	closed  bool

	counts *counters.Registry // where it counts metrics_clients_refused (counters.go)
}

// conn is an accepted connection and what Conns knows of it.
type conn struct {
	net.Conn
	l     *Conns
	addr  netip.Addr     // client address (an IPv6 one cut to its /64)
	state http.ConnState // under l.mu
	since time.Time      // when state last changed, under l.mu
	once  sync.Once      // leaves l.open once
}

// NewConns limits ln's connections, counting in reg (required).
func NewConns(ln net.Listener, lim ConnLimits, reg *counters.Registry) *Conns {
	l := &Conns{Listener: ln, lim: lim, open: map[*conn]struct{}{}, counts: counters.Need(reg, "limit.NewConns's registry")}
	l.wake = sync.NewCond(&l.mu)
	return l
}

// Accept returns the next connection admitted under the limits.
func (l *Conns) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if tc := l.admit(c); tc != nil {
			return tc, nil
		}
		c.Close()
	}
}

// Close closes the listener and wakes an Accept waiting for a slot.
func (l *Conns) Close() error {
	l.mu.Lock()
	l.closed = true
	l.wake.Broadcast()
	l.mu.Unlock()
	return l.Listener.Close()
}

// ConnState is the server's http.Server.ConnState: it tells Conns which
// connections are idle.
func (l *Conns) ConnState(nc net.Conn, s http.ConnState) {
	if t, ok := nc.(*tls.Conn); ok {
		nc = t.NetConn()
	}
	c, ok := nc.(*conn)
	if !ok || c.l != l {
		return
	}
	l.mu.Lock()
	c.state, c.since = s, time.Now()
	if s == http.StateIdle && l.waiting {
		l.wake.Broadcast()
	}
	l.mu.Unlock()
}

// admit makes room for nc under the limits, or returns nil: its address
// holding PerAddr busy connections, or the listener closed while it waited.
func (l *Conns) admit(nc net.Conn) *conn {
	c := &conn{Conn: nc, l: l, addr: clientAddr(nc.RemoteAddr()), state: http.StateNew, since: time.Now()}
	l.mu.Lock()
	defer l.mu.Unlock()
	for l.busy(c.addr, time.Now()) >= l.lim.PerAddr {
		if !l.closeOldest(c.addr, false) {
			l.counts.Inc(clientsRefused)
			return nil
		}
	}
	for len(l.open) >= l.lim.Max {
		if l.closeOldest(netip.Addr{}, true) {
			continue
		}
		if l.closed {
			return nil
		}
		// Every slot is serving, reading a request, or silent for less
		// than Silent: wait for one to close or go idle, or to fall silent.
		t := time.AfterFunc(l.lim.Silent, func() { l.mu.Lock(); l.wake.Broadcast(); l.mu.Unlock() })
		l.waiting = true
		l.wake.Wait()
		l.waiting = false
		t.Stop()
	}
	l.open[c] = struct{}{}
	return c
}

// silent reports whether c has been connected for Silent without a request.
func (l *Conns) silent(c *conn, now time.Time) bool {
	return c.state == http.StateNew && now.Sub(c.since) >= l.lim.Silent
}

// busy returns the connections from addr that hold their slot: reading a
// request or answering, or silent. An idle one gives way to any new
// connection, and one just made is about to send its request: neither
// counts, so that clients reconnecting on one address (a host's
// Prometheus among them) do not shut each other out.
func (l *Conns) busy(addr netip.Addr, now time.Time) int {
	n := 0
	for c := range l.open {
		if c.addr == addr && (c.state == http.StateActive || l.silent(c, now)) {
			n++
		}
	}
	return n
}

// closeOldest closes the oldest idle connection when idle (of any
// address), or failing that the oldest silent one (of addr unless idle),
// and reports whether it closed one. Called with l.mu held.
func (l *Conns) closeOldest(addr netip.Addr, idle bool) bool {
	now := time.Now()
	var oldIdle, oldSilent *conn
	for c := range l.open {
		switch {
		case idle && c.state == http.StateIdle:
			if oldIdle == nil || c.since.Before(oldIdle.since) {
				oldIdle = c
			}
		case l.silent(c, now) && (idle || c.addr == addr):
			if oldSilent == nil || c.since.Before(oldSilent.since) {
				oldSilent = c
			}
		}
	}
	v := oldIdle
	if v == nil {
		v = oldSilent
	}
	if v == nil {
		return false
	}
	l.forget(v)
	v.Conn.Close() // the server's read fails and it ends the connection
	return true
}

// forget takes c out of the open connections. Called with l.mu held.
func (l *Conns) forget(c *conn) {
	c.once.Do(func() {
		delete(l.open, c)
		l.wake.Broadcast()
	})
}

// Close closes the connection and frees its slot.
func (c *conn) Close() error {
	c.l.mu.Lock()
	c.l.forget(c)
	c.l.mu.Unlock()
	return c.Conn.Close()
}

// clientAddr is the address a connection's limit is kept by: its IP, an
// IPv6 one cut to its /64 (what one host is usually given).
func clientAddr(a net.Addr) netip.Addr {
	var ip netip.Addr
	if t, ok := a.(*net.TCPAddr); ok {
		ip = t.AddrPort().Addr().Unmap()
	} else if ap, err := netip.ParseAddrPort(a.String()); err == nil {
		ip = ap.Addr().Unmap()
	}
	if ip.Is6() {
		if p, err := ip.Prefix(64); err == nil {
			return p.Addr()
		}
	}
	return ip
}
