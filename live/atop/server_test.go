package atop

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/counters"
	"github.com/gpu-telemetry/gpu-telemetry/internal/testutil"
	"github.com/gpu-telemetry/gpu-telemetry/live/atop/atoptest"
)

func testConfig(t *testing.T) Config {
	c := DefaultConfig()
	c.TCP = "127.0.0.1:0"
	c.Unix = fmt.Sprintf("@gpu-telemetry-test-%d-%s", os.Getpid(), strings.ReplaceAll(t.Name(), "/", "-"))
	return c
}

func startServer(t *testing.T, a *Accumulator, cfg Config) (*Server, []string, *testutil.LogBuf) {
	t.Helper()
	lb := &testutil.LogBuf{}
	srv := NewServer(a, cfg, slog.New(slog.NewTextHandler(lb, nil)), counters.New())
	ctx, cancel := context.WithCancel(context.Background())
	addrs := srv.Start(ctx)
	t.Cleanup(func() { cancel(); srv.Close() })
	return srv, addrs, lb
}

// TestBothVersionsParseAsAtop: a v1 client on TCP and a v2 client on the
// abstract socket read the same figures the way atop's gpucom.c parses them.
func TestBothVersionsParseAsAtop(t *testing.T) {
	a, _ := scripted(t)
	_, addrs, _ := startServer(t, a, testConfig(t))
	if len(addrs) != 2 {
		t.Fatalf("listening on %v", addrs)
	}
	for _, tc := range []struct {
		network, addr string
		version       byte
	}{{"tcp", addrs[0], 1}, {"unix", addrs[1], 2}} {
		t.Run(tc.network, func(t *testing.T) {
			cl, err := atoptest.Dial(tc.network, tc.addr, tc.version)
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			if len(cl.GPUs) != 2 || cl.GPUs[0].BusID != "00000000:01:00.0" || cl.GPUs[1].Type != "NVIDIA_B200" ||
				cl.GPUs[0].Tasks != '1' || cl.GPUs[1].Tasks != '0' {
				t.Fatalf("types %+v", cl.GPUs)
			}
			gpus, procs, err := cl.Stats()
			if err != nil {
				t.Fatal(err)
			}
			g := gpus[0]
			if g.BusyNow != 75 || g.MemBusyNow != 20 || g.MemUsed != 40000*1024 || g.Samples != 2 || g.BusyCum != 150 {
				t.Errorf("gpu 0 %+v", g)
			}
			if gpus[1].BusyNow != -1 || gpus[1].NrProcs != 0 {
				t.Errorf("gpu 1 %+v", gpus[1])
			}
			// A new client: active processes only (200 exited before it came).
			// Version 1 sends the last second's busy %, version 2 the sum over
			// the two seconds seen, with the kind.
			busy, kind0, kind1 := int64(70), byte(0), byte(0)
			if tc.version == 2 {
				busy, kind0, kind1 = 140, 'C', 'G' // 100 is in both lists
			}
			if len(procs) != 2 || procs[0].PID != 100 || procs[0].GPUBusy != busy || procs[0].MemBusy != busy/2 ||
				procs[0].Sample != 2 || procs[0].Kind != kind0 || procs[0].State != 'A' ||
				procs[1].PID != 300 || procs[1].MemNow != -1 || procs[1].GPUBusy != -1 || procs[1].Kind != kind1 {
				t.Errorf("procs %+v", procs)
			}
		})
	}
}

func TestPortTakenCarriesOn(t *testing.T) {
	cfg := testConfig(t)
	cfg.TCP = testutil.TakenAddr(t)
	a, _ := scripted(t)
	srv, addrs, lb := startServer(t, a, cfg)
	if len(addrs) != 1 || !strings.HasPrefix(addrs[0], "@") {
		t.Fatalf("listening on %v, want only the unix socket", addrs)
	}
	if n := srv.counts.Load(ListenFailures); n != 1 {
		t.Errorf("listen_failures %d, want 1", n)
	}
	if n := strings.Count(lb.String(), "cannot listen"); n != 1 {
		t.Errorf("%d log lines about the taken port, want 1:\n%s", n, lb)
	}
	if _, err := atoptest.Dial("unix", addrs[0], 2); err != nil {
		t.Errorf("unix socket not served: %v", err)
	}
}

// giveUp is how long a test waits for the server before failing: a deadline
// for a server that never answers, not a measure of how fast it is (a loaded
// machine running the race detector can take seconds).
const giveUp = 60 * time.Second

