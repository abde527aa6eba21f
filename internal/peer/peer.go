// Package peer tells a listener about the client at the other end of a
// local connection: which user it runs as (User), and what it has sent
// that nobody read yet (Peek). The control socket and the atop listener
// use them to keep one client from holding every connection slot.
package peer

import (
	"encoding/binary"
	"net"
	"syscall"
	"time"
)

// Peek copies into buf what waits unread in c's receive queue, without
// taking it and without taking c's read lock: a handler may be blocked
// reading c meanwhile. It returns how many bytes it copied (0 when none
// wait or c cannot be peeked).
func Peek(c syscall.Conn, buf []byte) int {
	rc, err := c.SyscallConn()
	if err != nil {
		return 0
	}
	n := 0
	rc.Control(func(fd uintptr) {
		n, _, err = syscall.Recvfrom(int(fd), buf, syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	})
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// User returns the user id the client at the other end of c runs as: the
// credentials it connected with on a unix socket (SO_PEERCRED), the owner
// of its socket for TCP from this host (looked up with sock_diag by the
// connection's addresses). ok is false where it cannot be told: a TCP
// client on another host, or a lookup that failed.
func User(c net.Conn) (uid uint32, ok bool) {
	switch c := c.(type) {
	case *net.UnixConn:
		rc, err := c.SyscallConn()
		if err != nil {
			return 0, false
		}
		var cred *syscall.Ucred
		rc.Control(func(fd uintptr) {
			cred, err = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
		})
		if err != nil {
			return 0, false
		}
		return cred.Uid, true
	case *net.TCPConn:
		them, ok1 := c.RemoteAddr().(*net.TCPAddr)
		us, ok2 := c.LocalAddr().(*net.TCPAddr)
		if !ok1 || !ok2 {
			return 0, false
		}
		return tcpOwner(them, us)
	}
	return 0, false
}

// sock_diag's message type and the cookie that matches any socket
// (linux/sock_diag.h, linux/inet_diag.h).
const (
	sockDiagByFamily = 20
	inetDiagNoCookie = ^uint32(0)
	diagReqLen       = 56 // struct inet_diag_req_v2
	diagUIDOffset    = 64 // of idiag_uid in struct inet_diag_msg
)

// tcpOwner asks the kernel (sock_diag, one exact lookup) for the owner of
// the TCP socket whose own address is local and whose peer is remote:
// the client's end of a connection to us, when the client is on this host
// (in this network namespace).
func tcpOwner(local, remote *net.TCPAddr) (uint32, bool) {
	family, size := syscall.AF_INET6, 16
	if local.IP.To4() != nil && remote.IP.To4() != nil {
		family, size = syscall.AF_INET, 4
	}
	fd, err := syscall.Socket(syscall.AF_NETLINK, syscall.SOCK_DGRAM|syscall.SOCK_CLOEXEC, syscall.NETLINK_INET_DIAG)
	if err != nil {
		return 0, false
	}
	defer syscall.Close(fd)
	tv := syscall.NsecToTimeval(int64(time.Second)) // the kernel answers at once; never hang on it
	syscall.SetsockoptTimeval(fd, syscall.SOL_SOCKET, syscall.SO_RCVTIMEO, &tv)

	req := make([]byte, syscall.NLMSG_HDRLEN+diagReqLen)
	ne := binary.NativeEndian
	ne.PutUint32(req[0:], uint32(len(req)))
	ne.PutUint16(req[4:], sockDiagByFamily)
	ne.PutUint16(req[6:], syscall.NLM_F_REQUEST)
	ne.PutUint32(req[8:], 1) // sequence
	r := req[syscall.NLMSG_HDRLEN:]
	r[0], r[1] = byte(family), syscall.IPPROTO_TCP
	ne.PutUint32(r[4:], ^uint32(0)) // every state
	binary.BigEndian.PutUint16(r[8:], uint16(local.Port))
	binary.BigEndian.PutUint16(r[10:], uint16(remote.Port))
	copy(r[12:28], ip(local.IP, size))
	copy(r[28:44], ip(remote.IP, size))
	ne.PutUint32(r[48:], inetDiagNoCookie)
	ne.PutUint32(r[52:], inetDiagNoCookie)
	if err := syscall.Sendto(fd, req, 0, &syscall.SockaddrNetlink{Family: syscall.AF_NETLINK}); err != nil {
		return 0, false
	}
	buf := make([]byte, 4096)
	n, _, err := syscall.Recvfrom(fd, buf, 0)
	if err != nil {
		return 0, false
	}
	return parseDiag(buf[:n])
}

// parseDiag reads the owner from sock_diag's answer to one exact lookup:
// an inet_diag_msg, or an error message (no such socket: not a client on
// this host).
func parseDiag(b []byte) (uint32, bool) {
	ne := binary.NativeEndian
	if len(b) < syscall.NLMSG_HDRLEN || ne.Uint16(b[4:]) != sockDiagByFamily {
		return 0, false
	}
	m := b[syscall.NLMSG_HDRLEN:]
	if len(m) < diagUIDOffset+4 {
		return 0, false
	}
	return ne.Uint32(m[diagUIDOffset:]), true
}

// ip is addr in size bytes (4 for IPv4, 16 for IPv6).
func ip(addr net.IP, size int) []byte {
	if size == 4 {
		return addr.To4()
	}
	return addr.To16()
}
