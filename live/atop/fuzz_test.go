package atop

import (
	"bytes"
	"encoding/binary"
	"net"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/counters"
)

// FuzzRequests feeds arbitrary bytes to a connection's handler. Whatever
// arrives, the server answers only complete valid requests, each with a
// well-formed reply (version 1 or 2, body at most 8192 bytes, length as
// announced), stops at the first invalid one, and never hangs or panics.
func FuzzRequests(f *testing.F) {
	for _, s := range []string{"T\x01S\x01S\x01", "T\x02S\x02", "S\x00", "T\xff", "X\x01", "S", "", "S\x01T", "\x00\x00"} {
		f.Add([]byte(s))
	}
	a, _ := scripted(f)
	srv := NewServer(a, DefaultConfig(), nil, counters.New())
	f.Fuzz(func(t *testing.T, in []byte) {
		c := &memConn{r: bytes.NewReader(in)}
		srv.wg.Add(1) // as accept does
		srv.serve(&conn{c: c})
		out := c.w.Bytes()
		// Expected: one reply per valid request before the first invalid one.
		want := 0
		for i := 0; i+1 < len(in); i += 2 {
			if in[i] != 'T' && in[i] != 'S' {
				break
			}
			want++
		}
		got := 0
		for len(out) > 0 {
			if len(out) < 4 {
				t.Fatalf("truncated prelude %q", out)
			}
			p := binary.BigEndian.Uint32(out)
			v, n := p>>24, int(p&0xffffff)
			if v != 1 && v != 2 || n > MaxBody || len(out) < 4+n {
				t.Fatalf("bad reply: version %d length %d (have %d)", v, n, len(out)-4)
			}
			out = out[4+n:]
			got++
		}
		if got != want {
			t.Fatalf("%d replies to %q, want %d", got, in, want)
		}
	})
}

// memConn is a connection whose input is a fixed byte string (then EOF) and
// whose output is collected.
type memConn struct {
	net.Conn
	r *bytes.Reader
	w bytes.Buffer
}

func (c *memConn) Read(p []byte) (int, error)       { return c.r.Read(p) }
func (c *memConn) Write(p []byte) (int, error)      { return c.w.Write(p) }
func (c *memConn) SetReadDeadline(time.Time) error  { return nil }
func (c *memConn) SetWriteDeadline(time.Time) error { return nil }
func (c *memConn) Close() error                     { return nil }
