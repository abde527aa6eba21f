// Package control is the daemon's control socket: a unix socket that
// answers `gpu-telemetry status` and `top` with the status document
// (live.Doc), built from the published state in memory. No request waits
// on NVML; only ack changes the daemon's state. Everything is bounded: connections,
// request size, read and write time.
//
// The protocol is one request line (at most MaxRequest bytes, ending in a
// newline), answered with one JSON document and a newline, after which the
// server closes the connection. Requests: "status" (the document; with
// options "history=DUR" and "events=N", also each GPU's recent readings
// and the host's last events.log lines: request.go), "watch" (the
// document once a second, one a line, until the client leaves, with the
// same options: watch.go), "ping" ({"ok":true}), and "ack {...}" from root
// (ack.go), the one that changes the daemon's state. Anything else is
// answered with {"error": "..."}.
package control

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/counters"
	"github.com/gpu-telemetry/gpu-telemetry/internal/peer"
	"golang.org/x/sys/unix"

	"github.com/gpu-telemetry/gpu-telemetry/live"
)

// Limits of the control socket.
const (
	// MaxRequest is the longest request line, newline included.
	MaxRequest = 256
	// MaxConns is how many connections are served at once. When all are
	// taken, a new one takes the place of the oldest that is silent (no
	// whole request line sent, nor waiting to be read), which is answered
	// "busy" and closed: silent clients cannot keep status from everyone.
	// Only when no connection is silent is a new one answered "busy".
	MaxConns = 16
	// ReadTimeout drops a client that has not sent its request line by
	// then. status and top send theirs as soon as they connect.
	ReadTimeout = time.Second
	// slotWait is how long a new connection waits for the connection it
	// displaced to let go of its slot (its handler returns at once).
	slotWait = 100 * time.Millisecond
	// WriteTimeout drops a client that does not read its answer.
	WriteTimeout = 2 * time.Second
	// Reuse is how long one built status answer serves every request: a
	// storm of requests costs at most 1/Reuse document builds a second,
	// so it cannot take the CPU the sampling needs. Samples are 100 ms
	// apart, so an answer at most this old loses nothing.
	Reuse = 50 * time.Millisecond
)

// tmpSuffix begins the private directory Listen binds the socket in,
// <path>.new-<pid>, and tmpName is the socket's name there (bindPrivate).
const (
	tmpSuffix = ".new-"
	tmpName   = "s"
)

// MaxPath is the longest socket path Listen takes: a unix socket address
// holds 107 bytes (sun_path less its NUL), and the socket is first bound
// as <path>.new-<pid>/s, with a pid of up to 7 digits (Linux's pid_max is
// at most 4194304). A longer path fails bind with "invalid argument".
const MaxPath = len(syscall.RawSockaddrUnix{}.Path) - 1 - len(tmpSuffix) - 7 - len("/"+tmpName)

// CheckPath says why path cannot be the socket's: longer than MaxPath.
func CheckPath(path string) error {
	if len(path) > MaxPath {
		return fmt.Errorf("%d bytes long; a unix socket path may be at most %d here", len(path), MaxPath)
	}
	return nil
}

// Config says where and how to listen.
type Config struct {
	Path string // socket path
	// Group, if not empty, owns the socket, which is then mode 0660 (else 0600).
	Group  string
	Logger *slog.Logger
	// Ack carries out the ack request (ack.go); nil: acks are refused.
	Ack Acker
	// Counters is the registry the socket counts in (counters.go). Required.
	Counters *counters.Registry
	// watchTick is the watch stream's clock (watch.go); nil: newTicker.
	watchTick func() (<-chan time.Time, func())
}

// Server serves the control socket.
type Server struct {
	cfg   Config
	board *live.Board
	log   *slog.Logger
	ln    *net.UnixListener
	sem   chan struct{}
	wg    sync.WaitGroup
	// watchers holds a place per watch streaming (watch.go); stopping is
	// closed when Serve stops accepting, which ends them.
	watchers chan struct{}
	stopping chan struct{}

	// waiting are the connections whose request line has not been read
	// yet, oldest first: the silent ones among them may be displaced.
	smu     sync.Mutex
	waiting []*conn

	counts *counters.Registry // Config.Counters

	cmu      sync.Mutex // held while building, so concurrent requests share one build
	cached   *answer
	cachedAt time.Time
	spare    *answer   // an answer no request holds, to build the next one in
	view     live.View // reused from build to build

	// The answers to requests with options (statusWith), shared as the
	// plain one is: omu is held while building one (never cmu, so a storm
	// of history requests does not hold up the plain status), withCached
	// are the ones built within Reuse, at most maxWithCached, oldest first.
	omu        sync.Mutex
	withCached []withAnswer
	withView   live.View
	// encodeErr logs the first document encoding/json refused.
	encodeErr sync.Once
}

// ErrInUse is returned by Listen when another live process serves the path.
var ErrInUse = errors.New("in use by a running process")

