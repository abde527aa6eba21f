package peer

import (
	"fmt"
	"net"
	"os"
	"testing"

	"github.com/gpu-telemetry/gpu-telemetry/internal/testutil"
)

// accepted dials ln (with dial) and returns the listener's end.
func accepted(t *testing.T, ln net.Listener, dial func() net.Conn) net.Conn {
	t.Helper()
	dial()
	c, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func listeners(t *testing.T) map[string]net.Listener {
	t.Helper()
	lns := map[string]net.Listener{}
	// abstract: another user may connect (atop's version 2 socket is one)
	unix := fmt.Sprintf("@gpu-telemetry-peer-test-%d-%s", os.Getpid(), t.Name())
	for network, addr := range map[string]string{"tcp": "127.0.0.1:0", "unix": unix} {
		ln, err := net.Listen(network, addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		lns[network] = ln
	}
	if ln, err := net.Listen("tcp6", "[::1]:0"); err == nil { // where the host has IPv6
		t.Cleanup(func() { ln.Close() })
		lns["tcp6"] = ln
	}
	return lns
}

// TestUser: the user a local client connects as, over a unix socket and
// over TCP (IPv4 and IPv6 loopback); as root, also a client dialled as
// another user.
func TestUser(t *testing.T) {
	for network, ln := range listeners(t) {
		t.Run(network, func(t *testing.T) {
			c := accepted(t, ln, func() net.Conn {
				c, err := net.Dial(ln.Addr().Network(), ln.Addr().String())
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { c.Close() })
				return c
			})
			if uid, ok := User(c); !ok || uid != uint32(os.Geteuid()) {
				t.Errorf("User = %d, %v; want %d, true", uid, ok, os.Geteuid())
			}
			if os.Geteuid() != 0 {
				return
			}
			c = accepted(t, ln, func() net.Conn { return testutil.DialAs(t, 65534, ln.Addr().Network(), ln.Addr().String()) })
			if uid, ok := User(c); !ok || uid != 65534 {
				t.Errorf("dialled as 65534: User = %d, %v", uid, ok)
			}
		})
	}
}

// TestUserOfNoLocalSocket: a TCP peer with no socket on this host (here:
// addresses no socket has) is not told.
func TestUserOfNoLocalSocket(t *testing.T) {
	if uid, ok := tcpOwner(&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 2}); ok {
		t.Errorf("owner %d of a socket that does not exist", uid)
	}
}

// TestPeek: what waits unread is copied and left to read.
func TestPeek(t *testing.T) {
	ln := listeners(t)["unix"]
	for _, sent := range []string{"", "st", "status\n"} {
		t.Run(fmt.Sprintf("%q", sent), func(t *testing.T) {
			c := accepted(t, ln, func() net.Conn {
				c, err := net.Dial("unix", ln.Addr().String())
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { c.Close() })
				c.Write([]byte(sent))
				return c
			})
			buf := make([]byte, 64)
			if n := Peek(c.(*net.UnixConn), buf); string(buf[:n]) != sent {
				t.Errorf("peeked %q, want %q", buf[:n], sent)
			}
			if sent == "" {
				return
			}
			got := make([]byte, len(sent))
			if n, err := c.Read(got); err != nil || string(got[:n]) != sent {
				t.Errorf("read %q, %v after the peek", got[:n], err)
			}
		})
	}
}
