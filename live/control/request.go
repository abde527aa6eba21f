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

// lookupGroup returns a group's id by name or number.
func lookupGroup(name string) (int, error) {
	g, err := user.LookupGroup(name)
	if err != nil {
		g, err = user.LookupGroupId(name)
	}
	if err != nil {
		return 0, fmt.Errorf("--socket-group %s: %w", name, err)
	}
	return strconv.Atoi(g.Gid)
}
