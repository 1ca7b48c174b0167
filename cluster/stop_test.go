package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"filigrane/cluster"
	"filigrane/cluster/clustertest"

	"github.com/asynkron/protoactor-go/actor"
)

// TestGracefulStopEndsWithItsContext: a node stops gracefully while one of its activations is stuck in a call
// (as one is on an object store that stopped answering: chaos16's rolling restart with the storage frozen).
// protoactor waits up to 10 s for that activation to take the stop ("Failed to shutdown partition placement
// actor: future: timeout") and the SIGTERMed node overran its shutdown grace. Stop returns within a small
// bound of its context's end, says it was cut short, and still announced the leave.
func TestGracefulStopEndsWithItsContext(t *testing.T) {
	reg := cluster.NewRegistry()
	reg.MustRegister(Hit{}, HitReply{})
	stuck, release := make(chan struct{}, 1), make(chan struct{})
	blocker := actor.PropsFromFunc(func(ctx actor.Context) {
		if _, ok := ctx.Message().(*Hit); ok {
			stuck <- struct{}{}
			<-release // the call that never answers while the store is frozen
		}
	})
	label := fmt.Sprintf("filigrane-test-stop-%d", os.Getpid())
	// The peer hosts no kind, so the activation lives on the node that stops.
	ns, err := clustertest.StartNodes(ctxTimeout(t, time.Minute), cluster.Config{
		NodeName: "stuck", Logger: testLogger(), Registry: reg, Roles: []cluster.Role{cluster.RoleWorker}, Label: label,
		Kinds:            []cluster.Kind{cluster.NewKind("blocker", blocker)},
		FailureDetection: clustertest.StableDetection(),
	}, cluster.Config{
		NodeName: "peer", Logger: testLogger(), Registry: reg, Label: label,
		FailureDetection: clustertest.StableDetection(),
	})
	if err != nil {
		t.Fatal(err)
	}
	n, peer := ns[0], ns[1]
	t.Cleanup(func() {
		close(release)
		_ = n.Stop(context.Background(), false)
		_ = peer.Stop(context.Background(), false)
	})
	reqCtx, cancelReq := context.WithCancel(context.Background())
	defer cancelReq()
	go func() { _, _ = n.Request(reqCtx, "stuck-1", "blocker", Hit{}) }()
	select {
	case <-stuck:
	case <-time.After(time.Minute):
		t.Fatal("the activation did not receive the request within a minute")
	}

	const grace = 500 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	start := time.Now()
	err = n.Stop(ctx, true)
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