// Listen creates the socket in its directory, which must exist (the daemon
// makes its default one; it makes no other). A stale socket file (nobody accepts on it) is
// replaced; a live one is refused with ErrInUse. The socket is created in a
// private directory (see bindPrivate), given its mode and group there, and
// renamed into place, so it is never reachable with looser permissions.
func Listen(cfg Config, board *live.Board) (*Server, error) {
	counters.Need(cfg.Counters, "control.Config.Counters")
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	mode := os.FileMode(0o600)
	gid := -1
	if cfg.Group != "" {
		g, err := LookupGroup(cfg.Group)
		if err != nil {
			return nil, err
		}
		mode, gid = 0o660, g
	}
	if err := CheckPath(cfg.Path); err != nil {
		return nil, fmt.Errorf("control socket %s: %w", cfg.Path, err)
	}
	if err := clearStale(cfg.Path); err != nil {
		return nil, err
	}
	ln, err := bindPrivate(cfg.Path, mode, gid)
	if err != nil {
		return nil, fmt.Errorf("control socket %s: %w", cfg.Path, err)
	}
	if cfg.watchTick == nil {
		cfg.watchTick = newTicker
	}
	return &Server{cfg: cfg, board: board, log: cfg.Logger, ln: ln, sem: make(chan struct{}, MaxConns),
		watchers: make(chan struct{}, MaxWatchers), stopping: make(chan struct{}), counts: cfg.Counters}, nil
}

// testHookBound runs once the socket is bound, before it is given its mode
// and group: tests play there someone who swaps the names in the socket's
// directory.
var testHookBound = func(tmp string) {}

// bindPrivate binds a unix socket at path with mode and group gid (-1: the
// daemon's). The daemon runs as root, and a mode or a group set by name
// follows a link someone put at that name: so the socket is bound as "s" in
// a directory of our own, <path>.new-<pid>, 0700 (no one else can reach the
// socket there, nor put anything in it), and its mode, group and move into
// place are done relative to a descriptor of that directory, which no
// renaming of names in the socket's directory can redirect. A socket bound
// elsewhere (the directory swapped before the bind) is not found through
// the descriptor, and the bind fails.
func bindPrivate(path string, mode os.FileMode, gid int) (*net.UnixListener, error) {
	tmp := path + tmpSuffix + strconv.Itoa(os.Getpid())
	os.Remove(tmp + "/" + tmpName) // left by a process of this pid that died here
	os.Remove(tmp)
	if err := os.Mkdir(tmp, 0o700); err != nil {
		return nil, err
	}
	defer os.Remove(tmp) // empty by then, or someone else's: unlink follows no link
	dir, err := os.OpenFile(tmp, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	defer dir.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(dir.Fd()), &st); err != nil {
		return nil, err
	}
	if int(st.Uid) != os.Geteuid() || st.Mode&0o077 != 0 {
		return nil, fmt.Errorf("%s: replaced while being made", tmp)
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: tmp + "/" + tmpName, Net: "unix"})
	if err != nil {
		return nil, err
	}
	ln.SetUnlinkOnClose(false)
	testHookBound(tmp)
	dfd := int(dir.Fd())
	fail := func(op string, err error) (*net.UnixListener, error) {
		ln.Close()
		unix.Unlinkat(dfd, tmpName, 0)
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if err := unix.Fstatat(dfd, tmpName, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fail("bound socket", err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		return fail("bound socket", errors.New("not a socket"))
	}
	if gid >= 0 {
		if err := unix.Fchownat(dfd, tmpName, -1, gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return fail("chown", err)
		}
	}
	if err := unix.Fchmodat(dfd, tmpName, uint32(mode.Perm()), 0); err != nil {
		return fail("chmod", err)
	}
	if err := unix.Renameat(dfd, tmpName, unix.AT_FDCWD, path); err != nil {
		return fail("rename", err)
	}
	return ln, nil
}

// clearStale removes a socket file nobody accepts on, and refuses one that
// a process serves.
func clearStale(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("control socket %s: %w", path, err)
	}
	if fi.Mode()&os.ModeSocket == 0 {
		return fmt.Errorf("control socket %s: exists and is not a socket", path)
	}
	c, err := net.DialTimeout("unix", path, time.Second)
	if err == nil {
		c.Close()
		return fmt.Errorf("control socket %s: %w (another gpu-telemetry?)", path, ErrInUse)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) && !errors.Is(err, syscall.ENOENT) {
		return fmt.Errorf("control socket %s: cannot tell whether it is in use: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("control socket %s: removing the stale socket: %w", path, err)
	}
	return nil
}

// Serve accepts connections until ctx is cancelled, then closes the socket,
// removes its file and waits (at most WriteTimeout + ReadTimeout) for the
// connections in progress.
func (s *Server) Serve(ctx context.Context) {
	stop := context.AfterFunc(ctx, func() { s.ln.Close() })
	defer stop()
	for {
		c, err := s.ln.AcceptUnix()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				break
			}
			s.log.Warn("control socket accept failed", "error", err)
			time.Sleep(100 * time.Millisecond) // EMFILE and the like: do not spin
			continue
		}
		if !s.take() {
			s.counts.Inc(clientsRefused)
			c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
			json.NewEncoder(c).Encode(errorReply{Error: "busy: too many connections"})
			c.Close()
			continue
		}
		// The read deadline is set before the handler starts, so that
		// displacing it (setting the deadline past) is never undone.
		c.SetReadDeadline(time.Now().Add(ReadTimeout))
		cn := &conn{c: c}
		s.smu.Lock()
		s.waiting = append(s.waiting, cn)
		s.smu.Unlock()
		s.wg.Add(1)
		go func() {
			defer func() { <-s.sem; s.wg.Done() }()
			s.handle(cn)
		}()
	}
	s.ln.Close()
	close(s.stopping)
	os.Remove(s.cfg.Path)
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(ReadTimeout + WriteTimeout):
	}
}

