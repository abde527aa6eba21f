package metrics

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/testutil"
	"github.com/gpu-telemetry/gpu-telemetry/live"
	"github.com/gpu-telemetry/gpu-telemetry/live/livetest"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// views are the shapes a scrape must serve well-formed.
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
	// invalid byte as U+FFFD: monitor's utf8_test checks that path), and
	// other non-ASCII text.
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

func handler(t testing.TB, b *live.Board, log *slog.Logger) *httptest.Server {
	t.Helper()
	h, err := New(b).Handler(log)
	if err != nil {
		t.Fatal(err)
	}
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return s
}

// TestHandlerServesEveryView: what /metrics serves for every test view is
// the registry's exposition (the golden file's text, for the golden view)
// and passes promtool.
func TestHandlerServesEveryView(t *testing.T) {
	for name, v := range views() {
		t.Run(name, func(t *testing.T) {
			b := livetest.Board(v)
			s := handler(t, b, nil)
			body := get(t, s.URL, 200)
			if !strings.Contains(body, "gpu_telemetry_gpus "+strconv.Itoa(len(v.GPUs))+"\n") {
				t.Errorf("no gpus series:\n%s", body)
			}
			testutil.CheckMetrics(t, []byte(body))
			if name == "two GPUs" {
				got := bytes.ReplaceAll([]byte(body), []byte(`goversion="`+runtime.Version()+`"`), []byte(`goversion="GO"`))
				if want := scrape(t, b); !bytes.Equal(stripHandlerSeries(got), want) {
					t.Errorf("served text differs from the registry's:\n%s", got)
				}
			}
		})
	}
}

// TestHandler: GET and HEAD are served in the text format (the server
// sends no body for HEAD), other methods refused.
func TestHandler(t *testing.T) {
	s := handler(t, livetest.Board(livetest.View()), nil)
	const text = "text/plain; version=0.0.4; charset=utf-8; escaping=underscores" // as served before promhttp
	for _, tc := range []struct {
		method string
		code   int
		body   bool
	}{{"GET", 200, true}, {"HEAD", 200, false}, {"POST", 405, false}} {
		req, _ := http.NewRequest(tc.method, s.URL+"/metrics", nil)
		r, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(r.Body)
		r.Body.Close()
		if r.StatusCode != tc.code {
			t.Errorf("%s: status %d, want %d", tc.method, r.StatusCode, tc.code)
		}
		if ct := r.Header.Get("Content-Type"); tc.code == 200 && ct != text {
			t.Errorf("%s: Content-Type %q, want %q", tc.method, ct, text)
		}
		if got := bytes.Contains(b, []byte("gpu_telemetry_gpus 2\n")); got != tc.body {
			t.Errorf("%s: body with the series %v, want %v", tc.method, got, tc.body)
		}
	}
}

// TestIndexReadOnly: "/" on the metrics port answers GET and HEAD with
// the pointer to /metrics and every other method 405 with the methods
// allowed, as /metrics does (it answered 200 to POST, DELETE and TRACE);
// another path is not found.
func TestIndexReadOnly(t *testing.T) {
	s := httptest.NewServer(Index())
	t.Cleanup(s.Close)
	for _, tc := range []struct {
		method, path string
		code         int
		allow        string
	}{
		{"GET", "/", 200, ""}, {"HEAD", "/", 200, ""},
		{"POST", "/", 405, "GET, HEAD"}, {"DELETE", "/", 405, "GET, HEAD"},
		{"TRACE", "/", 405, "GET, HEAD"}, {"PUT", "/", 405, "GET, HEAD"},
		{"GET", "/other", 404, ""},
	} {
		req, _ := http.NewRequest(tc.method, s.URL+tc.path, nil)
		r, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(r.Body)
		r.Body.Close()
		if r.StatusCode != tc.code || r.Header.Get("Allow") != tc.allow {
			t.Errorf("%s %s: status %d, Allow %q; want %d, %q", tc.method, tc.path, r.StatusCode, r.Header.Get("Allow"), tc.code, tc.allow)
		}
		if got, want := string(b) == "gpu-telemetry: metrics at /metrics\n", tc.code == 200 && tc.method == "GET"; got != want {
			t.Errorf("%s %s: body %q", tc.method, tc.path, b)
		}
	}
}

// TestRefusedSeriesLeftOutAndCounted: a label value the registry refuses
// (invalid UTF-8 that reached the board) costs that series only: the
// scrape is answered, the refusal counted and logged once at warning level.
func TestRefusedSeriesLeftOutAndCounted(t *testing.T) {
	v := livetest.View()
	v.GPUs[1].Info.Name = "NVIDIA \xff H100"
	var logs bytes.Buffer
	s := handler(t, livetest.Board(v), slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	for range 3 {
		body := get(t, s.URL, 200)
		if strings.Contains(body, `gpu_info{`) && strings.Contains(body, "\xff") {
			t.Fatalf("invalid UTF-8 served:\n%s", body)
		}
		for _, want := range []string{`gpu_telemetry_temperature_celsius{gpu="0",uuid="GPU-aaaa"} 71`, `gpu_telemetry_gpu_info{driver=`} {
			if !strings.Contains(body, want) {
				t.Errorf("scrape lacks %s", want)
			}
		}
		testutil.CheckMetrics(t, []byte(body))
	}
	body := get(t, s.URL, 200)
	// The counter is gathered before this scrape's refusal counts.
	if !strings.Contains(body, `promhttp_metric_handler_errors_total{cause="gathering"} 3`) {
		t.Errorf("refusals not counted:\n%s", body)
	}
	if n := strings.Count(logs.String(), "level=WARN"); n != 1 {
		t.Errorf("%d warnings, want 1:\n%s", n, logs.String())
	}
	if n := strings.Count(logs.String(), "level=DEBUG"); n != 3 {
		t.Errorf("%d debug lines, want 3:\n%s", n, logs.String())
	}
}

// get fetches url and checks the status code.
func get(t testing.TB, url string, code int) string {
	t.Helper()
	r, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	b, err := io.ReadAll(r.Body)
	if err != nil || r.StatusCode != code {
		t.Fatalf("GET %s: %d %v, want %d", url, r.StatusCode, err, code)
	}
	return string(b)
}

// stripHandlerSeries drops promhttp's own error counter from a scrape.
func stripHandlerSeries(b []byte) []byte {
	var out []byte
	for _, l := range bytes.SplitAfter(b, []byte("\n")) {
		if !bytes.Contains(l, []byte("promhttp_metric_handler_errors_total")) {
			out = append(out, l...)
		}
	}
	return out
}
