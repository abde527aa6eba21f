package control

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

// The watch request streams the status document: "watch", or "watch"
// with the status request's options ("watch history=10m0s events=200"),
// is answered with the document as one compact JSON line once every
// WatchEvery, the first at once, until the client leaves or the daemon
// stops. History is in the first document only (the client's charts
// start from it and go on with each document's readings); events in each. It is what `gpu-telemetry status --json --watch` prints and what
// `top --host` reads through ssh (issue 40: a remote view with no new
// listener). Each line is built as a status answer is (shared with the
// status requests of the same Reuse window), so a watcher costs the daemon
// no more than a client asking status once a second. A watcher holds one
// of the MaxConns connections, and at most MaxWatchers stream at once, so
// that status always has room; a client that does not take a line within
// WriteTimeout is dropped and counted (control_requests_failed).

// watchPrefix is the watch request's first word.
const watchPrefix = "watch"

// Limits of the watch request.
const (
	// WatchEvery is how often a watcher is sent the document: the rate
	// top refreshes at.
	WatchEvery = time.Second
	// MaxWatchers is how many watch requests stream at once; another is
	// answered "busy".
	MaxWatchers = 4
	// WatchSilence is how long Watch waits for the next line before it
	// gives up on the daemon: a few WatchEvery, and the server's write
	// timeout.
	WatchSilence = 3*WatchEvery + WriteTimeout
)

// WatchLine is the request line streaming the document with o: "watch",
// or "watch history=10m0s events=200".
func (o Options) WatchLine() string {
	return watchPrefix + strings.TrimPrefix(o.Line(), "status")
}

// watch serves a watch request on c until the client leaves, does not
// take a line within WriteTimeout, or the daemon stops.
func (s *Server) watch(c *net.UnixConn, o Options) {
	refuse := func(why string) {
		s.counts.Inc(requestsFailed)
		json.NewEncoder(c).Encode(errorReply{Error: why})
	}
	select {
	case s.watchers <- struct{}{}:
		defer func() { <-s.watchers }()
	default:
		refuse("busy: " + strconv.Itoa(MaxWatchers) + " watches already streaming")
		return
	}
	// The client says nothing more: its read ends when it leaves (or when
	// handle closes c), which frees the slot without waiting for a write
	// to fail.
	gone := make(chan struct{})
	c.SetReadDeadline(time.Time{})
	go func() {
		io.Copy(io.Discard, c)
		close(gone)
	}()
	tick, stop := s.cfg.watchTick()
	defer stop()
	for first := true; ; first = false {
		a := s.answerFor(o)
		o.History = 0 // the history seeds the client once; it appends the documents that follow
		c.SetWriteDeadline(time.Now().Add(WriteTimeout))
		_, werr := c.Write(a.b)
		refused := a.refusedDoc
		s.release(a)
		switch {
		case werr != nil && errors.Is(werr, os.ErrDeadlineExceeded) || refused:
			// Too slow to take a line, or a document encoding/json
			// refused: the stream ends, counted.
			s.counts.Inc(requestsFailed)
			return
		case werr != nil: // the client left
			return
		case first:
			s.counts.Inc(requestsServed)
		}
		select {
		case <-tick:
		case <-gone:
			return
		case <-s.stopping:
			return
		}
	}
}

// newTicker is the watch stream's clock: a tick every WatchEvery (tests
// give Config.watchTick one they step).
func newTicker() (<-chan time.Time, func()) {
	t := time.NewTicker(WatchEvery)
	return t.C, t.Stop
}

// Watch asks the daemon at path for the watch stream with o and calls each
// with every line (one JSON document, without its newline) until ctx ends
// (nil), each returns an error (that error), the daemon answers an error,
// closes the stream or sends nothing for WatchSilence. Connecting and the
// first line are bounded by timeout.
func Watch(ctx context.Context, path string, o Options, timeout time.Duration, each func(line []byte) error) error {
	var d net.Dialer
	dctx, cancel := context.WithTimeout(ctx, timeout)
	c, err := d.DialContext(dctx, "unix", path)
	cancel()
	if err != nil {
		return err
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	c.SetDeadline(time.Now().Add(timeout))
	// A busy server answers and closes before reading: a failed write
	// still leaves its answer to read.
	_, werr := c.Write([]byte(o.WatchLine() + "\n"))
	sc := bufio.NewScanner(c)
	sc.Buffer(make([]byte, 0, 64<<10), MaxReply)
	for sc.Scan() {
		line := sc.Bytes()
		var e errorReply
		if json.Unmarshal(line, &e) == nil && e.Error != "" {
			return &AnswerError{Path: path, Msg: e.Error}
		}
		if err := each(line); err != nil {
			return err
		}
		c.SetReadDeadline(time.Now().Add(WatchSilence))
	}
	err = sc.Err()
	switch {
	case ctx.Err() != nil:
		return nil
	case errors.Is(err, bufio.ErrTooLong):
		return fmt.Errorf("answer from %s longer than %d bytes", path, MaxReply)
	case errors.Is(err, os.ErrDeadlineExceeded):
		return fmt.Errorf("%s sent no document for %v", path, WatchSilence)
	case err != nil && werr != nil:
		return werr
	case err != nil:
		return fmt.Errorf("reading the watch from %s: %w", path, err)
	}
	return fmt.Errorf("%s closed the watch (the daemon stopped?)", path)
}
