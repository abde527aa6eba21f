package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/exporter-toolkit/web"
	"golang.org/x/net/netutil"

	"github.com/gpu-telemetry/gpu-telemetry/live"
	"github.com/gpu-telemetry/gpu-telemetry/live/metrics"
)

// Bounds of the metrics endpoint: scrapes are small and served from memory.
const (
	metricsMaxConns      = 8
	metricsReadTimeout   = 5 * time.Second
	metricsWriteTimeout  = 10 * time.Second
	metricsMaxHeaderSize = 16 << 10
)

// LinkSeries is --metrics-nvlink-links: which NVLink links get per-link series.
type LinkSeries = metrics.LinkSeries

// serveMetrics serves /metrics on --metrics-listen with the exporter-toolkit
// web config (TLS, basic auth). The listener is opened before returning. An
// address that cannot be bound (in use, or a unit without AF_INET) is logged
// once and counted through failed, and the logger carries on without
// metrics (as --atop does with a taken port): losing every recording for
// want of a scrape endpoint would be the worse failure. done is nil then.
func serveMetrics(ctx context.Context, cli *CLI, board *live.Board, log *slog.Logger, failed func()) (chan struct{}, error) {
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
	mux := http.NewServeMux()
	mux.Handle("/metrics", h)
	mux.Handle("/", metrics.Index())
	webCfg := cli.WebConfigFile // checked at start (checkSystem)
	ln, err := net.Listen("tcp", cli.MetricsListen)
	if err != nil {
		log.Warn("metrics: cannot listen; logging carries on without /metrics (counted as listen_failures)",
			"address", cli.MetricsListen, "error", err)
		failed()
		return nil, nil
	}
	ln = netutil.LimitListener(ln, metricsMaxConns) // further connections wait in the backlog
	srv := &http.Server{Handler: mux, ReadTimeout: metricsReadTimeout, ReadHeaderTimeout: metricsReadTimeout,
		WriteTimeout: metricsWriteTimeout, IdleTimeout: 30 * time.Second, MaxHeaderBytes: metricsMaxHeaderSize}
	flags := &web.FlagConfig{WebListenAddresses: &[]string{cli.MetricsListen}, WebSystemdSocket: new(bool), WebConfigFile: &webCfg}
	log.Info("metrics listening", "address", ln.Addr().String(), "web_config", webCfg)
	done := make(chan struct{})
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
	return done, nil
}
