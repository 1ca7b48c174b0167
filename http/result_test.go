package http

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/valyala/fasthttp"

	"filigrane/actors"
	"filigrane/actors/jobstate"
	"filigrane/internal/clock"
	"filigrane/persistence"
	"filigrane/persistence/fsblobs"
	"filigrane/persistence/pebblestore"
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

// failingGets is a real blob store whose reads fail, as they do while the store does not answer or while the
// node stops and cancels them.
type failingGets struct{ persistence.Blobs }

func (failingGets) Get(context.Context, string, int64, int64) (io.ReadCloser, error) {
	return nil, context.Canceled
}

// TestResultFileReadFailureIsRetryable: a succeeded job's result file that could not be read is answered 503
// (retry), not 410 result_gone; only a file that is really gone (and not delivered to the customer's bucket) is
// 410, and a file that is there is served. A chaos run saw the 410 from a node that the cluster had declared
// dead: it answered a request held while it was frozen, its reads cancelled as it stopped, and the client gave
// up on a result it had been charged for.
func TestResultFileReadFailureIsRetryable(t *testing.T) {
	now := time.Date(2026, 6, 1, 10, 0, 0, 0, time.UTC)
	store, err := pebblestore.Open(t.TempDir(), zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	blobs, err := fsblobs.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const orgID, assetID, key = "org_1", "ast_" + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", "outputs/org_1/req_ab/x.png"
	if err := (actors.Assets{Store: store}).Create(ctx, &actors.Asset{ID: assetID, OrgID: orgID, Kind: actors.AssetWatermarked,
		BlobKey: key, CreatedAt: now, UpdatedAt: now, FileExpiresAt: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	rec := &jobstate.Record{RequestID: "req_ab", OrgID: orgID, Operation: jobstate.OperationEmbed,
		Status: jobstate.StatusSucceeded, ResultExpiresAt: now.Add(time.Hour),
		Output: &jobstate.Output{AssetID: assetID, BlobKey: key, ContentType: "image/png", Size: 3, Filename: "x.png"}}
	p := &principal{Key: actors.APIKey{OrgID: orgID}}
	answer := func(b persistence.Blobs) (*apiError, *fasthttp.RequestCtx) {
		s := New(Config{Store: store, Blobs: b, Clock: clock.NewManual(now)})
		var rc fasthttp.RequestCtx
		return s.writeResult(ctx, &rc, p, rec), &rc
	}
	if aerr, _ := answer(failingGets{blobs}); aerr == nil || aerr.code != CodeUnavailable {
		t.Fatalf("result file not readable: %+v, want %s", aerr, CodeUnavailable)
	}
	if aerr, _ := answer(blobs); aerr == nil || aerr.code != CodeResultGone {
		t.Fatalf("result file gone: %+v, want %s", aerr, CodeResultGone)
	}
	if _, err := blobs.Put(ctx, key, strings.NewReader("png")); err != nil {
		t.Fatal(err)
	}
	aerr, rc := answer(blobs)
	if aerr != nil || rc.Response.StatusCode() != 200 || string(rc.Response.Header.Peek("X-Asset-ID")) != assetID {
		t.Fatalf("result file there: %+v, status %d", aerr, rc.Response.StatusCode())
	}
}
