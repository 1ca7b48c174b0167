package http

import (
	"context"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"filigrane/actors"
	"filigrane/actors/batchstate"
)

// jobReplies answers every job command with code.
type jobReplies string

func (code jobReplies) Request(context.Context, string, string, any) (any, error) {
	return &actors.JobReply{Code: string(code), Detail: "job state unavailable"}, nil
}

// TestJobStateUnavailableIsNot404: a job status or result read whose job actor could not load the job (the
// object storage frozen) answers 503 with Retry-After, not 404 "no such job", which tells the client its job
// is gone; a job that is not there is still 404.
func TestJobStateUnavailableIsNot404(t *testing.T) {
	p := &principal{Key: actors.APIKey{OrgID: "org_0123456789abcdef", Scopes: []string{actors.ScopeEmbed}}}
	id := "req_" + strings.Repeat("ab", 32)
	for _, tc := range []struct {
		code   string
		status int
	}{{actors.ReplyInternal, 503}, {actors.ReplyNotFound, 404}} {
		s := New(Config{Caller: jobReplies(tc.code)})
		for name, h := range map[string]func(*fasthttp.RequestCtx, *principal, map[string]string){
			"status": s.jobStatus, "result": s.jobResult} {
			var ctx fasthttp.RequestCtx
			h(&ctx, p, map[string]string{"request_id": id})
			if got := ctx.Response.StatusCode(); got != tc.status {
				t.Errorf("%s answered %s: status %d, want %d (%s)", name, tc.code, got, tc.status, ctx.Response.Body())
			}
		}
	}
}

// batchReplies answers every batch command with code, as the batch actor does when it cannot read or save
// the batch's state (internal: the object storage down or frozen) or finds it missing (not_found).
type batchReplies string

func (code batchReplies) Request(context.Context, string, string, any) (any, error) {
	return &actors.BatchReply{Code: string(code), Detail: "batch state unavailable"}, nil
}

// TestBatchStateUnavailableIsNot404: a batch command whose actor could not read or save the batch (the object
// storage frozen, bench chaos) answers 503 with Retry-After on the read, the start and the cancel; only a
// batch that is not there is 404. Before, every such answer was 404 "no such batch", and a client gave up a
// batch whose start had landed and whose items then ran and were charged.
func TestBatchStateUnavailableIsNot404(t *testing.T) {
	id := batchstate.BatchIDFor("org_"+"0123456789abcdef", "k")
	p := &principal{Key: actors.APIKey{OrgID: "org_0123456789abcdef"}}
	for _, tc := range []struct {
		code   string
		status int
	}{{actors.ReplyInternal, 503}, {actors.ReplyRetry, 503}, {actors.ReplyNotFound, 404}} {
		b := &batchAPI{s: New(Config{Caller: batchReplies(tc.code)})}
		for name, h := range map[string]func(*fasthttp.RequestCtx, *principal, map[string]string){
			"get": b.get, "start": b.start, "cancel": b.cancel} {
			var ctx fasthttp.RequestCtx
			h(&ctx, p, map[string]string{"batch_id": id})
			if got := ctx.Response.StatusCode(); got != tc.status {
				t.Errorf("%s answered %s: status %d, want %d (%s)", name, tc.code, got, tc.status, ctx.Response.Body())
			}
			if tc.status == 503 && len(ctx.Response.Header.Peek("Retry-After")) == 0 {
				t.Errorf("%s answered %s: 503 without Retry-After", name, tc.code)
			}
		}
	}
}
