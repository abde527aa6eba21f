package metrics

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpu-telemetry/gpu-telemetry/live"
	"github.com/gpu-telemetry/gpu-telemetry/live/livetest"
)

// BenchmarkScrape is one /metrics request for eight GPUs as gpu-telemetry
// serves it (Handler, promhttp, no gzip): what a scrape costs the daemon.
func BenchmarkScrape(b *testing.B) {
	h, err := New(livetest.Board(eightGPUs())).Handler(nil)
	if err != nil {
		b.Fatal(err)
	}
	benchScrape(b, h)
}

// BenchmarkScrapeNVLink is the same scrape with the NVLink series of a
// B200 added: 18 links per GPU, each with as many per-link series as
// dcgm-exporter's default NVLink counters give (nvlinkSeries), from a
// synthetic collector of the same shape (const metrics by gpu, uuid, link)
// in the same registry.
func BenchmarkScrapeNVLink(b *testing.B) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(New(livetest.Board(eightGPUs())), nvlinkCollector{gpus: 8, links: 18})
	benchScrape(b, handlerFor(reg, nil))
}

// nvlinkSeries are the per-link series the NVLink health counters will add.
var nvlinkSeries = []string{"nvlink_state", "nvlink_crc_flit_errors_total", "nvlink_crc_data_errors_total",
	"nvlink_replay_errors_total", "nvlink_recovery_errors_total", "nvlink_bandwidth_bytes_total"}

type nvlinkCollector struct{ gpus, links int }

func (n nvlinkCollector) desc(name string) *prometheus.Desc {
	return prometheus.NewDesc(ns+name, "Synthetic NVLink series (benchmark).", []string{"gpu", "uuid", "link"}, nil)
}

func (n nvlinkCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, s := range nvlinkSeries {
		ch <- n.desc(s)
	}
}

func (n nvlinkCollector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range nvlinkSeries {
		d := n.desc(s)
		for g := range n.gpus {
			for l := range n.links {
				ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(g*1000+l), strconv.Itoa(g), "GPU-"+strconv.Itoa(g), strconv.Itoa(l))
			}
		}
	}
}

func eightGPUs() live.View {
	v := livetest.View()
	for i := 2; i < 8; i++ {
		g := v.GPUs[0]
		g.Info.Index = i
		v.GPUs = append(v.GPUs, g)
	}
	return v
}

func benchScrape(b *testing.B, h http.Handler) {
	req := httptest.NewRequest("GET", "/metrics", nil)
	req.Header.Set("Accept-Encoding", "gzip")
	b.ReportAllocs()
	var bytes int
	for b.Loop() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		bytes = w.Body.Len()
		io.Copy(io.Discard, w.Body)
	}
	b.ReportMetric(float64(bytes), "B/scrape")
}
