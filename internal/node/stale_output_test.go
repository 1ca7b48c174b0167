package node_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"filigrane/actors/jobstate"
	"filigrane/internal/node"
	"filigrane/persistence"
)

// TestStaleAttemptsResultIsPurged: a worker stalls after its claim while the job runs past its deadline and
// ends failed; the worker then goes on, stores the watermarked file (its lease, an hour here, was not renewed
// yet) and reports a success the ended job refuses. No record names that file. 24 hours after the job
// failed, the sweeper deletes it with the job's input; before, only the input went and the watermarked file
// stayed in the blob store for ever.
func TestStaleAttemptsResultIsPurged(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *node.Config) { c.LeaseDuration = time.Hour })
	release := make(chan struct{})
	var mu sync.Mutex
	claims := 0
	f.n.Pool().OnClaim = func(ctx context.Context, id string) bool {
		mu.Lock()
		claims++
		first := claims == 1
		mu.Unlock()
		if !first {
			return false
		}
		select {
		case <-release:
			return true
		case <-ctx.Done():
			return false
		}
	}
	r := post(t, f.base+"/watermarks/images/async", f.keyA, "", photo(t, 256, 256, 7), `{"stale":"worker"}`)
	if r.status != 202 {
		t.Fatalf("async: %d %s", r.status, r.body)
	}
	rc := decodeReceipt(t, r)
	waitStatus(t, f, rc.StatusURL, "running")
	f.clk.Advance(jobstate.BaseDeadline + time.Minute)
	if _, _, err := f.n.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, f, rc.StatusURL, "failed")
	close(release) // the stalled worker stores its result and reports it, refused
	<-f.n.Pool().Idle()

	ctx := context.Background()
	output := "outputs/" + f.orgA + "/" + rc.RequestID + "/watermarked.png"
	if _, err := f.n.Blobs().Stat(ctx, output); err != nil {
		t.Fatalf("the stale attempt stored no result (%v): the test does not reach the case", err)
	}
	if st := decodeReceipt(t, call(t, "GET", f.base+rc.StatusURL, f.keyA, nil)); st.Status != "failed" {
		t.Fatalf("the stale success changed the job: %+v", st)
	}
	// The outcome file the worker kept beside its result (actors.OutcomeFiles) goes once its report is refused.
	if _, err := f.n.Blobs().Stat(ctx, "outputs/"+f.orgA+"/"+rc.RequestID+"/outcome"); !errors.Is(err, persistence.ErrNotFound) {
		t.Fatalf("the stale attempt's outcome file: %v; want deleted", err)
	}
	f.clk.Advance(jobstate.ResultRetention + time.Hour)
	if _, _, err := f.n.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := f.n.Blobs().Stat(ctx, output); !errors.Is(err, persistence.ErrNotFound) {
		t.Fatalf("the stale attempt's result 24 hours after the job failed: %v; want deleted", err)
	}
}
