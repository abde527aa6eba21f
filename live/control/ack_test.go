package control

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/action"
	"github.com/gpu-telemetry/gpu-telemetry/internal/counters"
	"github.com/gpu-telemetry/gpu-telemetry/internal/testutil"
	"github.com/gpu-telemetry/gpu-telemetry/live"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// An ack from root (uid 0) reaches the daemon's Acker as "root" and
// is answered with its reply; a malformed one, one with a field the
// protocol lacks or an unknown action is refused before it; a daemon
// without an Acker refuses acks.
func TestAck(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("an ack is root's: the test runs as root (as make test does)")
	}
	var got AckRequest
	var by string
	s, stop := serve(t, Config{Ack: func(req AckRequest, who string) (AckReply, error) {
		got, by = req, who
		return AckReply{GPU: 3, UUID: "GPU-1a2b", Acked: req.Action, Action: action.Watch, Reasons: []string{"x (acknowledged)"}}, nil
	}})
	defer stop()
	r, err := Ack(s.cfg.Path, AckRequest{GPU: "3", Action: action.PowerCycle, Note: "cold boot done"}, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if got.GPU != "3" || got.Action != action.PowerCycle || got.Note != "cold boot done" || by != "root" {
		t.Errorf("the Acker got %+v from %q", got, by)
	}
	if r.GPU != 3 || r.Acked != action.PowerCycle || r.Action != action.Watch {
		t.Errorf("reply %+v", r)
	}
	for _, tc := range []struct{ line, want string }{
		{`ack {"gpu":"3","action":"reset"}`, "unknown action"},
		{`ack {"gpu":"3","action":"reboot","who":"me"}`, "unknown field"},
		{`ack {"action":"reboot"}`, "no gpu"},
		{`ack not json`, "ack:"},
	} {
		if _, err := Ask(s.cfg.Path, tc.line, time.Second); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", tc.line, err, tc.want)
		}
	}
	if _, err := Ack(s.cfg.Path, AckRequest{GPU: "3", Action: action.Reboot, Note: strings.Repeat("n", MaxNote+1)}, time.Second); err == nil {
		t.Error("a note over MaxNote was sent")
	}
	s2, stop2 := serve(t, Config{})
	defer stop2()
	if _, err := Ack(s2.cfg.Path, AckRequest{GPU: "3", Action: action.Reboot}, time.Second); err == nil || !strings.Contains(err.Error(), "does not take acks") {
		t.Errorf("a daemon without an Acker: %v", err)
	}
}

// A status asked for once an ack is answered shows what the ack did,
// however recently an answer was built before it: the answers shared
// within Reuse (plain and with options) are not served past an ack (the slurm wrapper's check right
// after `gpu-telemetry ack` saw the acknowledged reboot still there).
func TestStatusAfterAckShowsIt(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("an ack is root's: the test runs as root (as make test does)")
	}
	sl := live.NewSlot(reading.GPU{Index: 0, Name: "sim", BusID: "00000000:01:00.0"})
	sl.Update(func(g *live.GPU) { g.Action = action.Current{Action: action.Reboot, Reasons: []string{"Xid 79"}} })
	board := live.NewBoard([]*live.Slot{sl}, func() live.Host { return live.Host{Now: time.Now(), Version: "test"} })
	var s *Server
	s, err := Listen(Config{Path: filepath.Join(t.TempDir(), "control.sock"), Counters: counters.New(),
		Ack: func(req AckRequest, by string) (AckReply, error) {
			// A status request just before the ack takes effect (a
			// health check's) builds the answer the next ones share.
			s.release(s.status())
			s.release(s.statusWith(Options{Events: 1}))
			sl.Update(func(g *live.GPU) { g.Action = action.Current{} })
			return AckReply{GPU: 0, Acked: req.Action, Action: action.None}, nil
		}}, board)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Serve(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	if _, err := Ack(s.cfg.Path, AckRequest{GPU: "0", Action: action.Reboot}, time.Second); err != nil {
		t.Fatal(err)
	}
	for _, req := range []string{"status", "status events=1"} {
		var d live.Doc
		raw, err := Ask(s.cfg.Path, req, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(raw, &d); err != nil {
			t.Fatal(err)
		}
		if a := d.GPUs[0].Action.Name; a != action.None {
			t.Errorf("%s after the ack: GPU 0's action %s, want none", req, a)
		}
	}
}

func FuzzParseAck(f *testing.F) {
	f.Add([]byte(`ack {"gpu":"3","action":"reboot","note":"x"}`))
	f.Add([]byte(`ack {"gpu":"GPU-1","action":"none"}` + "\n"))
	f.Add([]byte("status"))
	f.Fuzz(func(t *testing.T, line []byte) {
		req, isAck, err := parseAck(line)
		if err == nil && isAck && (req.GPU == "" || len(req.Note) > MaxNote || req.Action >= action.NumActions) {
			t.Errorf("%q taken as %+v", line, req)
		}
	})
}

// An ack from another user than root is refused, whatever lets them
// connect (here a socket opened to everyone): the peer's credentials
// decide, and the Acker is never called.
func TestAckRefusedToOtherUsers(t *testing.T) {
	called := false
	s, stop := serve(t, Config{Ack: func(AckRequest, string) (AckReply, error) { called = true; return AckReply{}, nil }})
	defer stop()
	if err := os.Chmod(s.cfg.Path, 0o666); err != nil {
		t.Fatal(err)
	}
	for d := filepath.Dir(s.cfg.Path); d != "/" && d != "."; d = filepath.Dir(d) {
		if fi, err := os.Stat(d); err == nil && fi.Mode().Perm()&0o001 == 0 {
			os.Chmod(d, fi.Mode().Perm()|0o011)
		}
	}
	c := testutil.DialAs(t, 65534, "unix", s.cfg.Path)
	line, _ := AckLine(AckRequest{GPU: "0", Action: action.Reboot})
	c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write(line); err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(c)
	if !strings.Contains(string(b), "only root may acknowledge") || called {
		t.Errorf("answer %q, Acker called %v", b, called)
	}
}
