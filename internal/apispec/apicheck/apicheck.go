// Package apicheck validates HTTP responses against the API's OpenAPI document (internal/apispec): the
// status must be documented for the route, the documented required headers present and well-formed, the
// Content-Type one the document lists, a JSON body valid against its JSON Schema (2020-12, OpenAPI 3.1's
// dialect), and a problem body's code one the route may answer, with the status the error table gives it.
//
// It is for tests: Transport wraps an HTTP client's transport so that every response a test sees is checked,
// which keeps the document from drifting away from the handlers. It must not be linked into the server.
package apicheck

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"filigrane/internal/apispec"
	"filigrane/internal/problem"
)

const docURL = "mem:///openapi.json"

// Operation is one method and path template of the document.
type Operation struct {
	Method string // upper case
	Path   string // template, e.g. /assets/{asset_id}
	ID     string // operationId
	segs   []string
	ptr    string // JSON pointer of the operation object
	node   map[string]any
}

// Checker validates responses. It is safe for concurrent use.
type Checker struct {
	doc      map[string]any
	ops      []Operation
	anyRoute []string
	authed   []string

	mu       sync.Mutex
	compiler *jsonschema.Compiler
	schemas  map[string]*jsonschema.Schema // by JSON pointer
}

// New loads the embedded document.
func New() (*Checker, error) {
	j, err := apispec.JSON()
	if err != nil {
		return nil, err
	}
	return NewFromJSON(j)
}

// NewFromJSON loads a document given as JSON.
func NewFromJSON(j []byte) (*Checker, error) {
	raw, err := jsonschema.UnmarshalJSON(bytes.NewReader(j))
	if err != nil {
		return nil, fmt.Errorf("read the OpenAPI document: %w", err)
	}
	doc, ok := raw.(map[string]any)
	if !ok {
		return nil, errors.New("the OpenAPI document is not an object")
	}
	comp := jsonschema.NewCompiler()
	comp.DefaultDraft(jsonschema.Draft2020)
	comp.AssertFormat()
	if err := comp.AddResource(docURL, doc); err != nil {
		return nil, fmt.Errorf("load the OpenAPI document: %w", err)
	}
	c := &Checker{doc: doc, compiler: comp, schemas: map[string]*jsonschema.Schema{}}
	c.anyRoute = strings_(doc["x-problem-codes-any-route"])
	c.authed = strings_(doc["x-problem-codes-authenticated"])
	paths, _ := doc["paths"].(map[string]any)
	for path, item := range paths {
		m, _ := item.(map[string]any)
		for method, op := range m {
			opm, ok := op.(map[string]any)
			if !ok || !isMethod(method) {
				continue
			}
			id, _ := opm["operationId"].(string)
			c.ops = append(c.ops, Operation{Method: strings.ToUpper(method), Path: path, ID: id,
				segs: split(path), ptr: "/paths/" + escape(path) + "/" + method, node: opm})
		}
	}
	sort.Slice(c.ops, func(i, j int) bool {
		if c.ops[i].Path != c.ops[j].Path {
			return c.ops[i].Path < c.ops[j].Path
		}
		return c.ops[i].Method < c.ops[j].Method
	})
	return c, nil
}

func isMethod(m string) bool {
	switch m {
	case "get", "put", "post", "delete", "options", "head", "patch", "trace":
		return true
	}
	return false
}

