package node_test

import (
	"context"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"filigrane/actors/sweep"
	"filigrane/internal/clock"
	"filigrane/internal/node"
	"filigrane/persistence/s3test"
)

// TestCloseWithStorageFrozenEndsWithItsContext: a cluster-mode node that holds the sweeper lease is closed
// while its object storage is frozen (versitygw SIGSTOPped, as in chaos16's rolling restart with S3 frozen:
// a SIGTERMed node exited 8 s past its 30 s --shutdown-grace). Close returns about when its context ends:
// the sweeper's lease release, stalled on the frozen store, is cut with the shutdown's context (the lease
// then expires by itself) rather than given 5 s more of its own.
func TestCloseWithStorageFrozenEndsWithItsContext(t *testing.T) {
	t.Parallel()
	srv := s3test.Start(t)
	clk := clock.NewManual(time.Date(2026, 5, 4, 10, 0, 0, 0, time.UTC))
	s3 := s3Config(t, srv)
	n := startNode(t, t.TempDir(), clk, func(c *node.Config) {
		c.S3 = s3
		c.SweepInterval = 20 * time.Millisecond
	})
	closed := false
	t.Cleanup(func() {
		if !closed {
			stopNode(t, n)
		}
	})

	// The sweeper takes its lease on its first round.
	held := func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		for o := range srv.Client().ListObjects(ctx, s3.Bucket, minio.ListObjectsOptions{Recursive: true}) {
			// The store names an object by its key in hex, cut into segments.
			if o.Err == nil && strings.Contains(strings.ReplaceAll(o.Key, "/", ""), hex.EncodeToString([]byte(sweep.LeaseKey))) {
				return true
			}
		}
		return false
	}
	for deadline := time.Now().Add(30 * time.Second); !held(); {
		if time.Now().After(deadline) {
			t.Fatal("the node's sweeper took no lease within 30 s")
		}
		time.Sleep(20 * time.Millisecond) // polling the bucket for the lease object, not waiting for time
	}

	srv.Pause(t)
	t.Cleanup(func() { srv.Resume(t) })
	const grace = time.Second
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	start := time.Now()
	_ = n.Close(ctx) // an error is expected: the grace ran out
	closed = true
	// Before the fix: the release took its own 5 s after the grace (about 5 s here, as nothing else waits).
	if took := time.Since(start); took > grace+2500*time.Millisecond {
		t.Fatalf("Close with the storage frozen took %s; its context ended after %s", took, grace)
	}
}
