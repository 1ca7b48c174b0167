package http

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"filigrane/actors/jobstate"
	"filigrane/internal/clock"
	"filigrane/persistence"
)

// unreadableStore fails every read, as a store does while its node stops (the read's context is cancelled)
// or while the storage is unreachable.
type unreadableStore struct{ persistence.Store }

func (unreadableStore) Get(context.Context, []byte) (persistence.Item, error) {
	return persistence.Item{}, errors.New("injected: the store did not answer")
}

// TestResultOfAnUncheckableAssetIsRetryable: a succeeded job's result is answered only after checking that its
// watermarked asset was not deleted. When that check cannot be made, the answer is 503 (retry), not 410
// result_gone: a 410 tells the client to give up on a result it was charged for. A chaos run saw the 410 from
// a node that the cluster had declared dead, while it stopped.
func TestResultOfAnUncheckableAssetIsRetryable(t *testing.T) {
	now := time.Date(2026, 6, 1, 10, 0, 0, 0, time.UTC)
	s := New(Config{Store: unreadableStore{}, Clock: clock.NewManual(now)})
	rec := &jobstate.Record{RequestID: "req_" + "ab", OrgID: "org_1", Operation: jobstate.OperationEmbed,
		Status: jobstate.StatusSucceeded, ResultExpiresAt: now.Add(time.Hour),
		Output: &jobstate.Output{AssetID: "ast_1", BlobKey: "outputs/org_1/req_ab/x.png"}}
	var ctx fasthttp.RequestCtx
	aerr := s.writeResult(context.Background(), &ctx, &principal{}, rec)
	if aerr == nil || aerr.code != CodeUnavailable {
		t.Fatalf("result with an uncheckable asset: %+v, want %s", aerr, CodeUnavailable)
	}
}
