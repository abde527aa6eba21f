package testutil

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// DialFrom connects to addr from the loopback address from (any 127.0.0.x
// is the loopback on Linux): several client addresses on one host. The
// connection is closed at the end of the test.
func DialFrom(t testing.TB, from, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 2 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// HTTPGet sends one keep-alive GET of path on c with the header lines hdr
// ("Name: value") and reads the whole answer, within 5 s; the connection
// stays open, idle on the server. It returns the status code.
func HTTPGet(c net.Conn, path string, hdr ...string) (int, error) {
	c.SetDeadline(time.Now().Add(5 * time.Second))
	req := "GET " + path + " HTTP/1.1\r\nHost: x\r\n"
	for _, h := range hdr {
		req += h + "\r\n"
	}
	if _, err := io.WriteString(c, req+"\r\n"); err != nil {
		return 0, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, err
}

// IdleHTTPConns opens n keep-alive connections from from to addr that have
// each had one answer to a GET of path and stay open: idle on the server.
func IdleHTTPConns(t testing.TB, n int, from, addr, path string) {
	t.Helper()
	for i := range n {
		c := DialFrom(t, from, addr)
		if _, err := HTTPGet(c, path); err != nil {
			t.Fatalf("idle connection %d from %s: %v", i, from, err)
		}
	}
}
