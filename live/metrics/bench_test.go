package metrics

import (
	"net/http"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// BenchmarkScrape is one /metrics request for eight GPUs as gpu-telemetry
// serves it (Handler, no gzip): what a scrape costs the daemon.
func BenchmarkScrape(b *testing.B) {
	benchScrape(b, New(board(eightGPUs())).Handler(nil))
}

func clientGolangHandler(c *Collector) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{DisableCompression: true})
}
