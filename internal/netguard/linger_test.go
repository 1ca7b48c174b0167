package netguard

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"
)

// earlyAnswerServer answers every connection's first request with 409 as soon as its headers are in, before
// its body, and closes the connection: what the service does for an upload PUT refused by its headers.
func earlyAnswerServer(t *testing.T, g *Listener) *sync.WaitGroup {
	t.Helper()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := g.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil || line == "\r\n" {
						break
					}
				}
				const body = `{"code":"upload_in_use"}`
				_, _ = c.Write([]byte("HTTP/1.1 409 Conflict\r\nConnection: close\r\nContent-Length: " +
					strconv.Itoa(len(body)) + "\r\n\r\n" + body))
			}()
		}
	}()
	return &wg
}

// TestEarlyAnswerReachesClientStillSending: a connection closed while its client is still sending a body
// must not reset the client's socket before the client could read the answer. Without a lingering close the
// kernel answers the unread body with a reset, and the client reports "connection reset by peer" instead of
// the 409 (a PUT refused with upload_in_use was seen that way on a loaded machine).
func TestEarlyAnswerReachesClientStillSending(t *testing.T) {
	ln := listen(t)
	g := Wrap(ln, Limits{})
	wg := earlyAnswerServer(t, g)
	body := bytes.Repeat([]byte("x"), 8<<20)
	for i := range 20 {
		req, _ := http.NewRequest("PUT", "http://"+ln.Addr().String()+"/uploads/u", bytes.NewReader(body))
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("PUT %d: %v (the early answer was lost)", i, err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 409 || string(b) != `{"code":"upload_in_use"}` {
			t.Fatalf("PUT %d: %d %s", i, res.StatusCode, b)
		}
	}
	g.Close()
	g.EndLingering()
	wg.Wait()
	g.Wait()
	if n := g.Open(); n != 0 {
		t.Fatalf("%d connections still counted open after every close", n)
	}
}

// TestLingerIsBounded: a client that keeps sending after the answer is cut off after the linger bounds, and
// EndLingering cuts every lingering connection at once (shutdown).
func TestLingerIsBounded(t *testing.T) {
	ln := listen(t)
	g := Wrap(ln, Limits{})
	wg := earlyAnswerServer(t, g)
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("PUT /u HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000000\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	// Keep sending: the server lingers, reading and dropping, while the client sends.
	stop := make(chan struct{})
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		chunk := make([]byte, 32<<10)
		for {
			select {
			case <-stop:
				return
			default:
			}
			_ = c.SetWriteDeadline(time.Now().Add(10 * time.Second))
			if _, err := c.Write(chunk); err != nil {
				return
			}
		}
	}()
	// The answer arrives although the body keeps coming.
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("reading the answer while sending: %v", err)
	}
	if res.StatusCode != 409 {
		t.Fatalf("status %d", res.StatusCode)
	}
	// The server closed the connection: its place is back, and it lingers while the client sends.
	for deadline := time.Now().Add(10 * time.Second); g.Open() != 0 || g.Lingering() != 1; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("open %d, lingering %d after the server's close; want 0 and 1", g.Open(), g.Lingering())
		}
	}
	g.Close()
	g.EndLingering()
	wg.Wait()
	g.Wait() // returns only once the lingering connection is really closed
	if n := g.Lingering(); n != 0 {
		t.Fatalf("%d connections lingering after EndLingering and Wait", n)
	}
	close(stop)
	<-sent
}

// TestInputAfterCloseIsNotServed: a server that closes an idle keep-alive connection from another goroutine
// (fasthttp's Shutdown closes idle connections while each one's own goroutine still waits for the next
// request) must not be handed a request that arrives on it afterwards: with the lingering close the socket
// still reads, and the connection's goroutine used to get the request, serve it (a detection charged, a
// cancel applied) and fail to write the answer ("use of closed network connection"), while the client saw
// only the connection closed. Seen with bench chaos's SIGTERM of a node. Now a read after Close ends with
// net.ErrClosed, as a plain close would, and the client's request is served by nobody: retrying it elsewhere
// is safe.
func TestInputAfterCloseIsNotServed(t *testing.T) {
	ln := listen(t)
	g := Wrap(ln, Limits{})
	defer g.Close()
	// The lingering goroutine reads the same socket and may take the input first: repeat, so that the
	// connection's goroutine gets it in some rounds.
	for round := range 20 {
		inputAfterClose(t, g, ln.Addr().String(), round)
	}
	g.EndLingering()
	g.Wait()
}

func inputAfterClose(t *testing.T, g *Listener, addr string, round int) {
	t.Helper()
	client, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	c, err := g.Accept()
	if err != nil {
		t.Fatal(err)
	}
	read := make(chan []byte, 1)
	readErr := make(chan error, 1)
	// The connection's goroutine, waiting for the next request; it may be blocked in its read or not have
	// started it when Close comes, and neither may see the input.
	go func() {
		buf := make([]byte, 64)
		n, err := c.Read(buf)
		if n > 0 {
			read <- buf[:n]
		}
		readErr <- err
	}()
	if err := c.Close(); err != nil { // Shutdown closing it as idle, from another goroutine
		t.Fatal(err)
	}
	// The client had sent its next request before it saw the close.
	if _, err := client.Write([]byte("POST /watermarks/images/detect HTTP/1.1\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	select {
	case b := <-read:
		t.Fatalf("round %d: a read after Close returned the client's input %q: the server would serve it unanswered", round, b)
	case err := <-readErr:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("round %d: read after Close: %v, want net.ErrClosed", round, err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("round %d: the connection's read did not end after Close", round)
	}
}
