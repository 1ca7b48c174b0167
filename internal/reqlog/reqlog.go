// Package reqlog owns the logger of one HTTP request: every line written while serving the request names
// its id under "request_id", the id that its X-Request-ID header, problem body and access line show. The
// edge begins it where it assigns the id and moves it when a response takes a job's id in place of the
// request's; handlers reach it through the request's context (the fasthttp RequestCtx, or a context made
// from one with WithRequest). It only writes fields: it decides no id and no level, and holds nothing
// beyond one request.
package reqlog

import (
	"context"
	"sync"

	"github.com/rs/zerolog"
	"github.com/valyala/fasthttp"
)

// Request is the log state of one request. Its logger adds the current id to each line when the line is
// written, so that a line written after SetID names the id the response ends up with, and a logger handed
// to a goroutine of the request follows too.
type Request struct {
	mu  sync.Mutex // SetID runs on the handler while its goroutines (disconnect watch, resends) may log
	id  string
	log zerolog.Logger
}

// key is the context key of a Request (a RequestCtx's user value: RequestCtx.Value reads those).
type key struct{}

// Begin makes a Request for ctx, logging through base with id, and attaches it to ctx. It costs two
// allocations per request (the Request and the logger's hook list); lines cost nothing more than zerolog's.
func Begin(ctx *fasthttp.RequestCtx, base zerolog.Logger, id string) *Request {
	r := &Request{id: id}
	r.log = base.Hook(r)
	ctx.SetUserValue(key{}, r)
	return r
}

// Run adds the request's id to a line (zerolog.Hook).
func (r *Request) Run(e *zerolog.Event, _ zerolog.Level, _ string) {
	r.mu.Lock()
	id := r.id
	r.mu.Unlock()
	e.Str("request_id", id)
}

// SetID names id on the lines written from now on.
func (r *Request) SetID(id string) {
	r.mu.Lock()
	r.id = id
	r.mu.Unlock()
}

// Logger is the request's logger.
func (r *Request) Logger() *zerolog.Logger { return &r.log }

// From returns the Request of c (a RequestCtx that Begin saw, or a context from WithRequest), or nil.
func From(c context.Context) *Request {
	if c == nil {
		return nil
	}
	r, _ := c.Value(key{}).(*Request)
	return r
}

// WithRequest returns a context of parent that carries r, for blocking calls made on behalf of r's request
// from a context that does not descend from its RequestCtx. A nil r returns parent.
func WithRequest(parent context.Context, r *Request) context.Context {
	if r == nil {
		return parent
	}
	return context.WithValue(parent, key{}, r)
}

// Logger returns the logger of c's request, or fallback when c belongs to no request (work of a server
// that no request started, or a handler called without the edge in a test).
func Logger(c context.Context, fallback *zerolog.Logger) *zerolog.Logger {
	if r := From(c); r != nil {
		return &r.log
	}
	return fallback
}
