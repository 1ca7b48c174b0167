package actors

import (
	"context"
	"crypto/sha256"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"filigrane/internal/authlimit"
	"filigrane/internal/clock"
	"filigrane/persistence"
	"filigrane/persistence/pebblestore"
	"filigrane/persistence/storetest"
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

// TestKeyCacheWritesDropEntries: a revocation through the Keys that share a cache is immediate, and a record
// read before a revocation is not cached after it (an authentication racing with the revocation).
func TestKeyCacheWritesDropEntries(t *testing.T) {
	store, err := pebblestore.Open(t.TempDir(), zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	clk := clock.NewManual(time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC))
	keys := Keys{Store: store, Clock: clk, Cache: NewKeyCache(time.Minute)}
	ctx := context.Background()
	secret, key, err := keys.Create(ctx, NewKeySpec{OrgID: "org_1", MemberID: "mem_1", Scopes: []string{ScopeDetect}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := keys.Authenticate(ctx, secret); err != nil {
		t.Fatal(err)
	}
	if _, err := keys.Revoke(ctx, key.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := keys.Authenticate(ctx, secret); !errors.Is(err, ErrInvalidKey) {
		t.Fatalf("authenticate right after a revocation through the same cache: %v", err)
	}

	// The race: a record read (gen taken) before a write must not be cached after the write.
	secret2, key2, err := keys.Create(ctx, NewKeySpec{OrgID: "org_1", MemberID: "mem_1", Scopes: []string{ScopeDetect}})
	if err != nil {
		t.Fatal(err)
	}
	gen := keys.Cache.look(key2.ID, clk.Now()).gen
	before, _, err := keys.Get(ctx, key2.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := keys.Revoke(ctx, key2.ID); err != nil {
		t.Fatal(err)
	}
	keys.Cache.put(before, clk.Now(), gen) // the racing authentication finishes after the revocation
	if _, err := keys.Authenticate(ctx, secret2); !errors.Is(err, ErrInvalidKey) {
		t.Fatalf("a record read before the revocation was cached after it: %v", err)
	}
}

// countedStore counts the key reads of a real store.
type countedStore struct {
	persistence.Store
	reads int
}

func (s *countedStore) Get(ctx context.Context, key []byte) (persistence.Item, error) {
	if strings.HasPrefix(string(key), prefixAPIKey) {
		s.reads++
	}
	return s.Store.Get(ctx, key)
}

// TestKeyCacheRemembersMisses: an unknown id costs one read, then 401s without one for authlimit.MissTTL. A
// key written under that id through the same cache works at once; one written by another node (another
// cache) works once the miss has expired, not before.
func TestKeyCacheRemembersMisses(t *testing.T) {
	store, err := pebblestore.Open(t.TempDir(), zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	clk := clock.NewManual(time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC))
	counted := &countedStore{Store: store}
	here := Keys{Store: counted, Clock: clk, Cache: NewKeyCache(5 * time.Second)}
	there := Keys{Store: store, Clock: clk, Cache: NewKeyCache(5 * time.Second)}
	ctx := context.Background()
	keyWith := func(id string) (string, APIKey) {
		secret := keyPrefix + id + "_s3cret"
		sum := sha256.Sum256([]byte(secret))
		return secret, APIKey{ID: id, OrgID: "org_1", MemberID: "mem_1", Scopes: []string{ScopeDetect},
			SecretHash: sum[:], CreatedAt: clk.Now()}
	}

	secret, key := keyWith("0123456789abcdef")
	for range 3 {
		if _, err := here.Authenticate(ctx, secret); !errors.Is(err, ErrInvalidKey) {
			t.Fatalf("unknown key: %v", err)
		}
	}
	if counted.reads != 1 {
		t.Fatalf("an unknown key three times: %d reads, want 1", counted.reads)
	}
	if err := here.put(ctx, key, persistence.NoVersion); err != nil {
		t.Fatal(err)
	}
	if _, err := here.Authenticate(ctx, secret); err != nil {
		t.Fatalf("a key created through the cache that remembered its id missing: %v", err)
	}

	secret, key = keyWith("fedcba9876543210")
	if _, err := here.Authenticate(ctx, secret); !errors.Is(err, ErrInvalidKey) {
		t.Fatalf("unknown key: %v", err)
	}
	if err := there.put(ctx, key, persistence.NoVersion); err != nil {
		t.Fatal(err)
	}
	clk.Advance(authlimit.MissTTL - time.Second)
	if _, err := here.Authenticate(ctx, secret); !errors.Is(err, ErrInvalidKey) {
		t.Fatalf("a key created on another node, within MissTTL of a miss: %v", err)
	}
	clk.Advance(time.Second)
	if _, err := here.Authenticate(ctx, secret); err != nil {
		t.Fatalf("a key created on another node, MissTTL after the miss: %v", err)
	}
}

// TestKeyLookupsOfOneIDShareOneRead: while a key id is being read, another request with that id waits for the
// read's answer: it takes no lookup slot (with one slot, it is not refused) and makes no read of its own.
func TestKeyLookupsOfOneIDShareOneRead(t *testing.T) {
	store, err := pebblestore.Open(t.TempDir(), zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	// A real store whose key reads wait until released.
	held := storetest.NewHeld(store, func(k []byte) bool { return strings.HasPrefix(string(k), prefixAPIKey) }, 4)
	clk := clock.NewManual(time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC))
	keys := Keys{Store: held, Clock: clk, Cache: NewKeyCache(5 * time.Second),
		Limit: authlimit.New(authlimit.Config{MaxInFlight: 1}, clk)}
	secret := keyPrefix + "0123456789abcdef_s3cret"
	first := make(chan error, 1)
	go func() {
		_, err := keys.AuthenticateFrom(context.Background(), secret, net.ParseIP("192.0.2.1"))
		first <- err
	}()
	<-held.Entered
	// The second request gives up at once (its context is done): a lookup that waits for the first one's
	// read says so; one that tried a read of its own would be refused for the slot the first one holds.
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = keys.AuthenticateFrom(gone, secret, net.ParseIP("192.0.2.2"))
	var refused *authlimit.Refusal
	if errors.As(err, &refused) || !errors.Is(err, context.Canceled) {
		t.Fatalf("a second lookup of the id being read: %v, want it to wait for that read", err)
	}
	close(held.Release)
	if err := <-first; !errors.Is(err, ErrInvalidKey) {
		t.Fatalf("the first lookup: %v", err)
	}
	if _, err := keys.AuthenticateFrom(context.Background(), secret, net.ParseIP("192.0.2.2")); !errors.Is(err, ErrInvalidKey) {
		t.Fatalf("the id again: %v", err)
	}
	if n := held.Reads.Load(); n != 1 {
		t.Fatalf("%d reads, want 1", n)
	}
}
