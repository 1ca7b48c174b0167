// Package netguard protects a TCP listener from clients that hold connections without making progress: it
// caps connections per listener and per client IP, keeps accepting through temporary errors (EMFILE and
// friends), and turns read and write deadlines into progress deadlines once a request's headers are in. It
// knows nothing about HTTP beyond the one status line it writes to a refused connection; it must not decide
// anything about requests: the caller may supply that answer (Limits.Refusal) in its own error shape.
package netguard

import (
	"bytes"
	"errors"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Limits bound a listener's connections. Zero values take the defaults below.
type Limits struct {
	// MaxConns caps open connections on the listener; a connection over it is answered 503 and closed.
	MaxConns int
	// MaxConnsPerIP caps open connections from one client address; over it: 503 and closed.
	MaxConnsPerIP int
	// BodyProgress is how long a request body read or a response write may wait for the next bytes once
	// the request's headers are in (see Conn.BeginBody). A large upload over a slow link lives as long as
	// bytes keep arriving.
	BodyProgress time.Duration
	// Refusal, when set, builds the complete HTTP response a connection over a limit reads before it is
	// closed. It is called once per refused connection, so that each answer can carry its own request id, and
	// must not block. Nil: DefaultRefusal.
	Refusal func() []byte
}

// Defaults for Limits.
const (
	DefaultMaxConns      = 4096
	DefaultMaxConnsPerIP = 256
	DefaultBodyProgress  = 60 * time.Second
)

func (l *Limits) defaults() {
	if l.MaxConns <= 0 {
		l.MaxConns = DefaultMaxConns
	}
	if l.MaxConnsPerIP <= 0 {
		l.MaxConnsPerIP = DefaultMaxConnsPerIP
	}
	if l.BodyProgress <= 0 {
		l.BodyProgress = DefaultBodyProgress
	}
	if l.Refusal == nil {
		l.Refusal = DefaultRefusal
	}
}

// Listener wraps a net.Listener with Limits. Accept returns *Conn values.
type Listener struct {
	net.Listener
	limits Limits
	// Refused counts connections closed at once for being over a limit; Errors counts temporary accept
	// errors that were waited out. Both are for metrics and tests.
	Refused atomic.Int64
	Errors  atomic.Int64
	// OnTemporary, when set, is told about each temporary accept error (logging); it must not block.
	OnTemporary func(err error, backoff time.Duration)
	// sleep waits out a backoff; tests replace it.
	sleep func(time.Duration)

	refusing chan struct{}
	// goroutines counts what the listener runs beside the server (refusals, lingering closes); Wait joins them.
	goroutines sync.WaitGroup

	mu    sync.Mutex
	open  int
	perIP map[string]int
	// conns holds the connections accepted and not closed yet, for CloseOpen.
	conns map[*Conn]struct{}
	// lingering holds the connections in their lingering close; noLinger is set by EndLingering.
	lingering map[*Conn]struct{}
	noLinger  bool
}

// Wrap guards ln with limits.
func Wrap(ln net.Listener, limits Limits) *Listener {
	limits.defaults()
	return &Listener{Listener: ln, limits: limits, sleep: time.Sleep, perIP: map[string]int{}, conns: map[*Conn]struct{}{},
		refusing: make(chan struct{}, maxRefusing), lingering: map[*Conn]struct{}{}}
}

// Limits returns the listener's limits with defaults applied.
func (l *Listener) Limits() Limits { return l.limits }

// refusalBody is the problem a refused connection reads when the caller supplies no Refusal: the error table's
// 503 code (internal/problem), without a request id, which only the HTTP layer makes.
const refusalBody = `{"type":"/problems/service_unavailable","title":"Service unavailable","status":503,` +
	`"detail":"too many open connections; retry shortly","code":"service_unavailable"}`

var refusal = []byte("HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/problem+json\r\nRetry-After: 1\r\n" +
	"Connection: close\r\nContent-Length: " + strconv.Itoa(len(refusalBody)) + "\r\n\r\n" + refusalBody)

// DefaultRefusal is the answer to a connection over a limit when Limits.Refusal is nil: a complete HTTP
// response, so that a client sees "busy, retry" instead of a reset.
func DefaultRefusal() []byte { return refusal }

// maxBackoff bounds the wait after repeated temporary accept errors.
const maxBackoff = time.Second

// Accept waits for the next connection within the limits. Temporary errors (out of file descriptors, a
// connection aborted before it was accepted, a timeout) are waited out with a growing backoff and never
// returned: one client that exhausts descriptors must not end the listener.
func (l *Listener) Accept() (net.Conn, error) {
	backoff := time.Duration(0)
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			if !Temporary(err) {
				return nil, err
			}
			l.Errors.Add(1)
			backoff = min(max(2*backoff, 5*time.Millisecond), maxBackoff)
			if l.OnTemporary != nil {
				l.OnTemporary(err, backoff)
			}
			l.sleep(backoff)
			continue
		}
		backoff = 0
		ip := hostOf(c.RemoteAddr())
		gc := &Conn{Conn: c, ln: l, ip: ip, progress: l.limits.BodyProgress}
		l.mu.Lock()
		over := l.open >= l.limits.MaxConns || l.perIP[ip] >= l.limits.MaxConnsPerIP
		if !over {
			l.open++
			l.perIP[ip]++
			l.conns[gc] = struct{}{}
		}
		l.mu.Unlock()
		if over {
			l.Refused.Add(1)
			l.refuse(c)
			continue
		}
		return gc, nil
	}
}