func readAll(t *testing.T, c net.Conn) []byte {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(giveUp))
	b, err := io.ReadAll(c)
	var ne net.Error
	if err != nil && (errors.As(err, &ne) && ne.Timeout()) {
		t.Fatalf("connection not closed by the server: %v", err)
	}
	// EOF or a reset (the server closed with our bytes unread): closed.
	return b
}

func TestBadAndSilentClientsDropped(t *testing.T) {
	a, _ := scripted(t)
	// Garbage, on a server with the default first-request wait: the test
	// must not race a short wait between connecting and asking.
	srv, addrs, lb := startServer(t, a, testConfig(t))
	c, err := net.Dial("tcp", addrs[0])
	if err != nil {
		t.Fatal(err)
	}
	c.Write([]byte("T\x01"))
	var pre [4]byte
	c.SetReadDeadline(time.Now().Add(giveUp))
	if _, err := io.ReadFull(c, pre[:]); err != nil || binary.BigEndian.Uint32(pre[:])>>24 != 1 {
		t.Fatalf("reply before the garbage: %q %v", pre, err)
	}
	io.ReadFull(c, make([]byte, binary.BigEndian.Uint32(pre[:])&0xffffff))
	c.Write([]byte("GET / HTTP/1.0\r\n\r\n"))
	if b := readAll(t, c); len(b) != 0 {
		t.Errorf("garbage answered: %q", b)
	}
	// Dropped once, for the garbage (logged), not for silence.
	if d, n := srv.counts.Load(clientsDropped), srv.counts.Load(requestsAnswered); d != 1 || n != 1 {
		t.Errorf("after garbage: %d dropped, %d requests answered; want 1 1", d, n)
	}
	if strings.Count(lb.String(), "request atop never sends") != 1 {
		t.Errorf("log:\n%s", lb)
	}
	// The server still serves.
	if _, err := atoptest.Dial("tcp", addrs[0], 1); err != nil {
		t.Error(err)
	}

	// Silence, on a server that waits 100 ms for a first request.
	cfg := testConfig(t)
	cfg.Unix += "-silent"
	cfg.First = 100 * time.Millisecond
	srv, addrs, lb = startServer(t, a, cfg)
	s, err := net.Dial("tcp", addrs[0])
	if err != nil {
		t.Fatal(err)
	}
	if b := readAll(t, s); len(b) != 0 {
		t.Errorf("silent client got %q", b)
	}
	// Half a request and silence.
	h, _ := net.Dial("unix", addrs[1])
	h.Write([]byte("S"))
	readAll(t, h)
	deadline := time.Now().Add(giveUp)
	for srv.counts.Load(clientsDropped) < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	// Both dropped for silence: none for a bad request (that is logged).
	if d, n := srv.counts.Load(clientsDropped), srv.counts.Load(requestsAnswered); d != 2 || n != 0 || strings.Contains(lb.String(), "request atop never sends") {
		t.Errorf("after silence: %d dropped, %d requests answered; want 2 for silence, 0; log:\n%s", d, n, lb)
	}
	// It still serves a client that asks in time.
	servedBy(t, addrs[0], deadline, "after dropping silent clients")
}

