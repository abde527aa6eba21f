package control

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/live"
)

// MaxReply bounds the answer a client reads.
const MaxReply = 16 << 20

// Options are what a status request asks for beyond the plain document:
// each GPU's History over the last History (0: none) and the host's last
// Events events.log lines (0: none).
type Options struct {
	History time.Duration
	Events  int
}

// Line is the request line asking for the document with o:
// "status", or "status history=10m0s events=200".
func (o Options) Line() string {
	line := "status"
	if o.History > 0 {
		line += " history=" + o.History.String()
	}
	if o.Events > 0 {
		line += " events=" + strconv.Itoa(o.Events)
	}
	return line
}

// Query asks the daemon at path for its status document, waiting at most
// timeout for the whole exchange.
func Query(path string, timeout time.Duration) (live.Doc, []byte, error) {
	return QueryWith(path, Options{}, timeout)
}

// QueryWith is Query asking for what o names too.
func QueryWith(path string, o Options, timeout time.Duration) (live.Doc, []byte, error) {
	var d live.Doc
	raw, err := Ask(path, o.Line(), timeout)
	if err != nil {
		return d, nil, err
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		return d, raw, fmt.Errorf("bad answer from %s: %w", path, err)
	}
	return d, raw, nil
}

// Ask sends one request line and returns the answer line without its
// newline. An {"error": ...} answer is returned as an error.
func Ask(path, req string, timeout time.Duration) ([]byte, error) {
	c, err := net.DialTimeout("unix", path, timeout)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(timeout))
	// A server that refuses (busy) answers and closes before reading: a
	// failed write still leaves its answer to read.
	_, werr := c.Write([]byte(req + "\n"))
	out, err := bufio.NewReader(io.LimitReader(c, MaxReply+1)).ReadBytes('\n')
	switch {
	case len(out) > MaxReply:
		return nil, fmt.Errorf("answer from %s longer than %d bytes", path, MaxReply)
	case err != nil && werr != nil:
		return nil, werr
	case err != nil:
		return nil, fmt.Errorf("reading the answer from %s: %w", path, err)
	}
	out = out[:len(out)-1]
	var e errorReply
	if json.Unmarshal(out, &e) == nil && e.Error != "" {
		return nil, &AnswerError{Path: path, Msg: e.Error}
	}
	return out, nil
}

// AnswerError is the daemon's {"error": ...} answer to a request.
type AnswerError struct {
	Path string // the socket
	Msg  string // the daemon's words
}

func (e *AnswerError) Error() string { return e.Path + " answered: " + e.Msg }

// UnknownRequest says whether err is the daemon's answer that it does not
// know the request or one of its options: a daemon older than them (one
// before issue 40 answers "unknown request" to "status history=...").
// Being busy, slow or gone is not.
func UnknownRequest(err error) bool {
	var e *AnswerError
	return errors.As(err, &e) && (strings.HasPrefix(e.Msg, "unknown request") || strings.HasPrefix(e.Msg, "unknown option"))
}
