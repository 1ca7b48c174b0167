package http

import (
	"sort"
	"strings"

	"github.com/valyala/fasthttp"
)

// handler serves one route. params holds the values of the pattern's {name} segments.
type handler func(ctx *fasthttp.RequestCtx, params map[string]string)

type route struct {
	method   string
	pattern  string // e.g. /watermarks/jobs/{request_id}/result; also the metrics label
	segments []string
	literals int // segments that are not {parameters}: the more, the more specific the pattern
	h        handler
}

// router matches a method and a path against fixed patterns. Unknown paths give 404, known paths with another
// method 405 with an Allow header, both as problems. A GET route also answers HEAD (headers only).
type router struct {
	routes []route
}

func (r *router) handle(method, pattern string, h handler) {
	segs := splitPath(pattern)
	literals := 0
	for _, p := range segs {
		if !strings.HasPrefix(p, "{") {
			literals++
		}
	}
	r.routes = append(r.routes, route{method: method, pattern: pattern, segments: segs, literals: literals, h: h})
}

func splitPath(p string) []string {
	return strings.Split(strings.Trim(p, "/"), "/")
}

// match returns the route for method and path. When the path matches only under other methods it returns
// those methods. A pattern with more literal segments wins over one that takes the same path as a parameter
// (GET /assets/bulk-delete is 405, Allow: POST, not a read of an asset named "bulk-delete").
func (r *router) match(method, path string) (*route, map[string]string, []string) {
	segs := splitPath(path)
	type candidate struct {
		rt     *route
		params map[string]string
	}
	var matched []candidate
	best := -1 // the most literal segments among the patterns that match
	for i := range r.routes {
		if params, ok := matchSegments(r.routes[i].segments, segs); ok {
			matched = append(matched, candidate{&r.routes[i], params})
			best = max(best, r.routes[i].literals)
		}
	}
	var allowed []string
	for _, c := range matched {
		rt := c.rt
		if rt.literals < best {
			continue
		}
		if rt.method == method || (method == fasthttp.MethodHead && rt.method == fasthttp.MethodGet) {
			return rt, c.params, nil
		}
		allowed = append(allowed, rt.method)
		if rt.method == fasthttp.MethodGet {
			// Every GET route answers HEAD too (above), so Allow lists it (RFC 9110, 10.2.1).
			allowed = append(allowed, fasthttp.MethodHead)
		}
	}
	sort.Strings(allowed)
	return nil, nil, allowed
}

func matchSegments(pattern, segs []string) (map[string]string, bool) {
	if len(pattern) != len(segs) {
		return nil, false
	}
	var params map[string]string
	for i, p := range pattern {
		if strings.HasPrefix(p, "{") && strings.HasSuffix(p, "}") {
			if segs[i] == "" {
				return nil, false
			}
			if params == nil {
				params = map[string]string{}
			}
			params[p[1:len(p)-1]] = segs[i]
			continue
		}
		if p != segs[i] {
			return nil, false
		}
	}
	return params, true
}