// conn is a connection being served.
type conn struct {
	c *net.UnixConn
	// displaced: closed to make room for a newer connection (guarded by
	// Server.smu).
	displaced bool
}

// take takes a connection slot: a free one, or that of the oldest silent
// connection, which is closed (answered "busy", counted as failed, as a
// client silent past ReadTimeout is). false: no connection is silent.
func (s *Server) take() bool {
	select {
	case s.sem <- struct{}{}:
		return true
	default:
	}
	s.smu.Lock()
	i := slices.IndexFunc(s.waiting, func(w *conn) bool { return !lineWaiting(w.c) })
	if i < 0 {
		s.smu.Unlock()
		return false
	}
	w := s.waiting[i]
	s.waiting = slices.Delete(s.waiting, i, i+1)
	w.displaced = true
	w.c.SetReadDeadline(time.Unix(1, 0)) // its handler's read fails now
	s.smu.Unlock()
	t := time.NewTimer(slotWait)
	defer t.Stop()
	select {
	case s.sem <- struct{}{}:
		return true
	case <-t.C:
		return false
	}
}

// lineWaiting says whether a whole request line waits in c's receive
// queue, unread: a client that has spoken, whose handler has not run yet.
func lineWaiting(c *net.UnixConn) bool {
	var buf [MaxRequest]byte
	n := peer.Peek(c, buf[:])
	return bytes.IndexByte(buf[:n], '\n') >= 0
}

// spoke takes cn off the waiting list (its request line is in, or it is
// gone, or it was displaced) and says whether it was displaced.
func (s *Server) spoke(cn *conn) (displaced bool) {
	s.smu.Lock()
	defer s.smu.Unlock()
	if i := slices.Index(s.waiting, cn); i >= 0 {
		s.waiting = slices.Delete(s.waiting, i, i+1)
	}
	return cn.displaced
}

type errorReply struct {
	Error string `json:"error"`
}

// handle serves one connection: one request, one answer.
func (s *Server) handle(cn *conn) {
	c := cn.c
	defer c.Close()
	line, err := bufio.NewReaderSize(c, MaxRequest).ReadSlice('\n')
	displaced := s.spoke(cn)
	c.SetWriteDeadline(time.Now().Add(WriteTimeout))
	var req Request
	var opts Options
	switch {
	case err != nil && displaced:
		s.counts.Inc(requestsFailed)
		json.NewEncoder(c).Encode(errorReply{Error: "busy: closed silent to make room for a new connection"})
		return
	case errors.Is(err, bufio.ErrBufferFull):
		err = fmt.Errorf("request longer than %d bytes", MaxRequest)
	case err == nil:
		if ack, isAck, aerr := parseAck(line); isAck {
			s.answerAck(c, ack, aerr)
			return
		}
		req, opts, err = ParseRequest(line)
	}
	if err != nil { // a client gone or silent is not answered
		s.counts.Inc(requestsFailed)
		if !errors.Is(err, io.EOF) && !errors.Is(err, os.ErrDeadlineExceeded) {
			json.NewEncoder(c).Encode(errorReply{Error: err.Error()})
		}
		return
	}
	if req == ReqWatch {
		s.watch(c, opts)
		return
	}
	reply, refusedDoc := pingReply, false
	if req == ReqStatus {
		a := s.answerFor(opts)
		defer s.release(a)
		reply, refusedDoc = a.b, a.refusedDoc
	}
	if _, err := c.Write(reply); err != nil || refusedDoc {
		s.counts.Inc(requestsFailed)
		return
	}
	s.counts.Inc(requestsServed)
}

var pingReply = []byte(`{"ok":true}` + "\n")

// answerAck answers an ack request (parsed with err).
func (s *Server) answerAck(c *net.UnixConn, req AckRequest, err error) {
	var reply any
	if err == nil {
		reply, err = s.ack(c, req)
	}
	if err != nil {
		s.counts.Inc(requestsFailed)
		json.NewEncoder(c).Encode(errorReply{Error: err.Error()})
		return
	}
	if err := json.NewEncoder(c).Encode(reply); err != nil {
		s.counts.Inc(requestsFailed)
		return
	}
	s.counts.Inc(requestsServed)
}
