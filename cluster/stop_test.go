package cluster_test

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestGracefulStopEndsWithItsContext: a node stops gracefully while one of its activations is stuck in a call
// (as one is on an object store that stopped answering: chaos16's rolling restart with the storage frozen).
// protoactor waits up to 10 s for that activation to take the stop ("Failed to shutdown partition placement
// actor: future: timeout") and the SIGTERMed node overran its shutdown grace. Stop returns within a small
// bound of its context's end, says it was cut short, and still announced the leave.
func TestGracefulStopEndsWithItsContext(t *testing.T) {
	// The nodes are the fixture's (s1, s2), started with all the others: a node started after other tests
	// stopped theirs races, in the race detector's eyes, with their gRPC clients' logging (see grpcprobe).
	f := getFixture(t)
	f.onlyOnce(t, "TestGracefulStopEndsWithItsContext") // s1 stays stopped
	n, peer := f.stopping[0], f.stopping[1]
	t.Cleanup(func() { close(f.release) })
	reqCtx, cancelReq := context.WithCancel(context.Background())
	defer cancelReq()
	go func() { _, _ = n.Request(reqCtx, "stuck-1", "blocker", Hit{}) }()
	select {
	case <-f.stuck:
	case <-time.After(time.Minute):
		t.Fatal("the activation did not receive the request within a minute")
	}

	const grace = 500 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	start := time.Now()
	err := n.Stop(ctx, true)
	took := time.Since(start)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("graceful stop cut short by its context: error %v, want one wrapping the context's", err)
	}
	t.Logf("graceful stop with an activation stuck took %s (context %s)", took, grace)
	// Before the fix: over 10 s (protoactor's wait for the activation, then the gRPC server's).
	if took > grace+3*time.Second {
		t.Fatalf("graceful stop took %s with an activation stuck; its context ended after %s", took, grace)
	}
	// The stop cut short still announced the leave: the peer drops the node at once, long before failure
	// detection would (a 5 s probe interval here).
	eventually(t, 2*time.Second, "the peer to see the stopped node leave", func() bool { return peer.HasLeft(n.ID()) })
}
