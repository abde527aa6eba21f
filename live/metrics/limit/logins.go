package limit

import (
	"context"
	"crypto/sha256"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/gpu-telemetry/gpu-telemetry/internal/counters"
)

// LoginLimits bounds the password checks clients can cause: a login with
// credentials not known to be good costs exporter-toolkit one bcrypt
// comparison (tens of milliseconds of CPU at bcrypt's cost 10).
type LoginLimits struct {
	PerSecond float64 // such logins a second, from all clients together
	Burst     int
	// PerAddrPerSecond and PerAddrBurst: from one client address (an IPv6
	// client: its /64).
	PerAddrPerSecond float64
	PerAddrBurst     int
}

// Bounds of the tables Logins keeps.
const (
	maxGood  = 16   // credentials that logged in: a few scrapers
	maxAddrs = 1024 // client addresses with a budget in use; past it only the total applies
)

// Logins rate-limits logins before the password is checked. Wrap goes
// around exporter-toolkit's handler (which checks basic auth with bcrypt,
// one comparison at a time, and caches the outcome of the last hundred
// credentials); Passed goes around the handler the toolkit serves once a
// login passed, so that Logins learns which credentials are good. A request
// with credentials that passed before goes straight through: a scraper that
// knows the password is never held back by someone else's wrong ones. Any
// other request with credentials takes one login from its address's budget
// and from the total; with either spent it is answered 429 without the
// toolkit seeing it (counted, Refused). A request without basic-auth credentials
// costs no bcrypt and is not limited.
type Logins struct {
	lim LoginLimits
	now func() time.Time

	mu    sync.Mutex
	total *rate.Limiter
	addrs map[netip.Addr]*rate.Limiter
	good  map[[sha256.Size]byte]time.Time // credentials that passed, when last used

	counts *counters.Registry // where it counts metrics_logins_refused (counters.go)
}

// NewLogins returns login limits counting in reg (required); now is the
// clock (nil: time.Now).
func NewLogins(lim LoginLimits, now func() time.Time, reg *counters.Registry) *Logins {
	counters.Need(reg, "limit.NewLogins's registry")
	if now == nil {
		now = time.Now
	}
	return &Logins{lim: lim, now: now, total: rate.NewLimiter(rate.Limit(lim.PerSecond), lim.Burst),
		addrs: map[netip.Addr]*rate.Limiter{}, good: map[[sha256.Size]byte]time.Time{}, counts: reg}
}

// passedKey is the context key of the flag Passed sets.
type passedKey struct{}

// Passed marks the requests h serves as logged in (see Logins).
func (g *Logins) Passed(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p, ok := r.Context().Value(passedKey{}).(*bool); ok {
			*p = true
		}
		h.ServeHTTP(w, r)
	})
}

// Wrap limits the logins that reach check (see Logins).
func (g *Logins) Wrap(check http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, _, ok := r.BasicAuth(); !ok { // no credentials: no bcrypt
			check.ServeHTTP(w, r)
			return
		}
		key := sha256.Sum256([]byte(r.Header.Get("Authorization")))
		if !g.admit(key, r.RemoteAddr) {
			g.counts.Inc(loginsRefused)
			w.Header().Set("Retry-After", "1")
			http.Error(w, "too many failed logins: try again later", http.StatusTooManyRequests)
			return
		}
		passed := new(bool)
		check.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), passedKey{}, passed)))
		g.learn(key, *passed)
	})
}

// admit reports whether a request with credentials key from remote may
// have its password checked, taking a login from the budgets unless the
// credentials passed before.
func (g *Logins) admit(key [sha256.Size]byte, remote string) bool {
	now := g.now()
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.good[key]; ok {
		g.good[key] = now
		return true
	}
	var addr *rate.Limiter
	if ap, err := netip.ParseAddrPort(remote); err == nil {
		addr = g.addrLimiter(clientAddr(net.TCPAddrFromAddrPort(ap)), now)
	}
	if addr != nil && addr.TokensAt(now) < 1 {
		return false
	}
	if !g.total.AllowN(now, 1) {
		return false
	}
	if addr != nil {
		addr.AllowN(now, 1)
	}
	return true
}

// addrLimiter returns a's budget, made when first needed; nil when the
// table is full of addresses with budget in use (the total still applies).
// Called with g.mu held.
func (g *Logins) addrLimiter(a netip.Addr, now time.Time) *rate.Limiter {
	if l, ok := g.addrs[a]; ok {
		return l
	}
	if len(g.addrs) >= maxAddrs {
		for k, l := range g.addrs { // a full budget is as good as a new one
			if l.TokensAt(now) >= float64(g.lim.PerAddrBurst) {
				delete(g.addrs, k)
			}
		}
		if len(g.addrs) >= maxAddrs {
			return nil
		}
	}
	l := rate.NewLimiter(rate.Limit(g.lim.PerAddrPerSecond), g.lim.PerAddrBurst) // full at first use
	g.addrs[a] = l
	return l
}

// learn remembers credentials that passed (the least recently used out
// when there are maxGood) and forgets ones that no longer do (the password
// changed in the web config).
func (g *Logins) learn(key [sha256.Size]byte, passed bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !passed {
		delete(g.good, key)
		return
	}
	if _, ok := g.good[key]; !ok && len(g.good) >= maxGood {
		var oldest [sha256.Size]byte
		var at time.Time
		for k, t := range g.good {
			if at.IsZero() || t.Before(at) {
				oldest, at = k, t
			}
		}
		delete(g.good, oldest)
	}
	g.good[key] = g.now()
}
