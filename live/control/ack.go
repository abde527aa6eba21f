package control

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"time"
	"unicode/utf8"

	"github.com/gpu-telemetry/gpu-telemetry/action"
	"github.com/gpu-telemetry/gpu-telemetry/internal/peer"
)

// The ack request acknowledges a GPU's repair action (`gpu-telemetry ack`):
// "ack " and a JSON object, {"gpu": "3", a UUID or its start, "action": the action
// acknowledged, "note": why}, on the one request line. It is the one
// request that changes the daemon's state, so only root may make it (the
// peer's credentials, SO_PEERCRED, whatever the socket's group lets
// connect). The answer is an AckReply, or {"error": "..."}.

// ackPrefix begins an ack request line.
const ackPrefix = "ack "

// MaxNote is the longest note an ack carries, in bytes: the request line
// holds it with the GPU's UUID and the action.
const MaxNote = 128

// AckRequest is an ack request's object.
type AckRequest struct {
	GPU    string        `json:"gpu"`
	Action action.Action `json:"action"`
	Note   string        `json:"note"`
}

// AckReply answers an ack: the GPU, the action acknowledged, and the
// GPU's action after it (none, or watch while a condition still holds).
type AckReply struct {
	GPU     int           `json:"gpu"`               // its index; a missing board's in the previous run
	Missing bool          `json:"missing,omitempty"` // the board is not enumerated now (host.missing_boards)
	UUID    string        `json:"uuid"`
	Acked   action.Action `json:"acked"`
	Action  action.Action `json:"action"`
	Reasons []string      `json:"reasons"`
}

// Acker carries out an ack for the user by (the daemon's monitor.Ack).
type Acker func(req AckRequest, by string) (AckReply, error)

// AckLine is the request line of req, with its newline.
func AckLine(req AckRequest) ([]byte, error) {
	b, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	b = append([]byte(ackPrefix), append(b, '\n')...)
	if len(b) > MaxRequest {
		return nil, fmt.Errorf("the ack request is %d bytes, more than %d (a shorter --note)", len(b), MaxRequest)
	}
	return b, nil
}

// parseAck parses an ack request line; isAck is false for any other
// request.
func parseAck(line []byte) (req AckRequest, isAck bool, err error) {
	w := bytes.TrimSpace(line)
	rest, ok := bytes.CutPrefix(w, []byte(ackPrefix))
	if !ok {
		return req, false, nil
	}
	if !utf8.Valid(rest) {
		return req, true, errors.New("ack: not UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(rest))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return req, true, fmt.Errorf("ack: %w", err)
	}
	switch {
	case req.GPU == "":
		return req, true, errors.New("ack: no gpu")
	case !req.Action.Known():
		return req, true, fmt.Errorf("ack: unknown action %q (not one of this daemon's)", req.Action)
	case len(req.Note) > MaxNote:
		return req, true, fmt.Errorf("ack: a note of more than %d bytes", MaxNote)
	}
	return req, true, nil
}

// ack answers an ack request from the client on c.
func (s *Server) ack(c net.Conn, req AckRequest) (any, error) {
	uid, ok := peer.User(c)
	switch {
	case s.cfg.Ack == nil:
		return nil, errors.New("ack: this daemon does not take acks")
	case !ok:
		return nil, errors.New("ack: cannot tell who is asking")
	case uid != 0:
		return nil, errors.New("ack: only root may acknowledge an action")
	}
	defer s.stale() // after the ack, never a status answer built before it
	// uid 0 is root; its name is not looked up: a lookup can go to a
	// directory service (NSS) and wait on the network without a bound.
	return s.cfg.Ack(req, "root")
}

// Ack asks the daemon at path to acknowledge a GPU's action (as root).
func Ack(path string, req AckRequest, timeout time.Duration) (AckReply, error) {
	var r AckReply
	line, err := AckLine(req)
	if err != nil {
		return r, err
	}
	raw, err := Ask(path, string(bytes.TrimSuffix(line, []byte("\n"))), timeout)
	if err != nil {
		return r, err
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return r, fmt.Errorf("bad answer from %s: %w", path, err)
	}
	return r, nil
}
