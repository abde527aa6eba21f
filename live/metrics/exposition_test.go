package metrics

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/live"
	"github.com/gpu-telemetry/gpu-telemetry/live/livetest"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// views are the shapes the exposition must render as client_golang does.
func views() map[string]live.View {
	many := livetest.View()
	for i := 2; i < 12; i++ { // gpu="10" sorts before gpu="2"
		g := many.GPUs[i%2]
		g.Info.Index, g.Info.UUID = i, "GPU-"+string(rune('a'+i))
		many.GPUs = append(many.GPUs, g)
	}
	odd := livetest.View()
	odd.GPUs[0].Info.Name = "Quote \" back \\ slash\nnew line"
	odd.GPUs[0].Info.Serial = ""
	odd.Host.Version = `v"1\`
	// Invalid UTF-8 from a failing board, as the sampler hands it on (each
	// invalid byte as U+FFFD: promtool refuses the raw bytes, monitor's
	// utf8_test checks that path), and other non-ASCII text.
	odd.GPUs[1].Info.Name = strings.ToValidUTF8("NVIDIA \xff\xfe H100", "\uFFFD")
	odd.GPUs[1].Info.VBIOS = "96.00.é.日本"
	for _, code := range []uint64{119, 79, 154, 13, 31, 43, 45, 48, 61, 62, 63, 64, 68, 69, 74, 92, 94, 95} {
		odd.GPUs[0].Xid(code, odd.Host.Now, "x")
	}
	odd.GPUs[0].Recovery(2, odd.Host.Now, "node reboot")
	odd.Host.Cadence = live.Cadence{}
	odd.Host.Counters = nil
	states := livetest.View()
	states.GPUs[0].Observe(&reading.Sample{GPU: 0, Time: states.Host.Now, Status: reading.StatusFailed, Err: "every call failed"}, 100*time.Millisecond)
	states.GPUs[1].Lost(states.Host.Now)
	states.GPUs = append(states.GPUs, live.GPU{Info: reading.GPU{Index: 2, UUID: "GPU-cccc"}})
	return map[string]live.View{"two GPUs": livetest.View(), "twelve GPUs": many, "odd values": odd, "failing, lost, not started": states}
}

// TestWriteTextMatchesClientGolang: what the daemon serves is, byte for
// byte, what client_golang's registry and expfmt make of the Collector.
func TestWriteTextMatchesClientGolang(t *testing.T) {
	for name, v := range views() {
		t.Run(name, func(t *testing.T) {
			b := board(v)
			want := scrape(t, b)
			c := New(b)
			for i := 0; i < 2; i++ { // the second time from reused buffers
				var got bytes.Buffer
				if err := c.WriteText(&got); err != nil {
					t.Fatal(err)
				}
				g := bytes.ReplaceAll(got.Bytes(), []byte(`goversion="`+runtime.Version()+`"`), []byte(`goversion="GO"`))
				if !bytes.Equal(g, want) {
					t.Fatalf("WriteText differs from client_golang's exposition:\n--- got\n%s\n--- want\n%s", g, want)
				}
			}
		})
	}
}

func TestHandler(t *testing.T) {
	h := New(board(livetest.View())).Handler(nil)
	for _, tc := range []struct {
		method string
		code   int
		body   bool
	}{{"GET", 200, true}, {"HEAD", 200, false}, {"POST", 405, false}} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(tc.method, "/metrics", nil))
		if w.Code != tc.code {
			t.Errorf("%s: status %d, want %d", tc.method, w.Code, tc.code)
		}
		if tc.code == 200 && w.Header().Get("Content-Type") != ContentType {
			t.Errorf("%s: Content-Type %q", tc.method, w.Header().Get("Content-Type"))
		}
		if got := bytes.Contains(w.Body.Bytes(), []byte("gpu_telemetry_gpus 2\n")); got != tc.body {
			t.Errorf("%s: body with the series %v, want %v", tc.method, got, tc.body)
		}
	}
}

// BenchmarkScrapeClientGolang is the same scrape through client_golang
// (registry, const metrics, expfmt): the reference WriteText replaces.
func BenchmarkScrapeClientGolang(b *testing.B) {
	benchScrape(b, clientGolangHandler(New(board(eightGPUs()))))
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
	for b.Loop() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		io.Copy(io.Discard, w.Body)
	}
}
