package fleet

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"
)

// webhook is Alertmanager's receiver in the tests: it keeps every alert
// of every notification it gets, by receiver path.
type webhook struct {
	url string
	mu  sync.Mutex
	got []delivered
}

// delivered is one alert as a receiver got it.
type delivered struct {
	Path        string
	Receiver    string
	Status      string
	Labels      map[string]string
	Annotations map[string]string
	At          time.Time
}

func newWebhook(t *testing.T) *webhook {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	w := &webhook{url: "http://" + l.Addr().String()}
	srv := &http.Server{Handler: http.HandlerFunc(w.serve), ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return w
}

func (w *webhook) serve(rw http.ResponseWriter, r *http.Request) {
	var msg struct {
		Receiver string `json:"receiver"`
		Alerts   []struct {
			Status      string            `json:"status"`
			Labels      map[string]string `json:"labels"`
			Annotations map[string]string `json:"annotations"`
		} `json:"alerts"`
	}
	b, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err := json.Unmarshal(b, &msg); err != nil {
		http.Error(rw, err.Error(), http.StatusBadRequest)
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, a := range msg.Alerts {
		w.got = append(w.got, delivered{Path: r.URL.Path, Receiver: msg.Receiver, Status: a.Status, Labels: a.Labels, Annotations: a.Annotations, At: time.Now()})
	}
}

func (w *webhook) alerts() []delivered {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]delivered(nil), w.got...)
}
