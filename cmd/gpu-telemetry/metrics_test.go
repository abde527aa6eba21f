package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/counters"
	"github.com/gpu-telemetry/gpu-telemetry/internal/testutil"
	"github.com/gpu-telemetry/gpu-telemetry/live"
	"github.com/gpu-telemetry/gpu-telemetry/live/metrics"
)

// startMetrics serves the metrics endpoint on 127.0.0.1 with the web config
// webCfg ("" for none) until the end of the test; it returns the address
// and the endpoint's counters.
func startMetrics(t *testing.T, webCfg string) (string, *counters.Registry) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	board := live.NewBoard(nil, func() live.Host { return live.Host{} })
	h, err := metrics.New(board).Handler(nil)
	if err != nil {
		t.Fatal(err)
	}
	reg := counters.New()
	ctx, cancel := context.WithCancel(context.Background())
	done := serveMetricsOn(ctx, ln, webCfg, h, slog.New(slog.DiscardHandler), reg)
	t.Cleanup(func() { cancel(); <-done })
	return ln.Addr().String(), reg
}

// scrapeWithin scrapes /metrics on a new connection from from and fails
// the test unless it is answered 200 within limit.
func scrapeWithin(t *testing.T, limit time.Duration, from, addr string, hdr ...string) {
	t.Helper()
	start := time.Now()
	code, err := testutil.HTTPGet(testutil.DialFrom(t, from, addr), "/metrics", hdr...)
	if d := time.Since(start); err != nil || code != http.StatusOK || d > limit {
		t.Errorf("scrape from %s: %d, %v after %v, want 200 within %v", from, code, err, d, limit)
	}
}

// TestMetricsIdleConnectionsDoNotBlockAScrape: idle keep-alive connections
// (eight from one address held every slot for 30 s: issue 41) never hold
// the slots a scrape needs: the oldest idle one gives way, from the
// scraper's address or another, however many there are.
func TestMetricsIdleConnectionsDoNotBlockAScrape(t *testing.T) {
	addr, _ := startMetrics(t, "")
	testutil.IdleHTTPConns(t, 8, "127.0.0.1", addr, "/metrics")
	scrapeWithin(t, time.Second, "127.0.0.1", addr)
	scrapeWithin(t, time.Second, "127.0.0.2", addr)
	for i := 2; i < 2+metricsConns.Max/metricsConns.PerAddr; i++ { // every slot idle
		testutil.IdleHTTPConns(t, metricsConns.PerAddr, fmt.Sprintf("127.0.0.%d", i), addr, "/metrics")
	}
	scrapeWithin(t, time.Second, "127.0.0.1", addr)
	scrapeWithin(t, time.Second, "127.0.0.99", addr)
}

