package metrics

import (
	"io"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/gpu-telemetry/gpu-telemetry/live/livetest"
)

// BenchmarkScrape is one /metrics request for eight GPUs, as Prometheus
// makes it, served as gpu-telemetry serves it (no gzip): what a scrape costs
// the daemon.
func BenchmarkScrape(b *testing.B) {
	v := livetest.View()
	for i := 2; i < 8; i++ {
		g := v.GPUs[0]
		g.Info.Index = i
		v.GPUs = append(v.GPUs, g)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(New(board(v)))
	h := promhttp.HandlerFor(reg, promhttp.HandlerOpts{DisableCompression: true})
	req := httptest.NewRequest("GET", "/metrics", nil)
	req.Header.Set("Accept-Encoding", "gzip")
	b.ReportAllocs()
	for b.Loop() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		io.Copy(io.Discard, w.Body)
	}
}
