package control

import (
	"bytes"
	"errors"
	"fmt"
	"os/user"
	"strconv"
	"unicode/utf8"
)

// Request is a parsed request.
type Request uint8

// The requests the control socket answers.
const (
	ReqStatus Request = iota + 1 // the status document
	ReqPing                      // {"ok":true}
)

var requests = map[string]Request{"status": ReqStatus, "ping": ReqPing}

// ParseRequest parses one request line (with or without its newline; a
// trailing "\r" and surrounding blanks are ignored).
func ParseRequest(line []byte) (Request, error) {
	if len(line) > MaxRequest {
		return 0, fmt.Errorf("request longer than %d bytes", MaxRequest)
	}
	w := bytes.TrimSpace(line)
	if len(w) == 0 {
		return 0, errors.New("empty request")
	}
	if !utf8.Valid(w) {
		return 0, errors.New("request is not UTF-8")
	}
	if r, ok := requests[string(w)]; ok {
		return r, nil
	}
	return 0, fmt.Errorf("unknown request %s (want status or ping)", strconv.QuoteToASCII(string(w)))
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
