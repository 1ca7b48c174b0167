package http

import (
	"encoding/json"
	"testing"

	"github.com/valyala/fasthttp"

	"filigrane/actors/jobstate"
	"filigrane/internal/problem"
)

// TestWriteProblemAnswersTheTable: every code of the error table answers its status with a problem+json body
// naming it; a code outside the table answers 500 internal_error rather than a made-up status.
func TestWriteProblemAnswersTheTable(t *testing.T) {
	for _, e := range problem.All() {
		var ctx fasthttp.RequestCtx
		writeProblem(&ctx, e.Code, "why")
		var got Problem
		if err := json.Unmarshal(ctx.Response.Body(), &got); err != nil {
			t.Fatalf("%s: body %q: %v", e.Code, ctx.Response.Body(), err)
		}
		if ctx.Response.StatusCode() != e.Status || got.Status != e.Status || got.Code != e.Code ||
			got.Title != e.Title || got.Type != "/problems/"+string(e.Code) || got.Detail != "why" {
			t.Errorf("%s: status %d, body %+v; want %d %q", e.Code, ctx.Response.StatusCode(), got, e.Status, e.Title)
		}
		if ct := string(ctx.Response.Header.ContentType()); ct != "application/problem+json" {
			t.Errorf("%s: Content-Type %q", e.Code, ct)
		}
	}
	var ctx fasthttp.RequestCtx
	writeProblem(&ctx, "no_such_code", "why")
	if ctx.Response.StatusCode() != 500 {
		t.Errorf("unknown code: status %d, want 500", ctx.Response.StatusCode())
	}
}

// TestFailedJobAnswersItsCodesStatus: a failed job's result answers the status the table gives its error
// code, with "status": "failed" and the job's error_code; a code the table does not know answers 500
// processing_error and still shows the job's own error_code.
func TestFailedJobAnswersItsCodesStatus(t *testing.T) {
	type answer struct {
		status int
		code   Code
	}
	cases := map[string]answer{"a_code_no_table_lists": {500, CodeProcessingError}}
	for _, e := range problem.All() {
		if e.Job {
			cases[string(e.Code)] = answer{e.Status, e.Code}
		}
	}
	if got := cases[string(problem.ImageTooLarge)].status; got != 413 {
		t.Fatalf("image_too_large: table status %d, want 413", got)
	}
	for errorCode, want := range cases {
		var ctx fasthttp.RequestCtx
		writeFailedJob(&ctx, &jobstate.Record{RequestID: "req_1", ErrorCode: errorCode, ErrorDetail: "it broke"})
		var body map[string]any
		if err := json.Unmarshal(ctx.Response.Body(), &body); err != nil {
			t.Fatalf("%s: body %q: %v", errorCode, ctx.Response.Body(), err)
		}
		if ctx.Response.StatusCode() != want.status || body["status"] != "failed" || body["code"] != string(want.code) ||
			body["error_code"] != errorCode || body["request_id"] != "req_1" || body["detail"] != "it broke" {
			t.Errorf("%s: status %d, body %v; want %d with code %s", errorCode, ctx.Response.StatusCode(), body, want.status, want.code)
		}
	}
}
