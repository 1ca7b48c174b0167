package http

import (
	"context"

	"github.com/valyala/fasthttp"
)

// BeginDrain starts the server's part of a graceful stop, before Shutdown closes its listener: /readyz answers
// 503 so that a load balancer takes the node out of rotation, requests that would start work (every method but
// GET, HEAD and OPTIONS) are refused with 503 service_unavailable, synchronous requests waiting for their job
// answer 202 with the receipt at once (the job stays queued, durable, for another node or the restart), and
// every answer closes its connection so that a client's next request goes through the load balancer again.
// Requests already past the gate finish as before. Safe to call more than once.
func (s *Server) BeginDrain() { s.life.beginDrain() }

// draining reports whether BeginDrain was called.
func (s *Server) draining() bool { return s.life.draining.Err() != nil }

// endsAtDrain returns a context that also ends when the server begins draining; stop releases it.
func (s *Server) endsAtDrain(c context.Context) (context.Context, context.CancelFunc) {
	c, cancel := context.WithCancel(c)
	stop := context.AfterFunc(s.life.draining, cancel)
	return c, func() { stop(); cancel() }
}

// startsWork reports whether a request of this method may start work (store a file, create a job, change
// state): those are refused while draining. Reads go on (job statuses, results, downloads, probes, metrics):
// they end quickly and a client polling its job should get its answer from any node.
func startsWork(method string) bool {
	switch method {
	case "GET", "HEAD", "OPTIONS":
		return false
	}
	return true
}

// drainingRetryAfter is the Retry-After of a refusal by a draining node: its next request goes through the
// load balancer to another node (the connection is closed), so it may come at once.
const drainingRetryAfter = "1"

// refuseDraining answers a request that would start work on a draining node.
func refuseDraining(ctx *fasthttp.RequestCtx) {
	ctx.Response.Header.Set("Retry-After", drainingRetryAfter)
	writeProblem(ctx, CodeUnavailable, "the node is shutting down and takes no new work; retry (another node answers)")
}
