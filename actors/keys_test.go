package actors

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"filigrane/internal/clock"
	"filigrane/persistence/pebblestore"
)

// TestKeyCacheRevocationDelay: with a cache, a revoked key keeps working until its entry is older than the
// TTL, and not a moment longer; without one, revocation is immediate.
func TestKeyCacheRevocationDelay(t *testing.T) {
	store, err := pebblestore.Open(t.TempDir(), zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	clk := clock.NewManual(time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC))
	plain := Keys{Store: store, Clock: clk}
	cached := Keys{Store: store, Clock: clk, Cache: NewKeyCache(5 * time.Second)}
	ctx := context.Background()
	secret, key, err := plain.Create(ctx, NewKeySpec{OrgID: "org_1", MemberID: "mem_1", Scopes: []string{ScopeDetect}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cached.Authenticate(ctx, secret); err != nil {
		t.Fatal(err)
	}
	if _, err := plain.Revoke(ctx, key.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := plain.Authenticate(ctx, secret); !errors.Is(err, ErrInvalidKey) {
		t.Fatalf("uncached authenticate after revoke: %v", err)
	}
	clk.Advance(4 * time.Second)
	if _, err := cached.Authenticate(ctx, secret); err != nil {
		t.Fatalf("cached entry younger than the TTL: %v", err)
	}
	clk.Advance(time.Second)
	if _, err := cached.Authenticate(ctx, secret); !errors.Is(err, ErrInvalidKey) {
		t.Fatalf("revoked key still accepted after the TTL: %v", err)
	}
	if _, err := cached.Authenticate(ctx, secret[:len(secret)-1]+"x"); !errors.Is(err, ErrInvalidKey) {
		t.Fatalf("a wrong secret for a cached id: %v", err)
	}
}
