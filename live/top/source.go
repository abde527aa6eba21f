package top

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/gpu-telemetry/gpu-telemetry/live"
	"github.com/gpu-telemetry/gpu-telemetry/live/control"
)

// A Remote is another host's daemon seen through the user's own ssh
// (issue 40: no new network listener): it runs `ssh HOST gpu-telemetry
// status --json --watch`, whose output is the daemon's watch stream, one
// status document a line, and keeps the latest. Its Fetch is what the
// view asks, as it asks the local socket: the view cannot tell them
// apart. When ssh ends (the host unreachable, the daemon not running,
// the connection dropped) Fetch says why, with the end of ssh's stderr,
// and ssh is run again after a backoff; a stream silent for StaleAfter is
// ended the same way. Quitting (Run's context ending) kills ssh.
type Remote struct {
	host string
	argv []string // the command run for each connection

	// The backoff between connections: from minWait, doubling up to
	// maxWait, back to minWait once a connection delivered a document.
	minWait, maxWait time.Duration
	now              func() time.Time

	mu       sync.Mutex
	doc      *live.Doc
	at       time.Time // when doc arrived (this host's clock)
	err      error     // why the last connection ended; nil while one delivers
	answered chan struct{}
	once     sync.Once
}

// StaleAfter is how long a Remote waits for the next document before it
// ends the connection as dead: a few of the daemon's WatchEvery.
const StaleAfter = 10 * time.Second

// maxStderr is how much of the end of ssh's stderr a Remote keeps.
const maxStderr = 4 << 10

// remoteCommand is what ssh runs on the host.
var remoteCommand = []string{"gpu-telemetry", "status", "--json", "--watch", "--history", "10m", "--events", "200"}