// maxRefusing bounds the refused connections being answered at once; past it they are closed unanswered.
const maxRefusing = 64

// refuse answers c with 503 and closes it. An HTTP client takes an answer that arrives before its request
// for a broken connection, and closing a socket with unread input resets it (the client loses the answer),
// so the request's headers are read first and the rest dropped for a moment. That happens off the accept
// loop, for maxRefusing connections at a time; past that (a flood), c gets what it already sent read, the
// answer, and a close, without waiting: under a flood a real client's request is usually in by the time
// its connection is accepted.
func (l *Listener) refuse(c net.Conn) {
	select {
	case l.refusing <- struct{}{}:
	default:
		_ = c.SetDeadline(time.Now().Add(5 * time.Millisecond))
		_, _ = c.Read(make([]byte, 16<<10))
		_ = c.SetWriteDeadline(time.Now().Add(5 * time.Millisecond))
		_, _ = c.Write(l.limits.Refusal())
		_ = c.Close()
		return
	}
	l.goroutines.Add(1)
	go func() {
		defer l.goroutines.Done()
		defer func() { <-l.refusing }()
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(refuseWait))
		readHeaders(c)
		_ = c.SetDeadline(time.Now().Add(refuseWait))
		if _, err := c.Write(l.limits.Refusal()); err != nil {
			return
		}
		if cw, ok := c.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(c, 64<<10))
	}()
}

// refuseWait bounds each step of answering a refused connection off the accept loop.
const refuseWait = 250 * time.Millisecond

// readHeaders reads from c until the end of a request's headers, 16 KiB, an error or the deadline.
func readHeaders(c net.Conn) {
	buf := make([]byte, 4096)
	var tail []byte
	for total := 0; total < 16<<10; {
		n, err := c.Read(buf)
		total += n
		tail = append(tail, buf[:n]...)
		if bytes.Contains(tail, []byte("\r\n\r\n")) || err != nil {
			return
		}
		tail = tail[max(0, len(tail)-3):]
	}
}

// Open returns the number of connections the listener holds open now.
func (l *Listener) Open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open
}

func (l *Listener) release(c *Conn) {
	l.mu.Lock()
	l.open--
	if l.perIP[c.ip]--; l.perIP[c.ip] <= 0 {
		delete(l.perIP, c.ip)
	}
	delete(l.conns, c)
	l.mu.Unlock()
}

