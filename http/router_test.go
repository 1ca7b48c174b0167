package http

import (
	"slices"
	"testing"

	"github.com/valyala/fasthttp"
)

// A path that a literal pattern names belongs to that pattern's methods, even where a pattern with a parameter
// at the same place would take it too: GET /assets/bulk-delete is 405 (Allow: POST) rather than a read of an
// asset called "bulk-delete" answering 404 asset_not_found. Other paths still reach the parameter's routes.
func TestLiteralSegmentsWinOverParameters(t *testing.T) {
	var r router
	noop := func(*fasthttp.RequestCtx, map[string]string) {}
	r.handle("GET", "/assets/{asset_id}", noop)
	r.handle("DELETE", "/assets/{asset_id}", noop)
	r.handle("POST", "/assets/bulk-delete", noop)
	cases := []struct {
		method, path, pattern string
		allowed               []string
	}{
		{"GET", "/assets/bulk-delete", "", []string{"POST"}},
		{"DELETE", "/assets/bulk-delete", "", []string{"POST"}},
		{"POST", "/assets/bulk-delete", "/assets/bulk-delete", nil},
		{"GET", "/assets/ast_1", "/assets/{asset_id}", nil},
		{"HEAD", "/assets/ast_1", "/assets/{asset_id}", nil},
		{"POST", "/assets/ast_1", "", []string{"DELETE", "GET", "HEAD"}},
	}
	for _, c := range cases {
		rt, params, allowed := r.match(c.method, c.path)
		got := ""
		if rt != nil {
			got = rt.pattern
		}
		if got != c.pattern || !slices.Equal(allowed, c.allowed) {
			t.Errorf("%s %s: route %q allowed %v; want %q %v", c.method, c.path, got, allowed, c.pattern, c.allowed)
		}
		if got == "/assets/{asset_id}" && params["asset_id"] != "ast_1" {
			t.Errorf("%s %s: params %v", c.method, c.path, params)
		}
	}
}
