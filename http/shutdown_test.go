package http

import (
	"bufio"
	"context"
	"errors"
	"net"
	nethttp "net/http"
	"sync"
	"testing"
	"time"
)

// TestShutdownPastItsGraceServesNoMore: a connection whose request was still under way when Shutdown's grace
// ended is closed; the server does not go on to serve it. Before, fasthttp gave up waiting and served the
// connection again: a node past its grace (a 30 s synchronous detection in flight at SIGTERM, bench chaos)
// answered new requests on its open connections while it left the cluster.
func TestShutdownPastItsGraceServesNoMore(t *testing.T) {
	s := New(Config{})
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var ln net.Listener = &readSignal{Listener: inner, read: make(chan struct{})}
	served := make(chan error, 1)
	go func() { served <- s.Serve(ln) }()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// A request under way: its headers half sent on a new connection (fasthttp counts it idle only after
	// 5 s, so Shutdown waits for it).
	if _, err := c.Write([]byte("GET /healthz HTTP/1.1\r\nHost: filigrane\r\n")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ln.(*readSignal).read:
	case <-time.After(10 * time.Second):
		t.Fatal("the server read nothing of the request")
	}
	sctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := s.Shutdown(sctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("shutdown: %v, want the grace's deadline", err)
	}
	// The client finishes its request.
	_, werr := c.Write([]byte("\r\n"))
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, rerr := nethttp.ReadResponse(bufio.NewReader(c), nil)
	if werr == nil && rerr == nil {
		resp.Body.Close()
		t.Fatalf("the request was answered %d after the shutdown's grace ended", resp.StatusCode)
	}
	var ne net.Error
	if errors.As(rerr, &ne) && ne.Timeout() {
		t.Fatalf("the connection stayed open after the shutdown's grace ended: %v", rerr)
	}
	if err := <-served; err != nil {
		t.Fatalf("serve: %v", err)
	}
}

// readSignal is a listener whose first accepted connection closes read once the server has read from it.
type readSignal struct {
	net.Listener
	read chan struct{}
	once sync.Once
}

func (l *readSignal) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &signalConn{Conn: c, l: l}, nil
}

type signalConn struct {
	net.Conn
	l *readSignal
}

func (c *signalConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.l.once.Do(func() { close(c.l.read) })
	}
	return n, err
}