// CloseOpen closes every connection still open, at once and without a lingering close, and makes later
// closes immediate: for a shutdown whose grace ended with requests still running. The server would otherwise
// go on serving those connections (fasthttp's Shutdown stops waiting for them and serves them as before
// once its context ends) while the process leaves its cluster; a request cut here loses its answer, as the
// end of the grace means.
func (l *Listener) CloseOpen() {
	l.mu.Lock()
	l.noLinger = true
	for c := range l.lingering {
		_ = c.Conn.SetReadDeadline(time.Unix(1, 0))
	}
	open := make([]*Conn, 0, len(l.conns))
	for c := range l.conns {
		open = append(open, c)
	}
	l.mu.Unlock()
	for _, c := range open {
		_ = c.Close()
	}
}

// Temporary reports whether an accept error will likely pass: descriptor or buffer exhaustion, a connection
// the peer aborted, a timeout. A closed listener is not temporary.
func Temporary(err error) bool {
	if errors.Is(err, net.ErrClosed) {
		return false
	}
	for _, e := range []syscall.Errno{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM,
		syscall.ECONNABORTED, syscall.ECONNRESET, syscall.EINTR, syscall.EAGAIN, syscall.EPROTO} {
		if errors.Is(err, e) {
			return true
		}
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func hostOf(a net.Addr) string {
	if ta, ok := a.(*net.TCPAddr); ok {
		return ta.IP.String()
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return host
}

// Conn is an accepted connection. The server's own deadlines (header timeout, idle timeout) pass through
// until BeginBody; from then on every read and write gets a fresh deadline of the body-progress timeout, so
// that a body is bounded by its progress, not its total time. The next SetReadDeadline from the server (the
// idle or header timeout of the next request) ends the body phase.
type Conn struct {
	net.Conn
	ln       *Listener
	ip       string
	progress time.Duration
	body     atomic.Bool
	closed   atomic.Bool
}

// BeginBody switches the connection to progress deadlines for the rest of the current request.
func (c *Conn) BeginBody() {
	c.body.Store(true)
	_ = c.Conn.SetReadDeadline(time.Now().Add(c.progress))
	_ = c.Conn.SetWriteDeadline(time.Now().Add(c.progress))
}

// InBody reports whether the connection is in its body phase.
func (c *Conn) InBody() bool { return c.body.Load() }

// SetReadDeadline sets the server's deadline and ends the body phase: the server calls it before it reads
// the next request's headers.
func (c *Conn) SetReadDeadline(t time.Time) error {
	c.body.Store(false)
	return c.Conn.SetReadDeadline(t)
}

// SetWriteDeadline is ignored during the body phase, where each write sets its own.
func (c *Conn) SetWriteDeadline(t time.Time) error {
	if c.body.Load() {
		return nil
	}
	return c.Conn.SetWriteDeadline(t)
}

// SetDeadline sets both deadlines through the two methods above.
func (c *Conn) SetDeadline(t time.Time) error {
	return errors.Join(c.SetReadDeadline(t), c.SetWriteDeadline(t))
}

// Read reads for the server. Once the connection is closed it reads nothing more, even though a lingering
// close keeps the socket readable: a server may close an idle keep-alive connection from another goroutine
// (fasthttp's Shutdown does) while the connection's own goroutine waits for the next request, and a request
// the client sent before it saw the close must not be served then, with no way left to answer it. It ends
// with net.ErrClosed, as on a plain close (the lingering goroutine drops the input).
func (c *Conn) Read(p []byte) (int, error) {
	if c.closed.Load() {
		return 0, net.ErrClosed
	}
	if c.body.Load() {
		_ = c.Conn.SetReadDeadline(time.Now().Add(c.progress))
	}
	n, err := c.Conn.Read(p)
	if c.closed.Load() {
		return 0, net.ErrClosed
	}
	return n, err
}

func (c *Conn) Write(p []byte) (int, error) {
	if !c.body.Load() {
		return c.Conn.Write(p)
	}
	// Write in pieces so that each one's deadline measures progress, not the whole response.
	const piece = 256 << 10
	n := 0
	for n < len(p) {
		end := min(len(p), n+piece)
		_ = c.Conn.SetWriteDeadline(time.Now().Add(c.progress))
		m, err := c.Conn.Write(p[n:end])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// Lingering close bounds: after the server closes a connection whose client may still be sending (an answer
// given before the body was read), the connection reads and drops input until the client stops, for at most
// lingerIdle without a byte and lingerMax in all.
const (
	lingerIdle = time.Second
	lingerMax  = 3 * time.Second
)

// maxLingering caps the connections in their lingering close per listener.
const maxLingering = 256

// Close closes the connection and gives its place back to the listener (once). It closes in two steps, as
// lingering close in other servers does: the sending side first (the client reads the whole answer and an
// end of stream), then input is read and dropped for a bounded time before the socket is closed. Closing a
// socket with unread input makes the kernel send a reset, and a client still sending its body then loses
// the answer it was sent ("connection reset by peer" instead of, say, 409 upload_in_use). The place in the
// limits is given back at once (the service is done with the connection); lingering connections are capped
// by maxLingering instead, past which a close is immediate.
func (c *Conn) Close() error {
	if !c.closed.CompareAndSwap(false, true) {
		return nil
	}
	defer c.ln.release(c)
	cw, ok := c.Conn.(interface{ CloseWrite() error })
	if !ok || !c.ln.startLinger(c) {
		return c.Conn.Close()
	}
	if err := cw.CloseWrite(); err != nil {
		// The peer is gone already (reset): nothing to linger for.
		err = errors.Join(err, c.Conn.Close())
		c.ln.endLinger(c)
		return err
	}
	go func() {
		defer c.ln.endLinger(c)
		c.linger()
		_ = c.Conn.Close()
	}()
	return nil
}

// linger reads and drops input until the client closes, goes quiet for lingerIdle, lingerMax passes, or
// EndLingering cuts it short (by moving the read deadline into the past).
func (c *Conn) linger() {
	end := time.Now().Add(lingerMax)
	buf := make([]byte, 32<<10)
	for {
		c.ln.mu.Lock()
		cut := c.ln.noLinger
		if !cut {
			d := time.Now().Add(lingerIdle)
			if d.After(end) {
				d = end
			}
			_ = c.Conn.SetReadDeadline(d)
		}
		c.ln.mu.Unlock()
		if cut {
			return
		}
		if _, err := c.Conn.Read(buf); err != nil {
			return
		}
	}
}

// startLinger registers c as lingering and counts its goroutine (endLinger ends both); it reports false once
// EndLingering was called or maxLingering connections linger.
func (l *Listener) startLinger(c *Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.noLinger || len(l.lingering) >= maxLingering {
		return false
	}
	l.lingering[c] = struct{}{}
	l.goroutines.Add(1)
	return true
}

func (l *Listener) endLinger(c *Conn) {
	l.mu.Lock()
	delete(l.lingering, c)
	l.mu.Unlock()
	l.goroutines.Done()
}

// Lingering returns the number of connections in their lingering close.
func (l *Listener) Lingering() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.lingering)
}

// EndLingering cuts every lingering close short and makes later closes immediate: for shutdown, where the
// process is about to go anyway.
func (l *Listener) EndLingering() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.noLinger = true
	for c := range l.lingering {
		_ = c.Conn.SetReadDeadline(time.Unix(1, 0))
	}
}

// Wait returns when every goroutine the listener started (refusals, lingering closes) has ended. Call it
// after the server stopped using the listener; EndLingering first makes it quick.
func (l *Listener) Wait() { l.goroutines.Wait() }
