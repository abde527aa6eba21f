package metrics

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Handler registers the collector in a registry of its own and serves it
// with promhttp (GET or HEAD; other methods are refused). A series the
// registry refuses at a scrape (it checks names, label counts and UTF-8)
// is left out and the rest served; such errors are counted in
// promhttp_metric_handler_errors_total and logged, the first at warning
// level, later ones at debug level, as is a scrape the scraper did not
// read. No gzip: it would cost more than the scrape to save a few tens of
// kB every 15 s. No promhttp Timeout: a scrape reads memory only, and its
// http.TimeoutHandler would buffer every answer; the server's WriteTimeout
// bounds a scrape.
func (c *Collector) Handler(log *slog.Logger) (http.Handler, error) {
	reg := prometheus.NewRegistry()
	if err := reg.Register(c); err != nil {
		return nil, err
	}
	return handlerFor(reg, log), nil
}

// handlerFor is Handler's promhttp handler over a registry.
func handlerFor(reg *prometheus.Registry, log *slog.Logger) http.Handler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	h := promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog:           &errorLog{log: log},
		ErrorHandling:      promhttp.ContinueOnError,
		Registry:           reg,
		DisableCompression: true,
	})
	return readOnly(h)
}

// Index is the answer to "/" on the metrics port: a line pointing at
// /metrics (GET or HEAD, as /metrics); any other path is not found.
func Index() http.Handler {
	return readOnly(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprintln(w, "gpu-telemetry: metrics at /metrics")
	}))
}

// readOnly serves GET and HEAD with h and answers any other method 405
// with the methods allowed: nothing on the metrics port changes anything.
func readOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// errorLog is promhttp's error log on slog: the first error at warning
// level, later ones at debug level, so that a series refused at every
// scrape is said once, not every 15 s.
type errorLog struct {
	log  *slog.Logger
	said atomic.Bool
}

func (e *errorLog) Println(v ...any) {
	level := slog.LevelDebug
	if !e.said.Swap(true) {
		level = slog.LevelWarn
	}
	e.log.Log(context.Background(), level, "metrics scrape: "+fmt.Sprint(v...))
}
