package http

import (
	"context"
	"errors"
	"io"
	"net"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
)

// errClientGone is the cause of a work context cancelled because the client closed its connection.
var errClientGone = errors.New("the client closed the connection")

// maxDrainAfterForm is how much of a request body may be left after the handler read what it needed (a
// multipart epilogue) and still be discarded so that the connection can be watched.
const maxDrainAfterForm = 64 << 10

// watchDisconnect returns a context that is cancelled, with cause errClientGone, when the client closes the
// connection while the handler works on a request whose body it has read. fasthttp has no per-request
// cancellation (RequestCtx.Done closes only at server shutdown), so a goroutine reads the raw connection:
// the client is waiting for the answer and sends nothing meanwhile, so the read returns only when the
// connection is closed (EOF or reset). Bytes that do arrive are the start of a pipelined request, which the
// read consumed: the answer then closes the connection, and watching stops.
//
// stop must be called before the handler returns (before fasthttp reads the connection again): it ends the
// read with an expired deadline and clears the deadline, which fasthttp sets again before its next read.
// A client that half-closes its side after sending the request looks like one that left; HTTP clients do not.
func watchDisconnect(parent context.Context, ctx *fasthttp.RequestCtx) (context.Context, func()) {
	conn := ctx.Conn()
	if conn == nil || !drainBody(ctx) {
		return parent, func() {}
	}
	c, cancel := context.WithCancelCause(parent)
	if err := conn.SetReadDeadline(time.Time{}); err != nil {
		return parent, func() { cancel(nil) }
	}
	var pipelined atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		var b [1]byte
		n, err := conn.Read(b[:])
		var ne net.Error
		switch {
		case n > 0:
			pipelined.Store(true)
		case errors.As(err, &ne) && ne.Timeout():
			// stopped
		default:
			cancel(errClientGone)
		}
	}()
	return c, func() {
		_ = conn.SetReadDeadline(time.Now())
		<-done
		_ = conn.SetReadDeadline(time.Time{})
		cancel(nil)
		if pipelined.Load() {
			ctx.SetConnectionClose()
		}
	}
}

// drainBody reads what is left of the request body, up to maxDrainAfterForm bytes; it reports whether the
// body is now fully read, so that the next bytes on the connection are not this request's.
func drainBody(ctx *fasthttp.RequestCtx) bool {
	r := ctx.RequestBodyStream()
	if r == nil {
		return true
	}
	n, err := io.Copy(io.Discard, io.LimitReader(r, maxDrainAfterForm+1))
	if err != nil || n > maxDrainAfterForm {
		ctx.SetConnectionClose()
		return false
	}
	return true
}

// clientGone reports whether c was cancelled because the client left.
func clientGone(c context.Context) bool { return errors.Is(context.Cause(c), errClientGone) }
