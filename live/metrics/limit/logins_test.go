package limit

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/counters"
)

// checker stands for exporter-toolkit's basic-auth handler: it counts the
// password checks (bcrypt comparisons) it makes and serves next for the
// right password.
type checker struct {
	checks int
	next   http.Handler
}

func (c *checker) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	user, pass, ok := r.BasicAuth()
	if !ok {
		http.Error(w, "unauthorized", http.StatusUnauthorized) // no bcrypt
		return
	}
	c.checks++
	if (user == "prometheus" && pass == "right") || (user == "other" && pass == "right2") {
		c.next.ServeHTTP(w, r)
		return
	}
	http.Error(w, "unauthorized", http.StatusUnauthorized)
}

// fakeClock is a settable clock.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

// login sends one request from remote with user and pass ("" user: no
// credentials) and returns the status.
func login(h http.Handler, remote, user, pass string) int {
	r := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	r.RemoteAddr = remote
	if user != "" {
		r.SetBasicAuth(user, pass)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Code
}

// newGate returns a Logins over a checker, on a fake clock.
func newGate(lim LoginLimits) (http.Handler, *Logins, *checker, *fakeClock) {
	clk := &fakeClock{t: time.Date(2026, 12, 6, 8, 0, 0, 0, time.UTC)}
	g := NewLogins(lim, clk.now, counters.New())
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	c := &checker{next: g.Passed(ok)}
	return g.Wrap(c), g, c, clk
}

var testLogins = LoginLimits{PerSecond: 2, Burst: 4, PerAddrPerSecond: 1, PerAddrBurst: 2}

// TestWrongPasswordFloodIsBounded: a flood of wrong passwords from many
// addresses makes at most Burst + PerSecond × seconds password checks; the
// rest are answered 429 without a check and counted. One address alone gets
// its own budget only.
func TestWrongPasswordFloodIsBounded(t *testing.T) {
	h, g, c, clk := newGate(testLogins)
	for i := range 100 {
		if code := login(h, "192.0.2.1:1000", "prometheus", fmt.Sprint("wrong", i)); i >= 2 && code != http.StatusTooManyRequests {
			t.Fatalf("wrong password %d from one address: %d, want 429", i, code)
		}
	}
	if c.checks != 2 {
		t.Errorf("one address's flood: %d password checks, want its burst, 2", c.checks)
	}
	const seconds = 10
	for s := range seconds {
		for i := range 100 {
			login(h, fmt.Sprintf("198.51.100.%d:2000", i), "prometheus", fmt.Sprint("wrong", s, i))
			login(h, fmt.Sprintf("[2001:db8:%x::1]:2000", i), "prometheus", fmt.Sprint("wrong6", s, i))
		}
		clk.t = clk.t.Add(time.Second)
	}
	// The single address spent 2 of the total's burst of 4 at the start.
	if want := 2 + 2 + 2*(seconds-1); c.checks > want {
		t.Errorf("a flood from 200 addresses for %d s: %d password checks, want at most %d", seconds, c.checks, want)
	}
	if got, want := g.counts.Load(loginsRefused), uint64(100+2*100*seconds-c.checks); got != want {
		t.Errorf("Refused() = %d, want %d (every request not checked)", got, want)
	}
	if code := login(h, "192.0.2.1:1000", "prometheus", "right"); code != http.StatusOK {
		t.Errorf("the right password after the flood: %d, want 200", code)
	}
	if code := login(h, "192.0.2.1:1000", "", ""); code != http.StatusUnauthorized {
		t.Errorf("no credentials: %d, want 401 from the checker (not limited)", code)
	}
}

// TestKnownGoodCredentialsPassDuringAFlood: credentials that passed once
// are let through while a flood has spent every budget, without taking
// from them; credentials that stop passing (the password changed) are
// limited again.
func TestKnownGoodCredentialsPassDuringAFlood(t *testing.T) {
	h, _, c, clk := newGate(testLogins)
	if code := login(h, "192.0.2.9:1000", "prometheus", "right"); code != http.StatusOK {
		t.Fatalf("first login: %d", code)
	}
	for i := range 50 {
		login(h, fmt.Sprintf("198.51.100.%d:2000", i), "prometheus", fmt.Sprint("wrong", i))
		login(h, "192.0.2.9:1000", "prometheus", fmt.Sprint("wrong", i))
	}
	before := c.checks
	for range 5 {
		if code := login(h, "192.0.2.9:1000", "prometheus", "right"); code != http.StatusOK {
			t.Errorf("known-good credentials during the flood: %d, want 200", code)
		}
	}
	if code := login(h, "192.0.2.10:1000", "other", "right2"); code != http.StatusTooManyRequests {
		t.Errorf("new right credentials with the total spent: %d, want 429", code)
	}
	clk.t = clk.t.Add(time.Second)
	if code := login(h, "192.0.2.10:1000", "other", "right2"); code != http.StatusOK {
		t.Errorf("new right credentials a second after the flood: %d, want 200", code)
	}
	if c.checks != before+5+1 {
		t.Errorf("%d checks, want %d", c.checks, before+6)
	}
}

// TestGoodCredentialsAreForgottenWhenTheyFail: credentials that passed and
// then fail (the web config's password changed) take from the budgets again.
func TestGoodCredentialsAreForgottenWhenTheyFail(t *testing.T) {
	h, _, c, _ := newGate(testLogins)
	login(h, "192.0.2.9:1000", "prometheus", "right")
	c.next = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { http.Error(w, "no", http.StatusUnauthorized) })
	for i := range 5 {
		code := login(h, "192.0.2.9:1000", "prometheus", "right")
		if want := map[bool]int{true: http.StatusUnauthorized, false: http.StatusTooManyRequests}[i < 2]; code != want {
			t.Errorf("old password, try %d: %d, want %d", i, code, want)
		}
	}
}
