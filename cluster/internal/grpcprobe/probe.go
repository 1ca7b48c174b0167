// Package grpcprobe lets tests start several protoactor remotes in one
// process without tripping the race detector.
//
// Why it exists: protoactor's remote.(*Remote).Start calls
// grpclog.SetLoggerV2, which writes a gRPC package variable without any
// synchronisation, while every running gRPC server reads that variable when
// it logs. The first read happens in the server's Serve goroutine right after
// Start returns. Starting a second remote in the same process is therefore a
// data race in the eyes of the race detector unless the earlier server's read
// is ordered before the later write.
//
// A Probe is a gRPC server option (a pass-through of insecure transport
// credentials) plus a way to make one TCP connection to the server from
// 127.0.0.2. The server's accept loop hands that connection to the Probe's
// ServerHandshake in a goroutine that descends from the Serve goroutine, after
// its first log read; the handshake closes a channel that the test waits on.
// That creates the happens-before edge. The probe connection is refused with
// io.EOF, which gRPC closes without logging, so nothing reads the logger
// after the edge. Real connections (from other addresses) are untouched.
//
// That orders the start-up read only. gRPC also reads the variable later, on
// connections (server side) and in clients, and those reads must come after
// every start in the race detector's eyes too. So a test starts all of its
// remotes first, without letting them talk, then calls Sync on every probe:
// each later server connection passes through the probe's handshake, which
// takes the mutex that Sync released, so it is ordered after the starts.
// (Client-side reads are ordered by whatever the test uses to make the nodes
// talk after that point; see clustertest.)
package grpcprobe

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// probeIP is the loopback source address the probe connection comes from;
// protoactor's own connections in tests come from 127.0.0.1.
var probeIP = net.IPv4(127, 0, 0, 2)

// Probe is single-use: one Probe per gRPC server.
type Probe struct {
	credentials.TransportCredentials
	once  sync.Once
	ready chan struct{}
	// barrier is taken by every real handshake and by Sync.
	barrier sync.Mutex
}

// New returns an unarmed probe.
func New() *Probe {
	return &Probe{TransportCredentials: insecure.NewCredentials(), ready: make(chan struct{})}
}

// ServerOption installs the probe in a gRPC server.
func (p *Probe) ServerOption() grpc.ServerOption { return grpc.Creds(p) }

// ServerHandshake signals on the probe connection and passes every other
// connection to insecure credentials.
func (p *Probe) ServerHandshake(c net.Conn) (net.Conn, credentials.AuthInfo, error) {
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok && a.IP.Equal(probeIP) {
		p.once.Do(func() { close(p.ready) })
		return nil, nil, io.EOF
	}
	p.barrier.Lock()
	p.barrier.Unlock() // an empty critical section: it only orders
	return p.TransportCredentials.ServerHandshake(c)
}

// Sync orders every connection the server accepts from now on after
// everything the caller did before (for example, starting other remotes).
func (p *Probe) Sync() {
	p.barrier.Lock()
	p.barrier.Unlock()
}

// Wait connects to addr from 127.0.0.2 and returns once the server has
// handed the connection to the probe.
func (p *Probe) Wait(ctx context.Context, addr string) error {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: probeIP}}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("grpcprobe: dial %s from %s: %w", addr, probeIP, err)
	}
	defer c.Close()
	select {
	case <-p.ready:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("grpcprobe: waiting for %s to accept: %w", addr, ctx.Err())
	}
}
