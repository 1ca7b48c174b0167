package http

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/valyala/fasthttp"

	"filigrane/actors"
	"filigrane/actors/jobstate"
	"filigrane/internal/clock"
	"filigrane/internal/ctxlint"
	"filigrane/internal/reqlog"
)

// baseLoggerAllowed names the functions of package http that may use Config.Logger itself, each with the
// reason. Everything else logs on behalf of a request through Server.log, whose lines name the request.
var baseLoggerAllowed = map[string]string{
	"newFastServer": "fasthttp's own messages, about connections rather than one request",
	"Serve":         "the accept loop's failures, before any request",
	"serve":         "builds each request's logger (reqlog.Begin)",
	"log":           "the fallback for a context of no request",
}

// TestHandlersLogWithTheRequestID parses the package's sources and fails on every use of cfg.Logger outside
// baseLoggerAllowed: a handler's line written through it would not carry the request's id.
func TestHandlersLogWithTheRequestID(t *testing.T) {
	found, checked, err := ctxlint.DirFieldUses(".", "cfg", "Logger", baseLoggerAllowed)
	if err != nil {
		t.Fatal(err)
	}
	if checked < 10 {
		t.Fatalf("only %d source files parsed; is the test running in the package directory?", checked)
	}
	for _, bad := range found {
		t.Errorf("%s: a request's lines go through Server.log (they name the request), not Config.Logger", bad)
	}
}

// logLines decodes the JSON lines of buf; each must carry request_id once (a duplicate key is invalid for
// many log pipelines).
func logLines(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	var lines []map[string]any
	for _, raw := range bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n")) {
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatalf("log line %q: %v", raw, err)
		}
		if n := bytes.Count(raw, []byte(`"request_id":`)); n != 1 {
			t.Errorf("log line %s names request_id %d times, want once", raw, n)
		}
		lines = append(lines, m)
	}
	return lines
}

// TestErrorLinesNameTheRequest: a dependency failure while serving a request writes an error line that names
// the request_id of the response's problem body and X-Request-ID header, as the access line does; before,
// only the access line named it and an operator could not tie the error to the client's request.
func TestErrorLinesNameTheRequest(t *testing.T) {
	var buf bytes.Buffer
	clk := clock.NewManual(time.Date(2026, 6, 1, 10, 0, 0, 0, time.UTC))
	s := New(Config{Keys: actors.Keys{Store: unreadableStore{}, Clock: clk}, Clock: clk,
		Logger: zerolog.New(&buf).Level(zerolog.DebugLevel)})
	var ctx fasthttp.RequestCtx
	ctx.Request.Header.SetMethod("GET")
	ctx.Request.SetRequestURI("/auth/api-key")
	ctx.Request.Header.Set(headerAPIKey, "fgk_0123456789abcdef_secret")
	s.Handler()(&ctx)
	var body Problem
	if err := json.Unmarshal(ctx.Response.Body(), &body); err != nil || ctx.Response.StatusCode() != 503 {
		t.Fatalf("status %d body %s (%v), want a 503 problem", ctx.Response.StatusCode(), ctx.Response.Body(), err)
	}
	id := string(ctx.Response.Header.Peek(headerRequestID))
	if body.RequestID == "" || body.RequestID != id {
		t.Fatalf("problem request_id %q, header %q", body.RequestID, id)
	}
	seen := map[string]bool{}
	for _, l := range logLines(t, &buf) {
		msg, _ := l["message"].(string)
		seen[msg] = true
		if l["request_id"] != id {
			t.Errorf("line %q names request_id %v, want %s", msg, l["request_id"], id)
		}
	}
	if !seen["dependency unavailable"] || !seen["request"] {
		t.Fatalf("lines %v, want the error line and the access line", seen)
	}
}

// TestLinesAfterTheJobsIDNameTheJob: once a response names the job's request id in place of the HTTP
// request's (setJobRequestID), the lines written after it name the job's id too, the one its problem body
// shows.
func TestLinesAfterTheJobsIDNameTheJob(t *testing.T) {
	var buf bytes.Buffer
	now := time.Date(2026, 6, 1, 10, 0, 0, 0, time.UTC)
	s := New(Config{Store: unreadableStore{}, Clock: clock.NewManual(now)})
	rec := &jobstate.Record{RequestID: "req_ab", OrgID: "org_1", Operation: jobstate.OperationEmbed,
		Status: jobstate.StatusSucceeded, ResultExpiresAt: now.Add(time.Hour),
		Output: &jobstate.Output{AssetID: "ast_1", BlobKey: "outputs/org_1/req_ab/x.png"}}
	var ctx fasthttp.RequestCtx
	ctx.Response.Header.Set(headerRequestID, "req_http")
	reqlog.Begin(&ctx, zerolog.New(&buf), "req_http")
	aerr := s.writeResult(context.Background(), &ctx, &principal{}, rec)
	if aerr == nil {
		t.Fatal("result with an uncheckable asset answered")
	}
	writeAPIError(&ctx, aerr)
	var body Problem
	if err := json.Unmarshal(ctx.Response.Body(), &body); err != nil || body.RequestID != "req_ab" {
		t.Fatalf("problem %s (%v), want request_id req_ab", ctx.Response.Body(), err)
	}
	lines := logLines(t, &buf)
	if len(lines) != 1 || lines[0]["request_id"] != "req_ab" {
		t.Fatalf("lines %v, want one naming request_id req_ab", lines)
	}
}