// CheckHost says why name cannot be given to ssh as a host: empty, an
// option (a leading '-'), with blanks or control characters (which ssh
// would read as more than a host name), or with any character but
// letters, digits and . _ : @ [ ] - (a host, user@host, an IPv6 address in
// brackets). ssh hands the name to a ProxyCommand with %h in the user's
// config, which OpenSSH before 9.6 runs with /bin/sh: $, `, ; or | there
// would run commands of the name's choosing.
func CheckHost(name string) error {
	switch {
	case name == "":
		return errors.New("empty host name")
	case strings.HasPrefix(name, "-"):
		return fmt.Errorf("host name %q begins with '-'", name)
	case strings.IndexFunc(name, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0:
		return fmt.Errorf("host name %q has blanks or control characters", name)
	case strings.IndexFunc(name, func(r rune) bool { return !hostRune(r) }) >= 0:
		return fmt.Errorf("host name %q has a character other than letters, digits and . _ : @ [ ] -", name)
	}
	return nil
}

// hostRune says whether r may be in a host name CheckHost takes.
func hostRune(r rune) bool {
	return 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || strings.ContainsRune("._:@[]-", r)
}

// SSH is the Remote of host, through the ssh found in PATH, in batch mode
// (never a password prompt on the view's terminal). host must pass
// CheckHost.
func SSH(host string) *Remote {
	argv := append([]string{"ssh", "-T", "-o", "BatchMode=yes", "--", host}, remoteCommand...)
	return newRemote(host, argv)
}

func newRemote(host string, argv []string) *Remote {
	return &Remote{host: host, argv: argv, minWait: time.Second, maxWait: 30 * time.Second, now: time.Now,
		answered: make(chan struct{})}
}

// Host is the remote's host name.
func (r *Remote) Host() string { return r.host }

// Run connects, and connects again each time a connection ends, until ctx
// ends.
func (r *Remote) Run(ctx context.Context) {
	wait := r.minWait
	for ctx.Err() == nil {
		delivered, err := r.connect(ctx)
		if ctx.Err() != nil {
			return
		}
		if delivered {
			wait = r.minWait
		}
		r.fail(fmt.Errorf("%s: %w; again in %v", r.host, err, wait))
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		wait = min(wait*2, r.maxWait)
	}
}

// Answered is closed once the first connection delivered a document or
// ended: Fetch then has something to say.
func (r *Remote) Answered() <-chan struct{} { return r.answered }

// Fetch returns the latest document, or why there is none now: the last
// connection ended, or nothing came for StaleAfter (the view then keeps
// showing the document it has, with the reason).
func (r *Remote) Fetch() (live.Doc, error) {
	d, at, err := r.Latest()
	switch {
	case err != nil:
		return live.Doc{}, err
	case d == nil:
		return live.Doc{}, fmt.Errorf("%s: connecting (%s)", r.host, strings.Join(r.argv, " "))
	case r.now().Sub(at) > StaleAfter:
		return live.Doc{}, fmt.Errorf("%s: no document for %v", r.host, r.now().Sub(at).Truncate(time.Second))
	}
	return *d, nil
}

// Latest is the latest document (nil before the first), when it arrived,
// and why the last connection ended (nil while one delivers).
func (r *Remote) Latest() (d *live.Doc, at time.Time, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.doc, r.at, r.err
}

func (r *Remote) fail(err error) {
	r.mu.Lock()
	r.err = err
	r.mu.Unlock()
	r.once.Do(func() { close(r.answered) })
}

func (r *Remote) got(d *live.Doc) {
	r.mu.Lock()
	r.doc, r.at, r.err = d, r.now(), nil
	r.mu.Unlock()
	r.once.Do(func() { close(r.answered) })
}

// connect runs one connection until it ends; delivered says whether it
// gave a document, err why it ended.
func (r *Remote) connect(ctx context.Context) (delivered bool, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cmd := exec.CommandContext(ctx, r.argv[0], r.argv[1:]...)
	var stderr stderrTail
	cmd.Stderr = &stderr // and stdin is /dev/null: the terminal is the view's
	cmd.WaitDelay = time.Second
	out, err := cmd.StdoutPipe()
	if err != nil {
		return false, err
	}
	if err := cmd.Start(); err != nil {
		return false, err
	}
	// A stream silent for StaleAfter is a dead connection (a host that
	// went away without closing it): ended, to connect again.
	silent := time.AfterFunc(StaleAfter, cancel)
	defer silent.Stop()
	var said error // an error line in the stream: the daemon's own reason
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 0, 64<<10), control.MaxReply)
	for sc.Scan() {
		silent.Reset(StaleAfter)
		var e struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(sc.Bytes(), &e) == nil && e.Error != "" {
			said = errors.New(e.Error)
			continue
		}
		d := new(live.Doc)
		if err := json.Unmarshal(sc.Bytes(), d); err != nil || d.SchemaVersion == 0 {
			said = fmt.Errorf("not a status document: %.80q", sc.Bytes())
			cancel()
			break
		}
		delivered = true
		r.got(d)
	}
	if sc.Err() != nil && said == nil {
		said = sc.Err()
		cancel()
	}
	werr := cmd.Wait()
	switch {
	case said != nil:
		return delivered, said
	case ctx.Err() != nil && !silent.Stop():
		return delivered, fmt.Errorf("no document for %v", StaleAfter)
	case werr == nil:
		werr = errors.New("the stream ended")
	}
	if s := stderr.last(); s != "" {
		return delivered, fmt.Errorf("%s (%s %w)", s, r.argv[0], werr)
	}
	return delivered, fmt.Errorf("%s: %w", r.argv[0], werr)
}

// stderrTail keeps the end of what is written to it, at most maxStderr bytes.
type stderrTail struct {
	mu sync.Mutex
	b  []byte
}

func (t *stderrTail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > maxStderr {
		t.b = append(t.b[:0], t.b[len(t.b)-maxStderr:]...)
	}
	return len(p), nil
}

// last is the last lines written, joined with " / ", at most 300 bytes
// of them.
func (t *stderrTail) last() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var lines []string
	n := 0
	rest := bytes.TrimSpace(t.b)
	for len(rest) > 0 && n < 300 {
		i := bytes.LastIndexByte(rest, '\n')
		l := strings.TrimSpace(strings.Map(func(r rune) rune {
			if unicode.IsControl(r) {
				return -1
			}
			return r
		}, string(rest[i+1:])))
		rest = bytes.TrimSpace(rest[:max(i, 0)])
		if l == "" {
			continue
		}
		lines = append([]string{l}, lines...)
		n += len(l)
	}
	s := strings.Join(lines, " / ")
	if len(s) > 300 {
		s = "..." + s[len(s)-300:]
	}
	return s
}
