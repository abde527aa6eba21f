package atop

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
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
	First    time.Duration // a new connection must send its first request within this
	Idle     time.Duration // later requests: atop asks once per interval (up to some minutes)
	Write    time.Duration // a reply must be taken within this
}

// DefaultConfig is what --atop uses.
func DefaultConfig() Config {
	return Config{TCP: DefaultTCP, Unix: DefaultUnix, MaxConns: 32,
		First: 10 * time.Second, Idle: time.Hour, Write: 5 * time.Second}
}

// Counters says what the server did, for status lines and tests. Nothing is
// dropped without being counted here (and logged the first time).
type Counters struct {
	Accepted  uint64 // connections served
	Refused   uint64 // connections closed because MaxConns were open
	Requests  uint64 // requests answered
	Bad       uint64 // connections dropped for a request atop never sends
	TimedOut  uint64 // connections dropped for silence or a reply not taken
	CutReply  uint64 // replies that left process records out to fit MaxBody
	CutRecord uint64 // process records left out
	// ExitedDropped: exited-process records dropped for clients that did
	// not ask in time (Accumulator.ExitedDropped).
	ExitedDropped uint64
	ListenFailed  uint64 // addresses that could not be bound (port taken): not served
}

// Server answers atop clients from an Accumulator.
type Server struct {
	acc *Accumulator
	cfg Config
	log *slog.Logger

	mu    sync.Mutex
	lns   []net.Listener
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup

	accepted, refused, requests, bad, timedOut, cutReply, cutRecord, listenFailed atomic.Uint64
	toldRefused, toldBad, toldCut                                                 atomic.Bool
}

// NewServer returns a server; nothing listens until Start.
func NewServer(acc *Accumulator, cfg Config, log *slog.Logger) *Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = 32
	}
	return &Server{acc: acc, cfg: cfg, log: log, conns: map[net.Conn]struct{}{}}
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
			s.listenFailed.Add(1)
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

// Counters returns what the server did so far.
func (s *Server) Counters() Counters {
	return Counters{Accepted: s.accepted.Load(), Refused: s.refused.Load(), Requests: s.requests.Load(),
		Bad: s.bad.Load(), TimedOut: s.timedOut.Load(), CutReply: s.cutReply.Load(), CutRecord: s.cutRecord.Load(),
		ExitedDropped: s.acc.ExitedDropped(), ListenFailed: s.listenFailed.Load()}
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
		s.mu.Lock()
		if len(s.conns) >= s.cfg.MaxConns {
			s.mu.Unlock()
			s.refused.Add(1) // counted before the client can see the close
			c.Close()
			if !s.toldRefused.Swap(true) {
				s.log.Warn("atop: too many clients; connection closed", "max", s.cfg.MaxConns)
			}
			continue
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		s.accepted.Add(1)
		go s.serve(c)
	}
}

// serve answers one client until it goes away, misbehaves or stays silent.
func (s *Server) serve(c net.Conn) {
	cl := s.acc.Register()
	defer func() {
		s.acc.Unregister(cl)
		c.Close()
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		s.wg.Done()
	}()
	var req [2]byte
	wait := s.cfg.First
	for {
		c.SetReadDeadline(time.Now().Add(wait))
		if _, err := io.ReadFull(c, req[:]); err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				s.timedOut.Add(1)
			}
			return
		}
		wait = s.cfg.Idle
		reply, ok := s.Reply(req, cl)
		if !ok {
			s.bad.Add(1)
			if !s.toldBad.Swap(true) {
				s.log.Warn("atop: request atop never sends; connection dropped", "request", req[:])
			}
			return
		}
		c.SetWriteDeadline(time.Now().Add(s.cfg.Write))
		if _, err := c.Write(reply); err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				s.timedOut.Add(1)
			}
			return
		}
		s.requests.Add(1)
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
			s.cutReply.Add(1)
			s.cutRecord.Add(uint64(left))
			if !s.toldCut.Swap(true) {
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
