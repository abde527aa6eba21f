package testutil

import (
	"net"
	"os"
	"runtime"
	"syscall"
	"testing"
)

// DialAs dials addr as user uid: the connection's socket is made and
// connected with that effective user id (as SO_PEERCRED and sock_diag
// see it), on one OS thread switched for the call and back. It needs
// root; elsewhere it skips the test. The connection is closed at cleanup.
func DialAs(t testing.TB, uid int, network, addr string) net.Conn {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("dialling as another user needs root")
	}
	type result struct {
		c   net.Conn
		err error
	}
	ch := make(chan result, 1)
	go func() {
		// Only this thread changes user; it is never unlocked if the
		// switch back fails, so the runtime ends it with the goroutine.
		runtime.LockOSThread()
		if _, _, e := syscall.RawSyscall(syscall.SYS_SETRESUID, ^uintptr(0), uintptr(uid), ^uintptr(0)); e != 0 {
			ch <- result{err: e}
			return
		}
		c, err := net.Dial(network, addr)
		if _, _, e := syscall.RawSyscall(syscall.SYS_SETRESUID, ^uintptr(0), 0, ^uintptr(0)); e == 0 {
			runtime.UnlockOSThread()
		}
		ch <- result{c, err}
	}()
	r := <-ch
	if r.err != nil {
		t.Fatalf("dial %s %s as uid %d: %v", network, addr, uid, r.err)
	}
	t.Cleanup(func() { r.c.Close() })
	return r.c
}
