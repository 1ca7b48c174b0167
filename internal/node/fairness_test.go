package node_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"filigrane/actors"
	"filigrane/internal/admin"
	"filigrane/internal/clock"
	"filigrane/internal/node"
)

// TestSyncEmbedNotStarvedByABacklog: on a node with one worker, organization B's synchronous embed queued
// behind organization A's async backlog runs after one job of A, not after all of them, and so does A's own
// synchronous embed, queued last: both are answered 200 within their sync wait. Before, the node's queue was
// first in first out: both waited behind the whole backlog and were answered 202 when their wait ran out
// (load24 measured 16.6 s behind 62 jobs). The worker holds A's first job until both requests wait in the
// queue, and every later job of A's backlog until both are answered: with the old order the worker never
// reaches them within their wait.
func TestSyncEmbedNotStarvedByABacklog(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	clk := clock.NewManual(time.Date(2026, 5, 4, 10, 0, 30, 0, time.UTC))
	var keyA, keyB string
	offline(t, dir, clk, func(a admin.Admin) {
		ctx := context.Background()
		if _, err := a.Bootstrap(ctx); err != nil {
			t.Fatal(err)
		}
		org := func(name, plan string) string {
			st, err := a.CreateOrg(ctx, name, plan, 100)
			if err != nil {
				t.Fatal(err)
			}
			m, err := a.AddMember(ctx, st.ID, "owner of "+name, actors.RoleOwner)
			if err != nil {
				t.Fatal(err)
			}
			key, _, err := a.CreateKey(ctx, actors.NewKeySpec{OrgID: st.ID, MemberID: m, Scopes: actors.AllScopes()})
			if err != nil {
				t.Fatal(err)
			}
			return key
		}
		keyA, keyB = org("A", "business"), org("B", "growth") // A's plan runs 16 jobs at once: all are queued
	})
	const wait = 15 * time.Second // a bound for a slow machine; the fixed order answers in well under a second
	n := startNode(t, dir, clk, func(c *node.Config) { c.Workers, c.SyncWait = 1, wait })
	t.Cleanup(func() { stopNode(t, n) })
	f := &fixture{n: n, base: "http://" + n.APIAddr(), clk: clk}

	first, answered := make(chan struct{}), make(chan struct{})
	var claims atomic.Int32
	var backlog []string // A's jobs, in the order submitted; read by claims after first is closed
	n.Pool().OnClaim = func(ctx context.Context, id string) bool {
		gate := answered
		switch {
		case claims.Add(1) == 1:
			gate = first // A's first job, claimed before its receipt may even be answered
		case !slices.Contains(backlog, id):
			return true // a synchronous request's job
		}
		select {
		case <-gate:
		case <-ctx.Done():
		}
		return true
	}
	var results []string
	for i := range 3 {
		r := post(t, f.base+"/watermarks/images/async", keyA, "", photo(t, 320, 256, uint64(40+i)), `{"a":1}`)
		if r.status != 202 {
			t.Fatalf("async embed %d of A: %d %s", i, r.status, r.body)
		}
		rc := decodeReceipt(t, r)
		backlog, results = append(backlog, rc.RequestID), append(results, rc.ResultURL)
	}
	go func() {
		// B's and A's requests wait in the queue behind A's second and third jobs; then A's first job goes on.
		for n.Pool().Waiting() < 4 {
			time.Sleep(5 * time.Millisecond)
		}
		close(first)
	}()
	began := time.Now()
	syncs := map[string]string{"B": keyB, "A": keyA}
	got := make(chan string, len(syncs))
	for org, key := range syncs {
		go func() {
			r := post(t, f.base+"/watermarks/images", key, "", photo(t, 320, 256, 50), `{"s":1}`)
			if r.status != 200 || r.header.Get("Content-Type") != "image/png" {
				got <- fmt.Sprintf("%s's sync embed behind A's backlog: %d after %v (%s)", org, r.status, time.Since(began).Round(time.Millisecond), r.body)
				return
			}
			got <- ""
		}()
	}
	var failed []string
	for range syncs {
		if msg := <-got; msg != "" {
			failed = append(failed, msg)
		}
	}
	close(answered)
	if len(failed) > 0 {
		t.Fatal(strings.Join(failed, "\n"))
	}
	// A's backlog is not starved: its last job ends too.
	if res := waitResult(t, f, keyA, results[2]); res.status != 200 {
		t.Fatalf("A's last job: %d %s", res.status, res.body)
	}
}
