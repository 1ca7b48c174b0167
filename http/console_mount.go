package http

import (
	"github.com/valyala/fasthttp"

	"filigrane/actors"
	"filigrane/http/console"
	"filigrane/internal/problem"
)

// consoleMemberKey is the request value that marks an API route run for a console session.
const consoleMemberKey = "filigrane.console.member"

// consoleKeyID is the key id a console call's principal carries (GET /auth/api-key shows it).
const consoleKeyID = "console"

// MountConsole serves the web console under /console on this server. cfg's API, Problem, Context, Thumbnail,
// CountRefusal and ClientIP are filled here: the console runs the API's own routes for its signed-in member,
// its refusals of session cookies are counted in filigrane_console_session_refused_total, and its
// per-address limits count the same client address as the API's (Config.TrustedProxies).
func (s *Server) MountConsole(cfg console.Config) error {
	cfg.API = s.serveAsMember
	cfg.Problem = func(ctx *fasthttp.RequestCtx, code problem.Code, detail string) { writeProblem(ctx, code, detail) }
	cfg.Context = s.requestContext
	cfg.Thumbnail = s.consoleThumbnail
	cfg.CountRefusal = func(reason string) { s.cfg.Metrics.consoleRefused.WithLabelValues(reason).Inc() }
	cfg.ClientIP = s.cfg.TrustedProxies.Of
	cfg.PublicURL = s.cfg.PublicURL
	c, err := console.New(cfg)
	if err != nil {
		return err
	}
	s.console = c
	return nil
}

// serveConsole answers a request under /console and returns its metrics label.
func (s *Server) serveConsole(ctx *fasthttp.RequestCtx) string {
	s.console.Serve(ctx)
	if label, ok := ctx.UserValue(consoleMemberKey + ".route").(string); ok {
		return "/console/api" + label
	}
	return console.Prefix
}

// serveAsMember runs the API route of path for a signed-in console member: the same handler, checks, limits
// and answers as for a key of that member with every scope (the member's role still limits what needs
// owner or admin). The console has checked the session and the CSRF token.
func (s *Server) serveAsMember(ctx *fasthttp.RequestCtx, m console.Member, path string) {
	method := string(ctx.Method())
	rt, params, allowed := s.router.match(method, path)
	switch {
	case rt != nil:
		ctx.SetUserValue(consoleMemberKey, m)
		ctx.SetUserValue(consoleMemberKey+".route", rt.pattern)
		rt.h(ctx, params)
	case len(allowed) > 0:
		writeProblem(ctx, CodeMethodNotAllowed, method+" is not allowed here")
	default:
		writeProblem(ctx, CodeNotFound, "no such route")
	}
}

// consoleKey is the principal's key of a console call: the member's, with every scope.
func consoleKey(ctx *fasthttp.RequestCtx) (actors.APIKey, bool) {
	m, ok := ctx.UserValue(consoleMemberKey).(console.Member)
	if !ok {
		return actors.APIKey{}, false
	}
	return actors.APIKey{ID: consoleKeyID, OrgID: m.OrgID, MemberID: m.MemberID, Name: "console session",
		Scopes: actors.AllScopes()}, true
}

// missingKeyDetail explains a request without a key; one that carries a console session cookie learns that
// API routes never take sessions (spec 5.1).
func missingKeyDetail(ctx *fasthttp.RequestCtx) string {
	if len(ctx.Request.Header.Cookie(console.SessionCookie)) > 0 {
		return "API routes take an API key in the X-API-Key header, never a console session; the console calls them under /console/api"
	}
	return "send your API key in the X-API-Key header"
}