func strings_(v any) []string {
	arr, _ := v.([]any)
	out := make([]string, 0, len(arr))
	for _, x := range arr {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

func split(p string) []string { return strings.Split(strings.Trim(p, "/"), "/") }

// escape escapes a JSON pointer token.
func escape(s string) string { return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1") }

// Operations lists the document's operations, sorted by path and method.
func (c *Checker) Operations() []Operation { return slices.Clone(c.ops) }

// Doc returns the decoded document (callers must not change it).
func (c *Checker) Doc() map[string]any { return c.doc }

// Find returns the operation for method and a concrete path; HEAD finds GET.
func (c *Checker) Find(method, path string) *Operation {
	if method == http.MethodHead {
		method = http.MethodGet
	}
	segs := split(path)
	for i := range c.ops {
		op := &c.ops[i]
		if op.Method == method && match(op.segs, segs) {
			return op
		}
	}
	return nil
}

func match(tmpl, segs []string) bool {
	if len(tmpl) != len(segs) {
		return false
	}
	for i, t := range tmpl {
		if strings.HasPrefix(t, "{") && strings.HasSuffix(t, "}") {
			if segs[i] == "" {
				return false
			}
			continue
		}
		if t != segs[i] {
			return false
		}
	}
	return true
}

// ProblemCodes returns the codes op may answer: those of every route, of every authenticated route when op
// needs a key, and its own x-problem-codes.
func (c *Checker) ProblemCodes(op *Operation) []string {
	codes := slices.Clone(c.anyRoute)
	if c.authenticated(op) {
		codes = append(codes, c.authed...)
	}
	return append(codes, strings_(op.node["x-problem-codes"])...)
}

// OwnProblemCodes returns op's x-problem-codes.
func (c *Checker) OwnProblemCodes(op *Operation) []string {
	return strings_(op.node["x-problem-codes"])
}

func (c *Checker) authenticated(op *Operation) bool {
	sec, ok := op.node["security"]
	if !ok {
		sec = c.doc["security"]
	}
	arr, _ := sec.([]any)
	return len(arr) > 0
}

// resolve follows a $ref (local only) from the object at ptr, returning the object and its pointer.
func (c *Checker) resolve(v any, ptr string) (map[string]any, string, error) {
	for range 8 {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, ptr, fmt.Errorf("%s is not an object", ptr)
		}
		ref, ok := m["$ref"].(string)
		if !ok {
			return m, ptr, nil
		}
		if !strings.HasPrefix(ref, "#/") {
			return nil, ptr, fmt.Errorf("%s: only local references are supported, got %q", ptr, ref)
		}
		ptr = ref[1:]
		v = c.at(ptr)
		if v == nil {
			return nil, ptr, fmt.Errorf("reference %q resolves to nothing", ref)
		}
	}
	return nil, ptr, fmt.Errorf("%s: too many nested references", ptr)
}

// at returns the value at a JSON pointer, or nil.
func (c *Checker) at(ptr string) any {
	var v any = c.doc
	for _, tok := range strings.Split(strings.TrimPrefix(ptr, "/"), "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[tok]
	}
	return v
}

// schema compiles (once) the schema at a JSON pointer.
func (c *Checker) schema(ptr string) (*jsonschema.Schema, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s, ok := c.schemas[ptr]; ok {
		return s, nil
	}
	s, err := c.compiler.Compile(docURL + "#" + ptr)
	if err != nil {
		return nil, fmt.Errorf("compile the schema at %s: %w", ptr, err)
	}
	c.schemas[ptr] = s
	return s, nil
}

// Response checks one response. body is the whole body, or nil when the caller did not read it (then only
// the status, headers and content type are checked).
func (c *Checker) Response(method, path string, status int, h http.Header, body []byte) error {
	op := c.Find(method, path)
	if op == nil {
		// An undocumented route must answer 404 or 405 with a problem.
		if status != http.StatusNotFound && status != http.StatusMethodNotAllowed {
			return fmt.Errorf("%s %s is not in the OpenAPI document, yet answered %d", method, path, status)
		}
		return c.checkProblem(nil, status, h, body)
	}
	where := fmt.Sprintf("%s %s (%s)", op.Method, op.Path, op.ID)
	if err := c.checkResponse(op, status, h, body); err != nil {
		return fmt.Errorf("%s answered %d: %w", where, status, err)
	}
	return nil
}

func (c *Checker) checkResponse(op *Operation, status int, h http.Header, body []byte) error {
	responses, _ := op.node["responses"].(map[string]any)
	key := strconv.Itoa(status)
	resp, ok := responses[key]
	if !ok {
		key = "default"
		if resp, ok = responses[key]; !ok {
			return errors.New("the status is not documented for this operation")
		}
	}
	r, ptr, err := c.resolve(resp, op.ptr+"/responses/"+key)
	if err != nil {
		return err
	}
	if err := c.checkHeaders(r, ptr, h); err != nil {
		return err
	}
	content, _ := r["content"].(map[string]any)
	ct := h.Get("Content-Type")
	if len(content) == 0 {
		if len(body) > 0 {
			return fmt.Errorf("documented without a body, but the body has %d bytes (%s)", len(body), ct)
		}
		return nil
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return fmt.Errorf("Content-Type %q: %w", ct, err)
	}
	name, ok := mediaMatch(content, mt)
	if !ok {
		return fmt.Errorf("Content-Type %s is not documented (documented: %s)", mt, strings.Join(keys(content), ", "))
	}
	if mt == "application/problem+json" {
		return c.checkProblem(op, status, h, body)
	}
	if !isJSON(mt) || body == nil {
		return nil
	}
	return c.validateBody(ptr+"/content/"+escape(name)+"/schema", content[name], body)
}

func keys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func isJSON(mt string) bool { return mt == "application/json" || strings.HasSuffix(mt, "+json") }

// mediaMatch finds the content entry for media type mt: exact, then type/*, then */*.
func mediaMatch(content map[string]any, mt string) (string, bool) {
	if _, ok := content[mt]; ok {
		return mt, true
	}
	if i := strings.IndexByte(mt, '/'); i > 0 {
		if _, ok := content[mt[:i]+"/*"]; ok {
			return mt[:i] + "/*", true
		}
	}
	if _, ok := content["*/*"]; ok {
		return "*/*", true
	}
	return "", false
}

func (c *Checker) validateBody(schemaPtr string, media any, body []byte) error {
	mm, _ := media.(map[string]any)
	if _, ok := mm["schema"]; !ok {
		return nil
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("the body is not JSON: %w", err)
	}
	s, err := c.schema(schemaPtr)
	if err != nil {
		return err
	}
	if err := s.Validate(inst); err != nil {
		return fmt.Errorf("the body does not match %s: %v\nbody: %s", schemaPtr, err, truncate(body, 2000))
	}
	return nil
}

func truncate(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "..."
	}
	return string(b)
}

func (c *Checker) checkHeaders(r map[string]any, ptr string, h http.Header) error {
	hs, _ := r["headers"].(map[string]any)
	for name, hv := range hs {
		hd, hptr, err := c.resolve(hv, ptr+"/headers/"+escape(name))
		if err != nil {
			return err
		}
		vals := h.Values(name)
		if len(vals) == 0 {
			if req, _ := hd["required"].(bool); req {
				return fmt.Errorf("the required header %s is missing", name)
			}
			continue
		}
		if _, ok := hd["schema"]; !ok {
			continue
		}
		s, err := c.schema(hptr + "/schema")
		if err != nil {
			return err
		}
		for _, v := range vals {
			if err := s.Validate(v); err != nil {
				return fmt.Errorf("header %s: %q: %v", name, v, err)
			}
		}
	}
	return nil
}

// checkProblem validates a problem body: its schema, a code op may answer (any code of every route when op
// is nil), and the status the error table gives the code.
func (c *Checker) checkProblem(op *Operation, status int, h http.Header, body []byte) error {
	if ct, _, _ := mime.ParseMediaType(h.Get("Content-Type")); ct != "application/problem+json" {
		return fmt.Errorf("an error answer must be application/problem+json, got %q", h.Get("Content-Type"))
	}
	if h.Get("X-Request-ID") == "" {
		return errors.New("the required header X-Request-ID is missing")
	}
	if body == nil {
		return nil
	}
	if err := c.validateBody("/components/schemas/Problem", map[string]any{"schema": true}, body); err != nil {
		return err
	}
	p, _ := mustObject(body)
	code, _ := p["code"].(string)
	allowed := c.anyRoute
	if op != nil {
		allowed = c.ProblemCodes(op)
	}
	if !slices.Contains(allowed, code) {
		return fmt.Errorf("problem code %q is not listed for this operation (x-problem-codes)", code)
	}
	e, ok := problem.Lookup(problem.Code(code))
	if !ok {
		return fmt.Errorf("problem code %q is not in the error table", code)
	}
	if e.Status != status {
		return fmt.Errorf("problem code %q has status %d in the error table", code, e.Status)
	}
	return nil
}

func mustObject(body []byte) (map[string]any, error) {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	m, _ := v.(map[string]any)
	return m, nil
}

// maxChecked bounds how much of a JSON body Transport reads to check it; every JSON answer of the API is
// far smaller.
const maxChecked = 16 << 20

// Transport checks every response that passes through Base (http.DefaultTransport when nil) against the
// document and turns a mismatch into the request's error, so that the test that sent it fails with the
// reason. JSON bodies are read whole (and handed on); other bodies are left streaming, their status,
// headers and content type checked.
type Transport struct {
	Base    http.RoundTripper
	Checker *Checker
}

// RoundTrip implements http.RoundTripper.
func (t Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	res, err := base.RoundTrip(req)
	if err != nil {
		return res, err
	}
	var body []byte
	mt, _, _ := mime.ParseMediaType(res.Header.Get("Content-Type"))
	if isJSON(mt) && req.Method != http.MethodHead {
		body, err = io.ReadAll(io.LimitReader(res.Body, maxChecked))
		_ = res.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("read the response to check it: %w", err)
		}
		res.Body = io.NopCloser(bytes.NewReader(body))
	}
	if err := t.Checker.Response(req.Method, req.URL.Path, res.StatusCode, res.Header, body); err != nil {
		_ = res.Body.Close()
		return nil, fmt.Errorf("openapi: %w", err)
	}
	return res, nil
}
