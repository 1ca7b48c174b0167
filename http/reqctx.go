package http

import (
	"context"
	"time"

	"github.com/rs/zerolog"
	"github.com/valyala/fasthttp"

	"filigrane/internal/reqlog"
)

// lifetime is the part of a Server that every request's context descends from. It ends when Shutdown has
// finished waiting: requests still running after the shutdown grace stop their blocking calls at once instead
// of holding the process up, while requests that finish within the grace are not disturbed.
//
// fasthttp's RequestCtx is a context.Context too, but its Done closes when shutdown begins (and only then), so
// it would cut every in-flight request as soon as the node starts draining; it carries no deadline either.
type lifetime struct {
	ctx context.Context
	end context.CancelFunc
	// draining ends when the node begins its graceful stop (BeginDrain), before Shutdown: synchronous waits
	// answer their 202 at once and new work is refused, while requests in flight go on under ctx.
	draining   context.Context
	beginDrain context.CancelFunc
}

func newLifetime() lifetime {
	// The root of every request context of this server; nothing above a server outlives it.
	ctx, end := context.WithCancel(context.Background())
	draining, beginDrain := context.WithCancel(context.Background())
	return lifetime{ctx: ctx, end: end, draining: draining, beginDrain: beginDrain}
}

// requestContext is the context of a handler's blocking calls: it ends after timeout, or when the server's
// shutdown grace ends. Handlers that have read the whole request body also watch the connection
// (watchDisconnect) to stop when the client leaves. Every handler builds its context here, never from
// context.Background (TestNoBackgroundContextInHandlers enforces it). The context carries ctx's logger
// (reqlog), so that the lines of a handler's helpers name the request too; ctx nil: work of the server that
// no request started.
func (s *Server) requestContext(ctx *fasthttp.RequestCtx, timeout time.Duration) (context.Context, context.CancelFunc) {
	parent := s.life.ctx
	if ctx != nil {
		parent = reqlog.WithRequest(parent, reqlog.From(ctx))
	}
	return context.WithTimeout(parent, timeout)
}

// log is the logger of the request that c belongs to (its RequestCtx, or a context from requestContext): its
// lines carry the request's id. Handlers log through it, never through Config.Logger
// (TestHandlersLogWithTheRequestID enforces it); c of no request falls back to Config.Logger.
func (s *Server) log(c context.Context) *zerolog.Logger { return reqlog.Logger(c, &s.cfg.Logger) }
