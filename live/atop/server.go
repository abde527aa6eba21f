package atop

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/counters"
	"github.com/gpu-telemetry/gpu-telemetry/internal/peer"
)

// Default listen addresses. atopgpud binds every interface; atop only ever
// connects to loopback, so loopback is all we bind.
const (
	DefaultTCP  = "127.0.0.1:59123"  // API version 1 (atop 2.8 .. 2.12)
	DefaultUnix = "@atopgpud_nvidia" // API version 2 (atop 2.13+), abstract unix socket
)

// Config bounds the server.
type Config struct {
	TCP      string        // "" = no TCP listener
	Unix     string        // "" = no unix listener; a leading '@' means abstract
	MaxConns int           // connections served at once; more are closed at once
	PerUser  int           // connections one user other than root may hold (0: no limit but MaxConns)
	First    time.Duration // a new connection must send its first request within this
	Idle     time.Duration // later requests: atop asks once per interval (up to some minutes)
	Write    time.Duration // a reply must be taken within this
}

// DefaultConfig is what --atop uses. Any local user may connect (as to
// atopgpud): one user holds at most 4 connections (root any number), one
// that never asks is dropped after 2 s (atop asks as it connects), and
// when all 32 are taken a new one takes the place of the oldest that has
// not asked yet.
func DefaultConfig() Config {
	return Config{TCP: DefaultTCP, Unix: DefaultUnix, MaxConns: 32, PerUser: 4,
		First: 2 * time.Second, Idle: time.Hour, Write: 5 * time.Second}
}

// Server answers atop clients from an Accumulator.
type Server struct {
	acc *Accumulator
	cfg Config
	log *slog.Logger

	mu    sync.Mutex
	lns   []net.Listener
	conns map[net.Conn]*conn
	// held counts the connections each limited client holds (displaced
	// ones no longer count), and displaced those closed to make room whose
	// handlers have not returned yet.
	held      map[string]int
	displaced int
	seq       uint64 // accept order
	wg        sync.WaitGroup

	counts                            *counters.Registry // the registry it counts in (counters.go)
	toldRefused, toldPerUser, toldBad atomic.Bool
}

// conn is a connection being served; its fields are guarded by Server.mu.
type conn struct {
	c         net.Conn
	client    string // the user (or address) it counts against; "" for root
	seq       uint64
	asked     bool // its first request is in
	displaced bool // closed to make room for a newer connection
}

// NewServer returns a server counting in reg (required); nothing listens
// until Start.
func NewServer(acc *Accumulator, cfg Config, log *slog.Logger, reg *counters.Registry) *Server {
	counters.Need(reg, "atop.NewServer's registry")
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = 32
	}
	return &Server{acc: acc, cfg: cfg, log: log, conns: map[net.Conn]*conn{}, held: map[string]int{}, counts: reg}
}

// Start binds the configured addresses and serves until ctx is cancelled or
// Close is called. An address that cannot be bound (a real atopgpud holding
// port 59123) is logged once and skipped: the rest carries on. It returns the
// addresses actually listened on.
func (s *Server) Start(ctx context.Context) []string {
	var addrs []string
	for _, a := range []struct{ network, addr string }{{"tcp", s.cfg.TCP}, {"unix", s.cfg.Unix}} {
		if a.addr == "" {
			continue
		}
		ln, err := net.Listen(a.network, a.addr)
		if err != nil {
			s.log.Warn("atop: cannot listen; serving atop without it (is atopgpud running?)",
				"network", a.network, "addr", a.addr, "error", err)
			s.counts.Inc(ListenFailures)
			continue
		}
		s.mu.Lock()
		s.lns = append(s.lns, ln)
		s.mu.Unlock()
		addrs = append(addrs, ln.Addr().String())
		s.log.Info("atop: serving atopgpud protocol", "network", a.network, "addr", ln.Addr().String())
		s.wg.Add(1)
		go s.accept(ln)
	}
	go func() {
		<-ctx.Done()
		s.Close()
	}()
	return addrs
}

// Close stops listening, drops every connection and waits for the handlers.
func (s *Server) Close() {
	s.mu.Lock()
	for _, ln := range s.lns {
		ln.Close()
	}
	s.lns = nil
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

func (s *Server) accept(ln net.Listener) {
	defer s.wg.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of descriptors and the like: back off a little.
			time.Sleep(100 * time.Millisecond)
			continue
		}
		cn := &conn{c: c, client: clientOf(c)}
		s.mu.Lock()
		why := s.admit(cn)
		if why != "" {
			s.mu.Unlock()
			s.counts.Inc(clientsRefused) // counted before the client can see the close
			c.Close()
			told := &s.toldRefused
			if why == whyPerUser {
				told = &s.toldPerUser
			}
			if !told.Swap(true) {
				s.log.Warn("atop: "+why+"; connection closed", "max", s.cfg.MaxConns, "per_user", s.cfg.PerUser, "client", cn.client)
			}
			continue
		}
		s.wg.Add(1)
		s.mu.Unlock()
		s.counts.Inc(connsAccepted)
		go s.serve(cn)
	}
}

