package http

import (
	"errors"
	"filigrane/internal/problem"
	"strings"
	"time"

	"github.com/valyala/fasthttp"
)

// ReadyCheck is the outcome of one readiness check: Err is nil when it passed. Its message is shown to anyone
// who asks /readyz, so it must say what failed without internal detail (addresses, bucket names).
type ReadyCheck struct {
	Name string
	Err  error
	// Advisory checks are reported (Err's message under their name in checks) but leave the node ready: what
	// they find limits some requests, not the node (a low disk refuses new files; reads and the deletes that
	// free space go on, and a load balancer that took the node out would stop those too).
	Advisory bool
}

// errDraining is the failed check of a node that began its graceful stop.
var errDraining = errors.New("draining: the node is shutting down and takes no new work")

// readyTimeout bounds one /readyz: a load balancer probes every few seconds and must get an answer, so a
// storage server that hangs counts as down.
const readyTimeout = 2 * time.Second

// readyz answers whether this node can serve requests now: 200 with every check (advisory ones may say what
// they found), or 503 (problem+json, code service_unavailable) naming the checks that failed. Unlike /healthz (the process is alive), a failure here
// says "send traffic elsewhere", not "restart me". No API key: load balancers probe it.
func (s *Server) readyz(ctx *fasthttp.RequestCtx, _ map[string]string) {
	var checks []ReadyCheck
	if s.draining() {
		// The node is stopping: say so at once, without probing the storage, so that the balancer takes it
		// out of rotation before its listener closes (--drain-delay).
		checks = []ReadyCheck{{Name: "shutdown", Err: errDraining}}
	} else if s.cfg.Ready != nil {
		c, cancel := s.requestContext(ctx, readyTimeout)
		checks = s.cfg.Ready(c)
		cancel()
	}
	results := make(map[string]string, len(checks))
	var failed []string
	for _, ch := range checks {
		if ch.Err == nil {
			results[ch.Name] = "ok"
			continue
		}
		results[ch.Name] = ch.Err.Error()
		if !ch.Advisory {
			failed = append(failed, ch.Name+": "+ch.Err.Error())
		}
	}
	ctx.Response.Header.Set("Cache-Control", "no-store")
	if len(failed) == 0 {
		writeJSON(ctx, 200, map[string]any{"status": "ready", "checks": results})
		return
	}
	entry, _ := problem.Lookup(CodeUnavailable)
	body, _ := encodeJSON(struct {
		Problem
		Checks map[string]string `json:"checks"`
	}{
		Problem: Problem{Type: problemTypeBase + string(CodeUnavailable), Title: entry.Title, Status: entry.Status,
			Detail: "not ready: " + strings.Join(failed, "; "), Code: CodeUnavailable,
			RequestID: string(ctx.Response.Header.Peek(headerRequestID))},
		Checks: results,
	})
	ctx.Response.Header.Set("Retry-After", "5")
	ctx.SetStatusCode(entry.Status)
	ctx.SetContentType("application/problem+json")
	ctx.SetBody(body)
}
