//go:build linux

package clustertest

import (
	"maps"
	"net"
	"strconv"
	"testing"
)

// TestListenerInodesMatchProc: the socket diagnostics name the same listening sockets as /proc/net/tcp and
// tcp6 (IPv4 and IPv6 listeners on one port), leave out the connections on that port and the listeners on
// other ports, and find nothing on a port no one listens on.
func TestListenerInodesMatchProc(t *testing.T) {
	ln4, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln4.Close()
	port := ln4.Addr().(*net.TCPAddr).Port
	if ln6, err := net.Listen("tcp6", net.JoinHostPort("::1", strconv.Itoa(port))); err == nil {
		defer ln6.Close()
	} else {
		t.Logf("no IPv6 listener: %v", err)
	}
	other, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	conn, err := net.Dial("tcp4", ln4.Addr().String()) // established sockets on port, both ends
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	accepted, err := ln4.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer accepted.Close()

	got, err := listenerInodes(port)
	if err != nil {
		t.Fatalf("socket diagnostics: %v", err)
	}
	want := procListenerInodes(port)
	if len(got) == 0 || !maps.Equal(got, want) {
		t.Fatalf("listeners on %d: socket diagnostics %v, /proc/net/tcp %v", port, got, want)
	}
	free := other.Addr().(*net.TCPAddr).Port
	other.Close()
	if got, err := listenerInodes(free); err != nil || len(got) != 0 {
		t.Fatalf("listeners on a closed port %d: %v %v", free, got, err)
	}
}