// Reasons admit refuses a connection.
const (
	whyFull    = "too many clients"
	whyPerUser = "too many connections from one user"
)

// admit takes cn in, or says why not: its user holds PerUser connections
// already, or MaxConns are held and none has yet to ask (else the oldest
// of those is closed to make room: its handler's read fails at once).
// The first request's deadline is set here, before the handler runs, so
// that displacing it is never undone. Called with s.mu held.
func (s *Server) admit(cn *conn) string {
	if cn.client != "" && s.cfg.PerUser > 0 && s.held[cn.client] >= s.cfg.PerUser {
		return whyPerUser
	}
	if len(s.conns)-s.displaced >= s.cfg.MaxConns {
		var oldest *conn
		for _, o := range s.conns {
			if !o.asked && !o.displaced && (oldest == nil || o.seq < oldest.seq) && !requestWaiting(o.c) {
				oldest = o
			}
		}
		if oldest == nil {
			return whyFull
		}
		oldest.displaced = true
		s.displaced++
		s.release(oldest)
		oldest.c.SetReadDeadline(time.Unix(1, 0))
	}
	s.seq++
	cn.seq = s.seq
	cn.c.SetReadDeadline(time.Now().Add(s.cfg.First))
	s.conns[cn.c] = cn
	if cn.client != "" {
		s.held[cn.client]++
	}
	return ""
}

// release stops counting cn against its client. Called with s.mu held.
func (s *Server) release(cn *conn) {
	if cn.client == "" {
		return
	}
	if s.held[cn.client]--; s.held[cn.client] <= 0 {
		delete(s.held, cn.client)
	}
}

// requestWaiting says whether a whole request (2 bytes) waits unread on
// c: a client that has asked, whose handler has not read it yet.
func requestWaiting(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	var buf [2]byte
	return ok && peer.Peek(sc, buf[:]) == len(buf)
}

// clientOf names whom c counts against: its user ("uid 1000"), "" for
// root (not limited), or its address where the user cannot be told (a
// TCP client on another host).
func clientOf(c net.Conn) string {
	if uid, ok := peer.User(c); ok {
		if uid == 0 {
			return ""
		}
		return "uid " + strconv.FormatUint(uint64(uid), 10)
	}
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		return "address " + a.IP.String()
	}
	return "unknown"
}

// serve answers one client until it goes away, misbehaves or stays silent.
func (s *Server) serve(cn *conn) {
	c := cn.c
	cl := s.acc.Register()
	defer func() {
		s.acc.Unregister(cl)
		c.Close()
		s.mu.Lock()
		delete(s.conns, c)
		if cn.displaced {
			s.displaced--
		} else {
			s.release(cn)
		}
		s.mu.Unlock()
		s.wg.Done()
	}()
	var req [2]byte
	for first := true; ; first = false {
		if !first { // the first request's deadline was set by admit
			c.SetReadDeadline(time.Now().Add(s.cfg.Idle))
		}
		if _, err := io.ReadFull(c, req[:]); err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				s.counts.Inc(clientsDropped)
			}
			return
		}
		if first {
			s.mu.Lock()
			cn.asked = true
			s.mu.Unlock()
		}
		reply, ok := s.Reply(req, cl)
		if !ok {
			s.counts.Inc(clientsDropped)
			if !s.toldBad.Swap(true) {
				s.log.Warn("atop: request atop never sends; connection dropped", "request", req[:])
			}
			return
		}
		c.SetWriteDeadline(time.Now().Add(s.cfg.Write))
		if _, err := c.Write(reply); err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				s.counts.Inc(clientsDropped)
			}
			return
		}
		s.counts.Inc(requestsAnswered)
	}
}

// Reply builds the whole reply (prelude and body) to one two-byte request
// for client cl; ok is false for a request atop never sends.
func (s *Server) Reply(req [2]byte, cl *Client) (reply []byte, ok bool) {
	v := Version(req[1])
	var body []byte
	switch req[0] {
	case 'T':
		body = s.acc.Types(v)
	case 'S':
		var left int
		body, left = s.acc.Stats(v, cl)
		if left > 0 {
			s.counts.Add(recordsCut, uint64(left))
			if s.counts.Add(repliesCut, 1) == 1 {
				s.log.Warn("atop: reply would pass atop's 8192-byte limit; least busy processes left out",
					"left_out", left)
			}
		}
	default:
		return nil, false
	}
	return Frame(v, body), true
}

// Frame prefixes body with the 4-byte prelude: version in the top byte,
// length in the low 24 bits, big endian.
func Frame(version byte, body []byte) []byte {
	out := make([]byte, 4, 4+len(body))
	binary.BigEndian.PutUint32(out, uint32(version)<<24|uint32(len(body))&0xffffff)
	return append(out, body...)
}
