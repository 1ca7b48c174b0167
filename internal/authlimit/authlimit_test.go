package authlimit

import (
	"errors"
	"net"
	"testing"
	"time"

	"filigrane/internal/clock"
)

func refusal(t *testing.T, err error) *Refusal {
	t.Helper()
	var r *Refusal
	if !errors.As(err, &r) {
		t.Fatalf("want a refusal, got %v", err)
	}
	return r
}

// TestBucketPerAddress: an address spends its burst on missed lookups, is refused with the wait for its next
// token, and earns one per Every; lookups that found their key are given back; other addresses, and the
// other addresses of an IPv4 subnet, are not affected, while one IPv6 /64 is one client.
func TestBucketPerAddress(t *testing.T) {
	clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	l := New(Config{Burst: 2, Every: 4 * time.Second}, clk)
	a := Client(net.ParseIP("192.0.2.1"))
	for range 2 {
		if err := l.Begin(a); err != nil {
			t.Fatal(err)
		}
		l.End(a, false)
	}
	if r := refusal(t, l.Begin(a)); r.Reason != AddressSpent || r.RetryAfter != 4*time.Second {
		t.Fatalf("spent address: %+v", r)
	}
	if err := l.Begin(Client(net.ParseIP("192.0.2.2"))); err != nil {
		t.Fatalf("a neighbour: %v", err)
	}
	clk.Advance(3 * time.Second)
	if r := refusal(t, l.Begin(a)); r.RetryAfter != time.Second {
		t.Fatalf("three quarters of a token: %+v", r)
	}
	clk.Advance(time.Second)
	if err := l.Begin(a); err != nil {
		t.Fatalf("after Every: %v", err)
	}
	l.End(a, true) // found: the token comes back
	if err := l.Begin(a); err != nil {
		t.Fatalf("after a found key: %v", err)
	}
	l.End(a, false)

	v6 := Client(net.ParseIP("2001:db8:1:2::1"))
	if v6 != Client(net.ParseIP("2001:db8:1:2:ffff::9")) || v6 == Client(net.ParseIP("2001:db8:1:3::1")) {
		t.Fatalf("IPv6 clients are /64s: %s", v6)
	}
	if Client(net.ParseIP("::ffff:192.0.2.1")) != a {
		t.Fatal("an IPv4-mapped address is its IPv4 client")
	}
}

// TestInFlightBound: past MaxInFlight lookups under way, the next is refused whatever its address, and it
// takes no token; End frees the slot.
func TestInFlightBound(t *testing.T) {
	clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	l := New(Config{Burst: 1, MaxInFlight: 2}, clk)
	for _, c := range []string{"192.0.2.1", "192.0.2.2"} {
		if err := l.Begin(c); err != nil {
			t.Fatal(err)
		}
	}
	if r := refusal(t, l.Begin("192.0.2.3")); r.Reason != InFlightFull || r.RetryAfter != time.Second {
		t.Fatalf("third lookup: %+v", r)
	}
	l.End("192.0.2.1", false)
	if err := l.Begin("192.0.2.3"); err != nil {
		t.Fatalf("the refused address, once a slot is free (its token untouched): %v", err)
	}
}

// TestAddressTableIsBounded: many addresses do not grow the table past MaxAddrs. Past it, new addresses
// share one overflow bucket until the tracked ones have refilled and are dropped.
func TestAddressTableIsBounded(t *testing.T) {
	clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	l := New(Config{Burst: 1, Every: time.Second, MaxAddrs: 2, MaxInFlight: 100}, clk)
	for _, c := range []string{"192.0.2.1", "192.0.2.2", "192.0.2.3"} {
		if err := l.Begin(c); err != nil {
			t.Fatal(err)
		}
		l.End(c, false)
	}
	if n := l.Tracked(); n != 2 {
		t.Fatalf("tracked %d addresses, want 2", n)
	}
	// 192.0.2.3 spent the overflow bucket, which 192.0.2.4 shares.
	if r := refusal(t, l.Begin("192.0.2.4")); r.Reason != AddressSpent {
		t.Fatalf("an address past the table: %+v", r)
	}
	clk.Advance(time.Second)
	if err := l.Begin("192.0.2.5"); err != nil {
		t.Fatalf("once the tracked buckets refilled: %v", err)
	}
	l.End("192.0.2.5", false)
	if n := l.Tracked(); n != 1 {
		t.Fatalf("tracked %d addresses after the sweep, want 1 (the new one)", n)
	}
}
