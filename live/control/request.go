package control

import (
	"bytes"
	"errors"
	"fmt"
	"os/user"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gpu-telemetry/gpu-telemetry/live"
)

// Request is a parsed request.
type Request uint8

// The requests the control socket answers.
const (
	ReqStatus Request = iota + 1 // the status document
	ReqPing                      // {"ok":true}
	ReqWatch                     // the status document once a second (watch.go)
)

var requests = map[string]Request{"status": ReqStatus, "ping": ReqPing, "watch": ReqWatch}

// The bounds of a status request's options: the history ring's span
// (live.MaxHistory) and the events ring's lines (live.MaxEvents).
const (
	MaxHistory = live.MaxHistory
	MaxEvents  = live.MaxEvents
)

// ParseRequest parses one request line (with or without its newline; a
// trailing "\r" and surrounding blanks are ignored): the request and, for
// status, its options ("status history=10m events=200", in any order, each
// at most once; Options.Line writes them).
func ParseRequest(line []byte) (Request, Options, error) {
	if len(line) > MaxRequest {
		return 0, Options{}, fmt.Errorf("request longer than %d bytes", MaxRequest)
	}
	w := bytes.TrimSpace(line)
	if len(w) == 0 {
		return 0, Options{}, errors.New("empty request")
	}
	if !utf8.Valid(w) {
		return 0, Options{}, errors.New("request is not UTF-8")
	}
	words := strings.Fields(string(w))
	r, ok := requests[words[0]]
	if !ok {
		return 0, Options{}, fmt.Errorf("unknown request %s (want status, watch or ping)", strconv.QuoteToASCII(words[0]))
	}
	if len(words) > 1 && r == ReqPing {
		return 0, Options{}, fmt.Errorf("%s takes no options", words[0])
	}
	o, err := parseOptions(words[1:])
	if err != nil {
		return 0, Options{}, err
	}
	return r, o, nil
}

// parseOptions parses a status or watch request's options.
func parseOptions(words []string) (Options, error) {
	var o Options
	seen := map[string]bool{}
	for _, w := range words {
		k, v, _ := strings.Cut(w, "=")
		if seen[k] {
			return Options{}, fmt.Errorf("option %s given twice", strconv.QuoteToASCII(k))
		}
		seen[k] = true
		switch k {
		case "history":
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 || d > MaxHistory {
				return Options{}, fmt.Errorf("history=%s: want a duration above 0 and at most %s", strconv.QuoteToASCII(v), MaxHistory)
			}
			o.History = d
		case "events":
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > MaxEvents {
				return Options{}, fmt.Errorf("events=%s: want a number of lines from 1 to %d", strconv.QuoteToASCII(v), MaxEvents)
			}
			o.Events = n
		default:
			return Options{}, fmt.Errorf("unknown option %s (want history=DUR or events=N)", strconv.QuoteToASCII(w))
		}
	}
	return o, nil
}

// LookupGroup returns the id of the group --socket-group names, by name
// or, failing that, by number. A group that does not exist is "no such
// group" (not the number parser's complaint about a name).
func LookupGroup(name string) (int, error) {
	g, err := user.LookupGroup(name)
	if _, numeric := strconv.Atoi(name); err != nil && numeric == nil {
		g, err = user.LookupGroupId(name)
	}
	var unknownName user.UnknownGroupError
	var unknownID user.UnknownGroupIdError
	switch {
	case errors.As(err, &unknownName) || errors.As(err, &unknownID):
		return 0, fmt.Errorf("--socket-group %s: no such group", name)
	case err != nil:
		return 0, fmt.Errorf("--socket-group %s: %w", name, err)
	}
	return strconv.Atoi(g.Gid)
}
