package http

import (
	"context"
	"testing"

	"github.com/valyala/fasthttp"

	"filigrane/actors"
	"filigrane/actors/batchstate"
)

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
