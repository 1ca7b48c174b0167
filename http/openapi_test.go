package http

import (
	"net/http"
	"slices"
	"sort"
	"strconv"
	"testing"

	"github.com/valyala/fasthttp"

	"filigrane/actors"
	"filigrane/actors/jobstate"
	"filigrane/actors/mediakind"
	"filigrane/actors/storagedest"
	"filigrane/internal/apispec"
	"filigrane/internal/apispec/apicheck"
	"filigrane/internal/clock"
	"filigrane/internal/problem"
)

// allRoutes is every route of both listeners, with every media kind's routes registered.
func allRoutes(t *testing.T) []Route {
	t.Helper()
	files := map[jobstate.Media]mediakind.Adapter{jobstate.MediaDocument: nil, jobstate.MediaVideo: nil}
	api := New(Config{Media: actors.Media{Files: files}, Clock: clock.System{}, Storage: &storagedest.Library{}}) // any non-nil library registers the storage routes
	up, err := NewUploadHost(Config{Clock: clock.System{}}, UploadHostOptions{Secret: []byte("0123456789abcdef0123"), PublicURL: "http://u", API: api})
	if err != nil {
		t.Fatal(err)
	}
	return append(api.Routes(), up.Routes()...)
}

// TestEveryRouteIsInOpenAPI walks both routers: each route must be an operation of the document, and each
// operation a route (the document describes what exists, nothing more).
func TestEveryRouteIsInOpenAPI(t *testing.T) {
	chk, err := apicheck.New()
	if err != nil {
		t.Fatal(err)
	}
	routes := allRoutes(t)
	seen := map[string]bool{}
	for _, r := range routes {
		seen[r.Method+" "+r.Pattern] = true
	}
	documented := map[string]bool{}
	for _, op := range chk.Operations() {
		documented[op.Method+" "+op.Path] = true
		if !seen[op.Method+" "+op.Path] {
			t.Errorf("the OpenAPI document describes %s %s, which no router serves", op.Method, op.Path)
		}
	}
	var missing []string
	for k := range seen {
		if !documented[k] {
			missing = append(missing, k)
		}
	}
	sort.Strings(missing)
	for _, k := range missing {
		t.Errorf("route %s is missing from internal/apispec/openapi.yaml", k)
	}
	if len(routes) < 30 {
		t.Fatalf("only %d routes found; the walk is broken", len(routes))
	}
}

// TestOpenAPIProblemCodes: the document's ProblemCode enum is the error table, every code an operation lists
// exists and has its status among the operation's responses, and every operation documents X-Request-ID.
func TestOpenAPIProblemCodes(t *testing.T) {
	chk, err := apicheck.New()
	if err != nil {
		t.Fatal(err)
	}
	doc := chk.Doc()
	enum := doc["components"].(map[string]any)["schemas"].(map[string]any)["ProblemCode"].(map[string]any)["enum"].([]any)
	var inDoc, inTable []string
	for _, c := range enum {
		inDoc = append(inDoc, c.(string))
	}
	for _, e := range problem.All() {
		inTable = append(inTable, string(e.Code))
	}
	if !slices.Equal(inDoc, inTable) {
		t.Errorf("ProblemCode enum differs from internal/problem's table (same order):\n doc   %v\n table %v", inDoc, inTable)
	}
	for _, op := range chk.Operations() {
		responses := doc["paths"].(map[string]any)[op.Path].(map[string]any)[lower(op.Method)].(map[string]any)["responses"].(map[string]any)
		if _, ok := responses["default"]; !ok {
			t.Errorf("%s %s: no default (problem) response", op.Method, op.Path)
		}
		for _, code := range chk.OwnProblemCodes(&op) {
			e, ok := problem.Lookup(problem.Code(code))
			if !ok {
				t.Errorf("%s %s lists unknown problem code %q", op.Method, op.Path, code)
				continue
			}
			if _, ok := responses[strconv.Itoa(e.Status)]; !ok {
				t.Errorf("%s %s lists %s but not its status %d among its responses", op.Method, op.Path, code, e.Status)
			}
		}
	}
}

func lower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 32
		}
	}
	return string(b)
}

// TestServesOpenAPI: both forms are served without a key, are the embedded document, and validate against
// the document itself.
func TestServesOpenAPI(t *testing.T) {
	chk, err := apicheck.New()
	if err != nil {
		t.Fatal(err)
	}
	s := New(Config{Clock: clock.System{}})
	want, _ := apispec.JSON()
	for path, body := range map[string][]byte{"/openapi.json": want, "/openapi.yaml": apispec.YAML()} {
		var ctx fasthttp.RequestCtx
		ctx.Request.SetRequestURI(path)
		ctx.Request.Header.SetMethod("GET")
		s.Handler()(&ctx)
		res := &ctx.Response
		h := http.Header{}
		res.Header.VisitAll(func(k, v []byte) { h.Add(string(k), string(v)) })
		h.Set("Content-Type", string(res.Header.ContentType()))
		if res.StatusCode() != 200 || string(res.Body()) != string(body) {
			t.Fatalf("%s: %d, %d bytes", path, res.StatusCode(), len(res.Body()))
		}
		if err := chk.Response("GET", path, res.StatusCode(), h, res.Body()); err != nil {
			t.Fatal(err)
		}
	}
}
