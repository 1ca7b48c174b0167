package netguard

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// flakyListener fails its first accepts with the given errors, then accepts from a real listener.
type flakyListener struct {
	net.Listener
	errs []error
}

func (f *flakyListener) Accept() (net.Conn, error) {
	if len(f.errs) > 0 {
		err := f.errs[0]
		f.errs = f.errs[1:]
		return nil, err
	}
	return f.Listener.Accept()
}

func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

func TestAcceptWaitsOutTemporaryErrors(t *testing.T) {
	ln := listen(t)
	emfile := &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	flaky := &flakyListener{Listener: ln, errs: []error{emfile, emfile, emfile, syscall.ENFILE, syscall.ECONNABORTED}}
	g := Wrap(flaky, Limits{})
	var waits []time.Duration
	g.sleep = func(d time.Duration) { waits = append(waits, d) }
	go func() {
		if c, err := net.Dial("tcp", ln.Addr().String()); err == nil {
			defer c.Close()
			_, _ = io.Copy(io.Discard, c)
		}
	}()
	c, err := g.Accept()
	if err != nil {
		t.Fatalf("a temporary error ended Accept: %v", err)
	}
	c.Close()
	if g.Errors.Load() != 5 || len(waits) != 5 || !(waits[0] < waits[1] && waits[1] < waits[2]) {
		t.Fatalf("errors %d, waits %v: want 5 growing waits", g.Errors.Load(), waits)
	}
	ln.Close()
	if _, err := g.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("a closed listener: %v", err)
	}
}

func TestTemporary(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{&net.OpError{Op: "accept", Err: os.NewSyscallError("accept4", syscall.EMFILE)}, true},
		{syscall.ENFILE, true},
		{fmt.Errorf("wrapped: %w", syscall.ECONNABORTED), true},
		{net.ErrClosed, false},
		{errors.New("something else"), false},
	} {
		if got := Temporary(c.err); got != c.want {
			t.Errorf("Temporary(%v) = %v", c.err, got)
		}
	}
}

func TestConnectionsOverTheLimitsAreRefused(t *testing.T) {
	for _, lim := range []Limits{{MaxConns: 2}, {MaxConnsPerIP: 2}} {
		g := Wrap(listen(t), lim)
		accepted := make(chan net.Conn, 4)
		go func() {
			for {
				c, err := g.Accept()
				if err != nil {
					return
				}
				accepted <- c
			}
		}()
		var clients []net.Conn
		for range 3 {
			c, err := net.Dial("tcp", g.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			clients = append(clients, c)
		}
		held := []net.Conn{<-accepted, <-accepted}
		// The third reads a complete 503 and the end of the connection.
		_ = clients[2].SetReadDeadline(time.Now().Add(10 * time.Second))
		b, err := io.ReadAll(clients[2])
		if err != nil || !strings.HasPrefix(string(b), "HTTP/1.1 503 ") || !strings.HasSuffix(string(b), `"code":"service_unavailable"}`) {
			t.Fatalf("%+v: refused client read %q, %v", lim, b, err)
		}
		if g.Open() != 2 || g.Refused.Load() != 1 {
			t.Fatalf("%+v: open %d refused %d", lim, g.Open(), g.Refused.Load())
		}
		// Closing a held connection gives its place back (twice is harmless).
		held[0].Close()
		held[0].Close()
		if g.Open() != 1 {
			t.Fatalf("%+v: open after close: %d", lim, g.Open())
		}
		c, err := net.Dial("tcp", g.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		(<-accepted).Close()
		held[1].Close()
	}
}

// TestBodyIsBoundedByProgress: after BeginBody a read that keeps receiving bytes outlives the server's header
// deadline, and a read that receives nothing ends after the progress timeout.
func TestBodyIsBoundedByProgress(t *testing.T) {
	const progress = time.Second
	g := Wrap(listen(t), Limits{BodyProgress: progress})
	client, err := net.Dial("tcp", g.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	sc, err := g.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	c := sc.(*Conn)
	// The server's header deadline has long passed by the time the body is read.
	_ = c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	c.BeginBody()
	go func() {
		for range 6 {
			if _, err := client.Write([]byte("x")); err != nil {
				return
			}
			time.Sleep(progress / 5) // the client's pace, not synchronisation: 6 bytes over ~1.2 s
		}
	}()
	buf := make([]byte, 1)
	start := time.Now()
	for i := range 6 {
		if _, err := io.ReadFull(c, buf); err != nil {
			t.Fatalf("byte %d after %s: %v", i, time.Since(start), err)
		}
	}
	if _, err := c.Read(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a stalled body: %v", err)
	}
	// The next request's header deadline ends the body phase.
	_ = c.SetReadDeadline(time.Now().Add(time.Hour))
	if c.InBody() {
		t.Fatal("still in the body phase")
	}
}
