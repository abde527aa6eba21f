package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/exporter-toolkit/web"

	"github.com/gpu-telemetry/gpu-telemetry/internal/counters"
	"github.com/gpu-telemetry/gpu-telemetry/live"
	"github.com/gpu-telemetry/gpu-telemetry/live/metrics"
	"github.com/gpu-telemetry/gpu-telemetry/live/metrics/limit"
)

// Bounds of the metrics endpoint: scrapes are small and served from memory.
const (
	metricsReadTimeout   = 5 * time.Second
	metricsWriteTimeout  = 10 * time.Second
	metricsMaxHeaderSize = 16 << 10
	// An idle keep-alive connection is closed after this, and before it
	// when a new connection needs its slot; Prometheus reconnects at its
	// next scrape.
	metricsIdleTimeout = 10 * time.Second
)

// metricsConns: 16 connections, 4 of them busy (answering, or silent: no
// whole request 2 s after connecting) from one client address, so that one
// host cannot hold every slot; idle and silent ones give way to new ones.
var metricsConns = limit.ConnLimits{Max: 16, PerAddr: 4, Silent: 2 * time.Second}

// metricsLogins: logins with credentials not known to be good, each one
// bcrypt comparison (50-100 ms of one core at bcrypt's cost 10): 1 a second
// in all, 1 every 2 s from one address (bursts of 2), under a tenth of a
// core whatever a flood of wrong passwords sends (make bench: "cadence p99
// under a wrong-password flood").
var metricsLogins = limit.LoginLimits{PerSecond: 1, Burst: 2, PerAddrPerSecond: 0.5, PerAddrBurst: 2}

// LinkSeries is --metrics-nvlink-links: which NVLink links get per-link series.
type LinkSeries = metrics.LinkSeries

// serveMetrics serves /metrics on --metrics-listen with the exporter-toolkit
// web config (TLS, basic auth). The listener is opened before returning. An
// address that cannot be bound (in use, or a unit without AF_INET) is logged
// once and counted through failed, and the logger carries on without
// metrics (as --atop does with a taken port): losing every recording for
// want of a scrape endpoint would be the worse failure. done is nil then.
func serveMetrics(ctx context.Context, cli *CLI, board *live.Board, log *slog.Logger, reg *counters.Registry, failed func()) (chan struct{}, error) {
	// promhttp over the collector (live/metrics/handler.go); registering
	// checks its descriptors once (names, labels, no duplicates).
	opts := []metrics.Option{metrics.NVLinkLinks(cli.MetricsLinks)}
	if cli.MetricsNoWork {
		opts = append(opts, metrics.NoWorkload())
	}
	h, err := metrics.New(board, opts...).Handler(log)
	if err != nil {
		return nil, fmt.Errorf("--metrics-listen: %w", err)
	}
	ln, err := net.Listen("tcp", cli.MetricsListen)
	if err != nil {
		log.Warn("metrics: cannot listen; logging carries on without /metrics (counted as listen_failures)",
			"address", cli.MetricsListen, "error", err)
		failed()
		return nil, nil
	}
	return serveMetricsOn(ctx, ln, cli.WebConfigFile, h, log, reg), nil
}

// serveMetricsOn serves h at /metrics on ln with the web config webCfg
// (checked at start: checkSystem) until ctx is cancelled; done is closed
// then. The endpoint's limits (metricsConns, metricsLogins) count in reg.
func serveMetricsOn(ctx context.Context, ln net.Listener, webCfg string, h http.Handler, log *slog.Logger, reg *counters.Registry) (done chan struct{}) {
	mux := http.NewServeMux()
	mux.Handle("/metrics", h)
	mux.Handle("/", metrics.Index())
	conns := limit.NewConns(ln, metricsConns, reg)
	logins := limit.NewLogins(metricsLogins, nil, reg)
	srv := &http.Server{Handler: logins.Passed(mux), ReadTimeout: metricsReadTimeout, ReadHeaderTimeout: metricsReadTimeout,
		WriteTimeout: metricsWriteTimeout, IdleTimeout: metricsIdleTimeout, MaxHeaderBytes: metricsMaxHeaderSize,
		ConnState: conns.ConnState}
	// web.Serve puts its basic-auth handler (bcrypt) around srv.Handler
	// before it accepts; the login limits go around that, before the first
	// connection is served (TestMetricsWrongPasswordFlood holds it).
	ln = &onFirstAccept{Listener: conns, do: func() { srv.Handler = logins.Wrap(srv.Handler) }}
	flags := &web.FlagConfig{WebListenAddresses: &[]string{ln.Addr().String()}, WebSystemdSocket: new(bool), WebConfigFile: &webCfg}
	log.Info("metrics listening", "address", ln.Addr().String(), "web_config", webCfg)
	done = make(chan struct{})
	go func() {
		defer close(done)
		errc := make(chan error, 1)
		go func() { errc <- web.Serve(ln, srv, flags, log) }()
		select {
		case <-ctx.Done():
			sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			srv.Shutdown(sctx)
			cancel()
			<-errc
		case err := <-errc:
			if err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("metrics endpoint stopped", "error", err)
			}
		}
	}()
	return done
}

// onFirstAccept runs do in the serving goroutine before its first Accept:
// after web.Serve has set up srv, before any connection reads srv.Handler.
type onFirstAccept struct {
	net.Listener
	once sync.Once
	do   func()
}

// Accept runs do the first time, then accepts.
func (l *onFirstAccept) Accept() (net.Conn, error) {
	l.once.Do(l.do)
	return l.Listener.Accept()
}
