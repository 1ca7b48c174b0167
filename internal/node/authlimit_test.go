package node_test

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"filigrane/internal/authlimit"
)

// TestUnknownKeysCostBoundedStoreReads: a client needs no key to send well-formed unknown ones, and each used
// to cost the node a store read (an S3 GET in a cluster). Now a repeated unknown key costs one read, distinct
// ones spend the client address's bucket, and past it the answer is 429 with Retry-After and no read. Keys the
// node already checked keep working from that address.
func TestUnknownKeysCostBoundedStoreReads(t *testing.T) {
	t.Parallel()
	f := newFixture(t, inMemory(t))
	get := func(key string) response { return call(t, "GET", f.base+"/auth/api-key", key, nil) }
	metric := func(name string, labels ...string) int {
		t.Helper()
		v := metricSum(f.base, name, labels...)
		if v < 0 {
			t.Fatal("the node's /metrics did not answer")
		}
		return int(v)
	}
	reads := func() int {
		return metric("filigrane_store_operations_total", `op="get"`, `prefix="apikey"`, `store="records"`)
	}
	unknown := func(i int) string { return fmt.Sprintf("fgk_%016x_notasecret", 0xfeed0000+i) }
	wantStatus := func(what string, r response, status int, code string) {
		t.Helper()
		if r.status != status {
			t.Fatalf("%s: %d, want %d: %s", what, r.status, status, r.body)
		}
		if code != "" {
			if p := decodeProblem(t, r); p.Code != code {
				t.Fatalf("%s: code %q, want %q", what, p.Code, code)
			}
		}
	}

	wantStatus("key A, first use", get(f.keyA), 200, "")
	before := reads()
	for i := range 3 {
		wantStatus(fmt.Sprintf("the same unknown key, try %d", i), get(unknown(0)), 401, "unauthorized")
	}
	if n := reads() - before; n != 1 {
		t.Fatalf("the same unknown key three times cost %d store reads, want 1", n)
	}
	for i := 1; i < authlimit.DefaultBurst; i++ {
		wantStatus(fmt.Sprintf("unknown key %d", i), get(unknown(i)), 401, "unauthorized")
	}
	if n := reads() - before; n != authlimit.DefaultBurst {
		t.Fatalf("%d distinct unknown keys cost %d store reads", authlimit.DefaultBurst, n)
	}
	r := get(unknown(1000))
	wantStatus("an unknown key past the bucket", r, 429, "rate_limited")
	if ra := r.header.Get("Retry-After"); ra != strconv.Itoa(int(authlimit.DefaultEvery/time.Second)) {
		t.Fatalf("Retry-After %q, want the time to the next token (%s)", ra, authlimit.DefaultEvery)
	}
	wantStatus("the repeated unknown key", get(unknown(0)), 401, "unauthorized") // still remembered: no read
	wantStatus("key A, checked before", get(f.keyA), 200, "")
	if n := reads() - before; n != authlimit.DefaultBurst {
		t.Fatalf("store reads went from %d to %d past the bucket", authlimit.DefaultBurst, n)
	}
	// A key this node never checked is an unknown id like any other while the address's bucket is empty.
	wantStatus("key B, never checked here", get(f.keyB), 429, "rate_limited")

	// One token comes back per DefaultEvery.
	f.clk.Advance(authlimit.DefaultEvery)
	wantStatus("an unknown key after a token came back", get(unknown(2000)), 401, "unauthorized")
	wantStatus("the next one", get(unknown(2001)), 429, "rate_limited")
	// Past the key cache's TTL (5 s), key A's record is read again: a refresh of a key the node knows, which
	// the empty bucket does not stop.
	f.clk.Advance(authlimit.DefaultEvery)
	wantStatus("an unknown key after another token", get(unknown(2002)), 401, "unauthorized")
	wantStatus("key A, its cache entry stale", get(f.keyA), 200, "")
	if n := reads() - before; n != authlimit.DefaultBurst+3 {
		t.Fatalf("store reads: %d, want %d (the burst, two tokens, key A's refresh)", n, authlimit.DefaultBurst+3)
	}
	if n := metric("filigrane_auth_refused_total", `reason="address_limited"`); n != 3 {
		t.Fatalf("refusals by address counted %d, want 3", n)
	}
	if n := metric("filigrane_auth_refused_total", `reason="invalid_key"`); n != authlimit.DefaultBurst+5 {
		t.Fatalf("invalid keys counted %d, want %d", n, authlimit.DefaultBurst+5)
	}
}
