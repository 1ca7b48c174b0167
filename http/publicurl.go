package http

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/valyala/fasthttp"
)

// ParsePublicURL checks the base URL clients reach the API at behind a proxy (Config.PublicURL) and returns
// it without a trailing slash: http or https, a host, an optional path prefix, no user, query or fragment
// (Etchv's SDKs refuse base URLs with those too).
func ParsePublicURL(raw string) (string, error) {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return "", fmt.Errorf("public URL %q: %w", raw, err)
	case u.Scheme != "http" && u.Scheme != "https":
		return "", fmt.Errorf("public URL %q: want an http:// or https:// URL", raw)
	case u.Host == "" || u.Opaque != "":
		return "", fmt.Errorf("public URL %q: no host", raw)
	case u.User != nil || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.Contains(raw, "#"):
		return "", fmt.Errorf("public URL %q: a base URL has no user, query or fragment", raw)
	}
	return strings.TrimRight(u.Scheme+"://"+u.Host+u.EscapedPath(), "/"), nil
}

// setLocation sets the Location header of a created or running resource at path: absolute under
// Config.PublicURL when one is set (a relative Location resolves against the request's URL and would lose a
// proxy's path prefix), else the path. Bodies keep the spec's relative URLs, which clients append to their
// base URL.
func (s *Server) setLocation(ctx *fasthttp.RequestCtx, path string) {
	ctx.Response.Header.Set("Location", s.cfg.PublicURL+path)
}
