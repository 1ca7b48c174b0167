//go:build linux

package clustertest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"syscall"
)

// Linux's socket-diagnostics netlink interface (linux/sock_diag.h, linux/inet_diag.h): the constants and
// layouts the listener query below uses.
const (
	netlinkSockDiag  = 4  // NETLINK_SOCK_DIAG
	sockDiagByFamily = 20 // SOCK_DIAG_BY_FAMILY
	tcpListen        = 10 // TCP_LISTEN
	// struct inet_diag_req_v2: family, protocol, ext, pad (1 byte each), states (u32), then the 48-byte
	// struct inet_diag_sockid: sport and dport (big-endian u16), src and dst (16 bytes each), if (u32),
	// cookie (2 u32).
	inetDiagReqLen = 56
	// struct inet_diag_msg: family, state, timer, retrans (1 byte each), the sockid, then expires, rqueue,
	// wqueue, uid and inode (u32 each).
	inetDiagMsgLen    = 72
	inetDiagMsgSport  = 4
	inetDiagMsgInode  = 68
	nlmsgHdrLen       = 16
	nlmsgAlign        = 4
	sockDiagReadBytes = 32 << 10
)

// listenerInodes returns the socket inodes ("socket:[N]", as /proc/PID/fd links name them) of the TCP sockets
// listening on port, IPv4 and IPv6, asked of the kernel's socket diagnostics. Asked for listeners only, the
// kernel walks its table of listening sockets alone (filtered by port); reading /proc/net/tcp walks every
// connection's bucket of the established table too, about 9 ms of system CPU on this project's test machines
// for each process a test started (1% of internal/node's tests' CPU). An error says the interface is not
// there (a sandbox without it): the caller reads /proc/net/tcp then.
func listenerInodes(port int) (map[string]bool, error) {
	inodes := map[string]bool{}
	for _, family := range []uint8{syscall.AF_INET, syscall.AF_INET6} {
		if err := diagListeners(family, port, inodes); err != nil {
			return nil, err
		}
	}
	return inodes, nil
}

// diagListeners adds to inodes the inodes of family's TCP sockets listening on port.
func diagListeners(family uint8, port int, inodes map[string]bool) error {
	fd, err := syscall.Socket(syscall.AF_NETLINK, syscall.SOCK_DGRAM|syscall.SOCK_CLOEXEC, netlinkSockDiag)
	if err != nil {
		return fmt.Errorf("sock_diag socket: %w", err)
	}
	defer syscall.Close(fd)
	req := make([]byte, nlmsgHdrLen+inetDiagReqLen)
	native := binary.NativeEndian // netlink's headers and the diagnostics' host-order fields
	native.PutUint32(req[0:], uint32(len(req)))
	native.PutUint16(req[4:], sockDiagByFamily)
	native.PutUint16(req[6:], syscall.NLM_F_REQUEST|syscall.NLM_F_DUMP)
	native.PutUint32(req[8:], 1) // sequence number
	body := req[nlmsgHdrLen:]
	body[0], body[1] = family, syscall.IPPROTO_TCP
	native.PutUint32(body[4:], 1<<tcpListen)
	binary.BigEndian.PutUint16(body[8:], uint16(port)) // the listeners' dump keeps this source port only
	if err := syscall.Sendto(fd, req, 0, &syscall.SockaddrNetlink{Family: syscall.AF_NETLINK}); err != nil {
		return fmt.Errorf("sock_diag request: %w", err)
	}
	buf := make([]byte, sockDiagReadBytes)
	for {
		n, _, err := syscall.Recvfrom(fd, buf, 0)
		if err != nil {
			return fmt.Errorf("sock_diag answer: %w", err)
		}
		msgs := buf[:n]
		for len(msgs) >= nlmsgHdrLen {
			l := int(native.Uint32(msgs[0:]))
			typ := native.Uint16(msgs[4:])
			if l < nlmsgHdrLen || l > len(msgs) {
				return errors.New("sock_diag answer: truncated message")
			}
			switch typ {
			case syscall.NLMSG_DONE:
				return nil
			case syscall.NLMSG_ERROR:
				if l >= nlmsgHdrLen+4 {
					if errno := int32(native.Uint32(msgs[nlmsgHdrLen:])); errno != 0 {
						return fmt.Errorf("sock_diag answer: %w", syscall.Errno(-errno))
					}
				}
				return errors.New("sock_diag answer: error message")
			case sockDiagByFamily:
				m := msgs[nlmsgHdrLen:l]
				if len(m) >= inetDiagMsgLen && int(binary.BigEndian.Uint16(m[inetDiagMsgSport:])) == port {
					inodes["socket:["+strconv.FormatUint(uint64(native.Uint32(m[inetDiagMsgInode:])), 10)+"]"] = true
				}
			}
			adv := (l + nlmsgAlign - 1) &^ (nlmsgAlign - 1)
			if adv > len(msgs) {
				break
			}
			msgs = msgs[adv:]
		}
	}
}