// servedBy dials addr until a client is served, failing the test at
// deadline. A client descheduled for 100 ms between connecting and asking is
// dropped as silent: it asks again.
func servedBy(t *testing.T, addr string, deadline time.Time, when string) {
	t.Helper()
	for {
		cl, err := atoptest.Dial("tcp", addr, 1)
		if err == nil {
			cl.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not served %s: %v", when, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestConnectionLimit(t *testing.T) {
	a, _ := scripted(t)
	cfg := testConfig(t)
	cfg.MaxConns = 2
	srv, addrs, _ := startServer(t, a, cfg)
	var open []*atoptest.Client
	for range 2 {
		cl, err := atoptest.Dial("tcp", addrs[0], 1)
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		open = append(open, cl)
	}
	c, err := net.Dial("tcp", addrs[0])
	if err != nil {
		t.Fatal(err)
	}
	c.Write([]byte("T\x01"))
	if b := readAll(t, c); len(b) != 0 {
		t.Errorf("third client served: %q", b)
	}
	if n := srv.counts.Load(clientsRefused); n != 1 {
		t.Errorf("refused %d, want 1", n)
	}
	// The two admitted clients keep working; after one leaves, a new one is let in.
	if _, _, err := open[0].Stats(); err != nil {
		t.Error(err)
	}
	open[1].Close()
	servedBy(t, addrs[0], time.Now().Add(giveUp), "after an admitted client left (slot not freed)")
}

// asks sends a Types request on c and says whether it was answered.
func asks(c net.Conn, version byte) bool {
	c.SetDeadline(time.Now().Add(giveUp))
	if _, err := c.Write([]byte{'T', version}); err != nil {
		return false
	}
	var pre [4]byte
	_, err := io.ReadFull(c, pre[:])
	return err == nil && pre[0] == version
}

// TestOneUserCannotTakeEverySlot: a user other than root holds at most 4
// connections, on TCP and on the unix socket together (the fifth is
// closed unanswered, counted and logged once), while other users and root
// are still served. Any local user could hold all 32 for an hour.
func TestOneUserCannotTakeEverySlot(t *testing.T) {
	a, _ := scripted(t)
	srv, addrs, lb := startServer(t, a, testConfig(t))
	const perUser = 4 // DefaultConfig's, as docs/atop.md says
	const user, other = 65534, 65533
	eps := []struct {
		network, addr string
		version       byte
	}{{"tcp", addrs[0], 1}, {"unix", addrs[1], 2}}
	for n := range perUser {
		ep := eps[n%2]
		if c := testutil.DialAs(t, user, ep.network, ep.addr); !asks(c, ep.version) {
			t.Fatalf("%s: connection %d of uid %d not served", ep.network, n+1, user)
		}
	}
	for i, ep := range eps {
		if c := testutil.DialAs(t, user, ep.network, ep.addr); asks(c, ep.version) {
			t.Errorf("%s: connection %d of uid %d served", ep.network, perUser+1+i, user)
		}
		if n := srv.counts.Load(clientsRefused); n != uint64(i+1) {
			t.Errorf("%s: refused %d, want %d", ep.network, n, i+1)
		}
		if c := testutil.DialAs(t, other, ep.network, ep.addr); !asks(c, ep.version) {
			t.Errorf("%s: another user refused", ep.network)
		}
		for range perUser + 1 { // root: not limited
			cl, err := atoptest.Dial(ep.network, ep.addr, ep.version)
			if err != nil {
				t.Fatalf("%s: root refused: %v", ep.network, err)
			}
			defer cl.Close()
		}
	}
	if n := strings.Count(lb.String(), "too many connections from one user"); n != 1 {
		t.Errorf("refusal logged %d times, want once:\n%s", n, lb)
	}
}

// TestSilentClientsMakeRoom: with every slot taken, a new client takes the
// place of the oldest connection that has not asked yet, which is closed
// (counted as dropped for silence); clients that asked keep theirs. A new
// client was refused while the silent ones stayed (10 s each).
func TestSilentClientsMakeRoom(t *testing.T) {
	a, _ := scripted(t)
	cfg := testConfig(t)
	cfg.MaxConns = 3
	srv, addrs, lb := startServer(t, a, cfg)
	asked, err := atoptest.Dial("tcp", addrs[0], 1)
	if err != nil {
		t.Fatal(err)
	}
	defer asked.Close()
	var silent []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", addrs[0])
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		silent = append(silent, c)
		for deadline := time.Now().Add(giveUp); srv.counts.Load(connsAccepted) < uint64(1+len(silent)); {
			if time.Now().After(deadline) {
				t.Fatal("silent client not accepted")
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	for n := range 2 { // each displaces one silent client, oldest first
		cl, err := atoptest.Dial("tcp", addrs[0], 1)
		if err != nil {
			t.Fatalf("new client %d with the slots taken: %v", n, err)
		}
		defer cl.Close()
		if b := readAll(t, silent[n]); len(b) != 0 {
			t.Errorf("silent client %d told %q", n, b)
		}
	}
	if _, _, err := asked.Stats(); err != nil {
		t.Errorf("the client that asked lost its connection: %v", err)
	}
	c, err := net.Dial("tcp", addrs[0]) // none silent now: refused
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if asks(c, 1) {
		t.Error("a fourth client served with the three slots held by clients that asked")
	}
	if d, r := srv.counts.Load(clientsDropped), srv.counts.Load(clientsRefused); d != 2 || r != 1 || strings.Contains(lb.String(), "request atop never sends") {
		t.Errorf("%d dropped, %d refused; want 2 dropped for silence (none for a bad request), 1 refused; log:\n%s", d, r, lb)
	}
}
