package node_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"net/http"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"filigrane/actors/sweep"
	"filigrane/internal/admin"
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

// TestCloseWithActivationBlockedOnFrozenStorage: a cluster-mode node is closed while one of its actor
// activations is mid-call to its object storage, which no longer answers (a proxy in front of versitygw
// holds every record request, as a frozen server does). The cluster leave stops the local activations, and
// protoactor waits up to 10 s for one that cannot take the stop ("Failed to shutdown partition placement
// actor: future: timeout"): chaos16 saw a SIGTERMed node overrun its grace by 11 s this way. Close returns
// within a small bound of its context: past it the leave waits for neither the activations nor the gRPC
// streams (the others learn of the departure from the gossip leave, and the activation's state is durable:
// its next activation reloads it).
func TestCloseWithActivationBlockedOnFrozenStorage(t *testing.T) {
	t.Parallel()
	srv := s3test.Start(t)
	direct := s3Config(t, srv)
	var secret string
	(&clusterFixture{s3: direct}).admin(t, func(a admin.Admin) { _, secret = newOwnerKey(t, a, "Frozen") })
	var frozen atomic.Bool
	release := make(chan struct{})
	// Records are objects under records/ (the media files the request stores first are not).
	endpoint := s3Proxy(t, srv.Endpoint, func(w http.ResponseWriter, r *http.Request, pass http.Handler) {
		if frozen.Load() && strings.Contains(r.URL.Path, "/records/") {
			select {
			case <-r.Context().Done():
			case <-release:
			}
			return
		}
		pass.ServeHTTP(w, r)
	})
	t.Cleanup(func() { close(release) })
	behind := *direct
	behind.Endpoint = endpoint
	clk := clock.NewManual(time.Date(2026, 5, 4, 10, 0, 0, 0, time.UTC))
	n := startNode(t, t.TempDir(), clk, func(c *node.Config) { c.S3 = &behind })
	closed := false
	t.Cleanup(func() {
		if !closed {
			stopNode(t, n)
		}
	})
	base := "http://" + n.APIAddr()
	img := photo(t, 64, 48, 7)
	// A first job while the storage answers: the node keeps the key it read, so the next request's
	// authentication needs no storage and the request reaches the actors.
	if r := post(t, base+"/watermarks/images/async", secret, "", img, `{"i":1}`); r.status != 202 {
		t.Fatalf("first async embed: %d %s", r.status, r.body)
	}

	frozen.Store(true)
	ct, body := form(t, img, "x.jpg", `{"i":2}`)
	client := &http.Client{Timeout: time.Minute}
	go func() { // its answer does not matter: the node is closed under it
		req, err := http.NewRequest("POST", base+"/watermarks/images/async", bytes.NewReader(body))
		if err != nil {
			return
		}
		req.Header.Set("Content-Type", ct)
		req.Header.Set("X-API-Key", secret)
		if res, err := client.Do(req); err == nil {
			res.Body.Close()
		}
	}()
	// An activation is blocked when a goroutine runs an actor's Receive down to the object store.
	blocked := func() bool {
		buf := make([]byte, 8<<20)
		for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
			if strings.Contains(g, "protoactor-go/actor.(*actorContext)") && strings.Contains(g, "persistence/s3store") {
				return true
			}
		}
		return false
	}
	for deadline := time.Now().Add(30 * time.Second); !blocked(); {
		if time.Now().After(deadline) {
			t.Fatal("no actor activation blocked on the frozen storage within 30 s")
		}
		time.Sleep(20 * time.Millisecond) // polling the goroutines' stacks, not waiting for time
	}

	const grace = time.Second
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	start := time.Now()
	_ = n.Close(ctx) // an error is expected: the grace ran out
	closed = true
	took := time.Since(start)
	t.Logf("Close took %s with a %s context", took, grace)
	// Before the fix: about 10 s past the context (protoactor's wait for the activation to stop).
	if took > grace+3*time.Second {
		t.Fatalf("Close with an activation blocked on the frozen storage took %s; its context ended after %s", took, grace)
	}
}
