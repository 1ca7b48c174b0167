package jobstate

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestHandBack: a draining node hands its attempt back: the first attempt leaves the job queued, a later one
// retrying with no wait; the attempt does not count, the receipt names every node that claimed an attempt,
// and the old lease is fenced off afterwards.
func TestHandBack(t *testing.T) {
	r := mustAccept(t, testSpec(), t0)
	l1, err := r.ClaimOn("n1/w0/aa", "n1", claimAt, lease30)
	if err != nil {
		t.Fatal(err)
	}
	at := claimAt.Add(5 * time.Second)
	if err := r.HandBack(l1.Token, at); err != nil {
		t.Fatal(err)
	}
	if r.Status != StatusQueued || r.Attempts != 0 || r.Lease != nil || !r.Claimable(at) || r.Validate() != nil {
		t.Fatalf("after the first hand-back: %s, %d attempts, lease %v, claimable %v, %v", r.Status, r.Attempts,
			r.Lease, r.Claimable(at), r.Validate())
	}
	if err := r.HandBack(l1.Token, at); !errors.Is(err, ErrStaleLease) {
		t.Fatalf("a repeated hand-back: %v, want a stale lease", err)
	}
	if err := r.Succeed(l1.Token, testOutput(), at); !errors.Is(err, ErrStaleLease) {
		t.Fatalf("the handed-back worker's late result: %v, want a stale lease", err)
	}
	// Attempt 1 on n2 fails retryably; attempt 2 on n3 is handed back: retrying at once, one attempt counted.
	l2, _ := r.ClaimOn("n2/w0/bb", "n2", at, lease30)
	if err := r.Fail(l2.Token, "codec_error", "x", true, at.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	next := r.NextAttemptAt
	l3, err := r.ClaimOn("n3/w1/cc", "n3", next, lease30)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.HandBack(l3.Token, next.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if r.Status != StatusRetrying || r.Attempts != 1 || !r.NextAttemptAt.Equal(next.Add(time.Second)) ||
		!r.Claimable(next.Add(time.Second)) || r.Validate() != nil {
		t.Fatalf("after the second hand-back: %s, %d attempts, next %v, %v", r.Status, r.Attempts, r.NextAttemptAt, r.Validate())
	}
	b, _ := json.Marshal(r.Receipt())
	var rc struct {
		Node         string   `json:"node"`
		AttemptNodes []string `json:"attempt_nodes"`
	}
	if err := json.Unmarshal(b, &rc); err != nil || rc.Node != "n3" || !slices.Equal(rc.AttemptNodes, []string{"n1", "n2", "n3"}) {
		t.Fatalf("receipt: %s", b)
	}
}

// TestAttemptNodesBounded: a job handed back over and over keeps only the latest MaxAttemptNodes nodes, and a
// claim without a node (or a duplicate claim) records none; a receipt before any claim has no node fields.
func TestAttemptNodesBounded(t *testing.T) {
	r := mustAccept(t, testSpec(), t0)
	if b, _ := json.Marshal(r.Receipt()); contains(b, `"node"`) || contains(b, `"attempt_nodes"`) {
		t.Fatalf("queued receipt names a node: %s", b)
	}
	now := claimAt
	for i := 0; i < MaxAttemptNodes+3; i++ {
		l, err := r.ClaimOn("w", string(rune('a'+i)), now, lease30)
		if err != nil {
			t.Fatal(err)
		}
		if again, err := r.ClaimOn("w", "dup", now, lease30); err != nil || again != l {
			t.Fatalf("duplicate claim: %v %v", again, err)
		}
		if err := r.HandBack(l.Token, now); err != nil {
			t.Fatal(err)
		}
		now = now.Add(time.Second)
	}
	if len(r.AttemptNodes) != MaxAttemptNodes || r.AttemptNodes[MaxAttemptNodes-1] != string(rune('a'+MaxAttemptNodes+2)) || r.Validate() != nil {
		t.Fatalf("attempt nodes %v, %v", r.AttemptNodes, r.Validate())
	}
	if _, err := r.Claim("w9", now, lease30); err != nil || len(r.AttemptNodes) != MaxAttemptNodes {
		t.Fatalf("claim without a node: %v, %d nodes", err, len(r.AttemptNodes))
	}
}

func contains(b []byte, s string) bool { return strings.Contains(string(b), s) }
