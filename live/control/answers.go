package control

// The status answers: encoded once per Reuse and shared by the requests
// within it, the plain one and those with options alike, and dropped at an
// ack so that what the ack did shows at once.

import (
	"bytes"
	"encoding/json"
	"slices"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/live"
)

// answer is one encoded status document, shared by the requests served
// within Reuse and reused for a later build once none of them holds it
// (a status answer a second would otherwise leave tens of kB of garbage
// each time, and the page faults to map it again cost more than the
// encoding). refs is guarded by Server.cmu.
type answer struct {
	b    []byte
	refs int
	// refusedDoc: b is the error reply because encoding/json refused the
	// document; each request answered with it counts as failed.
	refusedDoc bool
	// withOptions: an answer to a request with options (statusWith),
	// never built into again (each is built anew, and left to the GC once
	// no request holds it); refs is not counted.
	withOptions bool
}

// withAnswer is an answer to a request with options o, built at at.
type withAnswer struct {
	o  Options
	a  *answer
	at time.Time
}

// maxWithCached is how many answers with distinct options are shared at
// once: top asks one (events, after the first with history too), so a
// few serve every client; a request with another set builds its own.
const maxWithCached = 4

// status returns the encoded status document (with its newline), built at
// most once per Reuse, and again after an ack (stale); the caller releases
// it when written.
func (s *Server) status() *answer {
	s.cmu.Lock()
	defer s.cmu.Unlock()
	if now := time.Now(); s.cached == nil || now.Sub(s.cachedAt) >= Reuse || now.Before(s.cachedAt) {
		a := s.spare
		s.spare = nil
		if a == nil {
			a = &answer{}
		}
		s.board.ViewInto(&s.view)
		a.b, a.refusedDoc = s.encode(a.b[:0], live.NewDoc(s.view))
		if old := s.cached; old != nil && old.refs == 0 {
			s.spare = old
		}
		s.cached, s.cachedAt = a, now
	}
	s.cached.refs++
	return s.cached
}

// answerFor returns the answer to the status request with o: the plain
// one (status) or one with options (statusWith), each shared within
// Reuse; the caller releases it when written.
func (s *Server) answerFor(o Options) *answer {
	if o == (Options{}) {
		return s.status()
	}
	return s.statusWith(o)
}

// stale drops the shared status answers, plain and with options: the next
// request builds its own. An ack calls it once carried out, before its
// reply, so that a status asked for after the reply shows the ack (the
// wrapper of a scheduler checks right after `gpu-telemetry ack`), even
// when an answer was built within Reuse before it. A build with options in
// progress is waited for, then dropped.
func (s *Server) stale() {
	s.cmu.Lock()
	if old := s.cached; old != nil && old.refs == 0 {
		s.spare = old
	}
	s.cached = nil
	s.cmu.Unlock()
	s.omu.Lock()
	s.withCached = nil
	s.omu.Unlock()
}

// statusWith returns the status document with what o asks for: each GPU's
// history and the host's last events.log lines, copied from their rings
// (never from NVML). Like the plain answer it is built at most once per
// Reuse for each o and shared by the requests within it (a client looping
// on "status history=10m" would otherwise cost a 16-GPU daemon a 5 MB
// document each time), one build at a time, under omu: a storm of such
// requests neither takes more than a core nor holds up the plain status.
func (s *Server) statusWith(o Options) *answer {
	s.omu.Lock()
	defer s.omu.Unlock()
	now := time.Now()
	// Drop the answers past Reuse (so none is held long after its
	// request) and serve o's if it is fresh.
	s.withCached = slices.DeleteFunc(s.withCached, func(w withAnswer) bool {
		return now.Sub(w.at) >= Reuse || now.Before(w.at)
	})
	for _, w := range s.withCached {
		if w.o == o {
			return w.a
		}
	}
	a := s.buildWith(o)
	if len(s.withCached) == maxWithCached {
		s.withCached = slices.Delete(s.withCached, 0, 1)
	}
	s.withCached = append(s.withCached, withAnswer{o: o, a: a, at: now})
	// Dropped once past Reuse even when no request comes after it: a
	// history answer is megabytes.
	time.AfterFunc(Reuse, func() {
		s.omu.Lock()
		defer s.omu.Unlock()
		s.withCached = slices.DeleteFunc(s.withCached, func(w withAnswer) bool { return w.a == a })
	})
	return a
}

// buildWith builds and encodes the status document with what o asks for
// (statusWith), under omu.
func (s *Server) buildWith(o Options) *answer {
	testHookBuildWith(o)
	s.board.ViewInto(&s.withView)
	d := live.NewDoc(s.withView)
	if o.History > 0 {
		for i := range d.GPUs {
			d.GPUs[i].History = s.board.History(i, d.Time, o.History)
		}
	}
	d.Events = s.board.Events(o.Events)
	b, refused := s.encode(nil, d)
	return &answer{b: b, refusedDoc: refused, withOptions: true}
}

// testHookBuildWith runs at each build of an answer with options: tests
// count them.
var testHookBuildWith = func(Options) {}

// encode appends the document and its newline to b with encoding/json.
// The document holds no float that encoding/json refuses (NaN, Inf: every
// one is a duration or a scaled integer); should one appear, the request
// is answered with the error (refused true), which is logged the first
// time; each such answer counts as a failed request.
func (s *Server) encode(b []byte, d live.Doc) (out []byte, refused bool) {
	buf := bytes.NewBuffer(b)
	err := json.NewEncoder(buf).Encode(&d)
	if err == nil {
		return buf.Bytes(), false
	}
	s.encodeErr.Do(func() { s.log.Error("control: status document not encodable; answering the error", "error", err) })
	b, _ = json.Marshal(errorReply{Error: "status document: " + err.Error()})
	return append(b, '\n'), true
}

// release gives back an answer taken with status (or answerFor).
func (s *Server) release(a *answer) {
	if a.withOptions {
		return
	}
	s.cmu.Lock()
	defer s.cmu.Unlock()
	if a.refs--; a.refs == 0 && a != s.cached {
		s.spare = a
	}
}
