package http

import (
	"github.com/valyala/fasthttp"

	"filigrane/internal/apispec"
)

// contractRoutes serves the OpenAPI document (internal/apispec) without an API key: it holds no secret and
// is the same for every caller, and clients fetch it to generate code or check a deployment's version
// before they have a key.
func (s *Server) contractRoutes() {
	s.router.handle("GET", "/openapi.yaml", func(ctx *fasthttp.RequestCtx, _ map[string]string) {
		ctx.Response.Header.Set("Cache-Control", "no-cache")
		ctx.SetStatusCode(200)
		ctx.SetContentType("application/yaml")
		ctx.SetBody(apispec.YAML())
	})
	s.router.handle("GET", "/openapi.json", func(ctx *fasthttp.RequestCtx, _ map[string]string) {
		body, err := apispec.JSON()
		if err != nil {
			writeProblem(ctx, CodeInternal, "the OpenAPI document could not be converted")
			return
		}
		ctx.Response.Header.Set("Cache-Control", "no-cache")
		ctx.SetStatusCode(200)
		ctx.SetContentType("application/json")
		ctx.SetBody(body)
	})
}

// Route is one method and path pattern a server answers.
type Route struct {
	Method  string
	Pattern string
}

// Routes lists the routes this server answers, in registration order; the contract test checks that the
// OpenAPI document describes each one.
func (s *Server) Routes() []Route {
	out := make([]Route, 0, len(s.router.routes))
	for _, r := range s.router.routes {
		out = append(out, Route{Method: r.method, Pattern: r.pattern})
	}
	return out
}