// TestMetricsIdleTLSConnectionsDoNotBlockAScrape: the same over TLS (the
// server reports the state of the TLS connection, not of the listener's).
func TestMetricsIdleTLSConnectionsDoNotBlockAScrape(t *testing.T) {
	dir := t.TempDir()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	crt, kf, cfg := filepath.Join(dir, "c.pem"), filepath.Join(dir, "k.pem"), filepath.Join(dir, "web.yml")
	for _, f := range []struct {
		path string
		b    []byte
	}{
		{crt, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})},
		{kf, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb})},
		{cfg, []byte("tls_server_config:\n  cert_file: " + crt + "\n  key_file: " + kf + "\n")},
	} {
		if err := os.WriteFile(f.path, f.b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	addr, _ := startMetrics(t, cfg)
	get := func(from string) (int, error) {
		c := tls.Client(testutil.DialFrom(t, from, addr), &tls.Config{InsecureSkipVerify: true})
		return testutil.HTTPGet(c, "/metrics")
	}
	for i := range metricsConns.Max {
		if code, err := get(fmt.Sprintf("127.0.0.%d", 1+i/metricsConns.PerAddr)); err != nil || code != http.StatusOK {
			t.Fatalf("idle TLS connection %d: %d, %v", i, code, err)
		}
	}
	start := time.Now()
	if code, err := get("127.0.0.99"); err != nil || code != http.StatusOK || time.Since(start) > time.Second {
		t.Errorf("TLS scrape with every slot idle: %d, %v after %v, want 200 within 1 s", code, err, time.Since(start))
	}
}

// TestMetricsScrapeGetsThroughSilentConnections: more connections than the
// limit from one address, each having sent half a request (they would hold
// their slots for the 5 s read timeout, then the next ones waiting
// behind them), do not keep a scrape out past metricsConns.Silent: from
// another address, or from theirs.
func TestMetricsScrapeGetsThroughSilentConnections(t *testing.T) {
	addr, _ := startMetrics(t, "")
	for range metricsConns.Max + 4 {
		c := testutil.DialFrom(t, "127.0.0.1", addr)
		fmt.Fprint(c, "GET /metrics HTTP/1.1\r\n")
	}
	within := metricsConns.Silent + time.Second
	scrapeWithin(t, within, "127.0.0.2", addr)
	scrapeWithin(t, within, "127.0.0.1", addr)
}

// Basic-auth users of the flood test: bcrypt at cost 4 to keep it quick.
const testWebConfig = `basic_auth_users:
  prometheus: $2a$04$gBjy2AzcN/oACYiPibfw5ewGQNeJmG8nWqlbJ0GgzM661BBohIqyq
  other: $2a$04$sLvTG3usu9P.JkdoDrG9juosQI80X8JCYzuJ/Ba7p06ECG2T7X.C2
`

// basic is an Authorization header line.
func basic(user, pass string) string {
	return "Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
}

// TestMetricsWrongPasswordFlood: with basic auth, a flood of wrong
// passwords (each a bcrypt comparison in exporter-toolkit, answered 401)
// gets at most metricsLogins' budget checked; the rest is answered 429
// without a check and counted. A scraper whose password passed before gets
// through during the flood; a new login with the right password gets
// through once the flood's second is over (and half a second more).
func TestMetricsWrongPasswordFlood(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "web.yml")
	if err := os.WriteFile(cfg, []byte(testWebConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	addr, reg := startMetrics(t, cfg)
	prom := testutil.DialFrom(t, "127.0.0.9", addr)
	if code, err := testutil.HTTPGet(prom, "/metrics", basic("prometheus", "right")); err != nil || code != http.StatusOK {
		t.Fatalf("first scrape with the password: %d, %v", code, err)
	}
	var flood []net.Conn
	for i := 1; i <= 4; i++ {
		flood = append(flood, testutil.DialFrom(t, fmt.Sprintf("127.0.0.%d", i), addr))
	}
	const n = 60
	checked := 0
	start := time.Now()
	for i := range n {
		code, err := testutil.HTTPGet(flood[i%len(flood)], "/metrics", basic("prometheus", fmt.Sprint("wrong", i)))
		switch {
		case err != nil:
			t.Fatalf("wrong password %d: %v", i, err)
		case code == http.StatusUnauthorized:
			checked++
		case code != http.StatusTooManyRequests:
			t.Fatalf("wrong password %d: %d, want 401 or 429", i, code)
		}
	}
	took := time.Since(start)
	if most := metricsLogins.Burst + int(metricsLogins.PerSecond*took.Seconds()) + 1; checked > most {
		t.Errorf("%d wrong passwords in %v: %d checked, want at most %d", n, took, checked, most)
	}
	if got := counter(reg, "metrics_logins_refused"); got != uint64(n-checked) {
		t.Errorf("metrics_logins_refused = %d, want %d", got, n-checked)
	}
	if code, err := testutil.HTTPGet(prom, "/metrics", basic("prometheus", "right")); err != nil || code != http.StatusOK {
		t.Errorf("known scraper during the flood: %d, %v, want 200", code, err)
	}
	time.Sleep(time.Second + time.Second/2) // a login refilled, with room for a slow machine
	scrapeWithin(t, time.Second, "127.0.0.5", addr, basic("other", "right2"))
}

// counter returns the value of the counter name in reg.
func counter(reg *counters.Registry, name string) uint64 {
	for _, v := range reg.Read() {
		if v.Name == name {
			return v.Value
		}
	}
	return 0
}
