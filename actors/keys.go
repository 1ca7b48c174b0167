package actors

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"filigrane/internal/clock"
	"filigrane/persistence"
)

// Scopes of API keys (spec section 5).
const (
	ScopeEmbed         = "watermarks:embed"
	ScopeDetect        = "watermarks:detect"
	ScopeAssetsRead    = "assets:read"
	ScopeAssetsWrite   = "assets:write"
	ScopeAssetsDelete  = "assets:delete"
	ScopeWebhooksRead  = "webhooks:read"
	ScopeWebhooksWrite = "webhooks:write"
	ScopeStorageRead   = "storage:read"
	ScopeStorageWrite  = "storage:write"
)

// AllScopes lists every scope, in the spec's order.
func AllScopes() []string {
	return []string{ScopeEmbed, ScopeDetect, ScopeAssetsRead, ScopeAssetsWrite, ScopeAssetsDelete,
		ScopeWebhooksRead, ScopeWebhooksWrite, ScopeStorageRead, ScopeStorageWrite}
}

// ValidateScopes checks that every scope is known and returns them without duplicates.
func ValidateScopes(scopes []string) ([]string, error) {
	known := map[string]bool{}
	for _, s := range AllScopes() {
		known[s] = true
	}
	seen := map[string]bool{}
	var out []string
	for _, s := range scopes {
		s = strings.TrimSpace(s)
		if !known[s] {
			return nil, fmt.Errorf("unknown scope %q", s)
		}
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("a key needs at least one scope")
	}
	return out, nil
}

// ErrInvalidKey is returned for a key that is malformed, unknown, revoked or expired. The caller answers 401
// whatever the reason, so that a guesser learns nothing.
var ErrInvalidKey = errors.New("invalid API key")

// APIKey is a stored machine credential. The secret is never stored; SecretHash is its SHA-256 (the secret is
// 256 random bits, so a slow hash adds nothing).
type APIKey struct {
	ID         string     `msgpack:"id" json:"key_id"`
	OrgID      string     `msgpack:"org_id" json:"organization_id"`
	MemberID   string     `msgpack:"member_id" json:"member_id"`
	Name       string     `msgpack:"name" json:"name"`
	Scopes     []string   `msgpack:"scopes" json:"scopes"`
	SecretHash []byte     `msgpack:"secret_hash" json:"-"`
	CreatedAt  time.Time  `msgpack:"created_at" json:"created_at"`
	ExpiresAt  *time.Time `msgpack:"expires_at,omitempty" json:"expires_at"`
	RevokedAt  *time.Time `msgpack:"revoked_at,omitempty" json:"revoked_at"`
}

// SchemaVersion is the layout version of stored API keys.
func (*APIKey) SchemaVersion() uint16 { return 1 }

// HasScope reports whether the key carries scope.
func (k APIKey) HasScope(scope string) bool {
	for _, s := range k.Scopes {
		if s == scope {
			return true
		}
	}
	return false
}

// keyPrefix starts every secret, so that leaked keys are easy to find with secret scanners.
const keyPrefix = "fgk_"

// Keys creates, checks, lists and revokes API keys.
type Keys struct {
	Store persistence.Store
	Clock clock.Clock
	// Cache, when set, keeps key records read by Authenticate for a short time, so that a request does not
	// read and decode its key record (from object storage in a cluster). Every write through Keys drops the
	// key from the cache, so a revocation is immediate for the Keys sharing that cache; other nodes of a
	// cluster see it within the cache's TTL. Share one cache between all the Keys of a process.
	Cache *KeyCache
}

// KeyCache remembers key records for a fixed time.
type KeyCache struct {
	ttl     time.Duration
	mu      sync.Mutex
	entries map[string]cachedKey
	// writes counts the writes through Keys: a record read before a write is not cached after it, or a
	// revocation racing with an authentication could leave the key usable for a TTL.
	writes uint64
}

type cachedKey struct {
	key     APIKey
	fetched time.Time
}

// maxCachedKeys bounds the cache; past it the cache starts over rather than tracking recency.
const maxCachedKeys = 100_000

// NewKeyCache returns a cache whose entries live for ttl.
func NewKeyCache(ttl time.Duration) *KeyCache {
	return &KeyCache{ttl: ttl, entries: map[string]cachedKey{}}
}

// get returns the cached key, or false and the write count to hand to put for a record read after this call.
func (c *KeyCache) get(id string, now time.Time) (APIKey, bool, uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[id]
	if !ok || now.Sub(e.fetched) >= c.ttl || now.Before(e.fetched) {
		return APIKey{}, false, c.writes
	}
	return e.key, true, c.writes
}

// forget drops a key whose record is being written.
func (c *KeyCache) forget(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writes++
	delete(c.entries, id)
}

// put caches key, read when the write count was gen, unless a key was written since.
func (c *KeyCache) put(key APIKey, now time.Time, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.writes != gen {
		return
	}
	if len(c.entries) >= maxCachedKeys {
		c.entries = map[string]cachedKey{}
	}
	c.entries[key.ID] = cachedKey{key: key, fetched: now}
}

// NewKeySpec describes a key to create.
type NewKeySpec struct {
	OrgID, MemberID, Name string
	Scopes                []string
	ExpiresAt             *time.Time
}

// Create stores a new key and returns its secret, which is shown once and never again.
func (k Keys) Create(ctx context.Context, spec NewKeySpec) (string, APIKey, error) {
	scopes, err := ValidateScopes(spec.Scopes)
	if err != nil {
		return "", APIKey{}, err
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return "", APIKey{}, fmt.Errorf("generate key secret: %w", err)
	}
	id := newID("", 8)
	secret := keyPrefix + id + "_" + base64.RawURLEncoding.EncodeToString(raw)
	sum := sha256.Sum256([]byte(secret))
	key := APIKey{ID: id, OrgID: spec.OrgID, MemberID: spec.MemberID, Name: spec.Name,
		Scopes: scopes, SecretHash: sum[:], CreatedAt: k.Clock.Now(), ExpiresAt: spec.ExpiresAt}
	if err := k.put(ctx, key, persistence.NoVersion); err != nil {
		return "", APIKey{}, err
	}
	if _, err := k.Store.CompareAndSet(ctx, []byte(prefixOrgKeys+spec.OrgID+"/"+id), persistence.NoVersion, nil); err != nil {
		return "", APIKey{}, fmt.Errorf("index key %s: %w", id, err)
	}
	return secret, key, nil
}

func (k Keys) put(ctx context.Context, key APIKey, expect persistence.Version) error {
	b, err := persistence.Marshal(&key)
	if err != nil {
		return fmt.Errorf("encode key %s: %w", key.ID, err)
	}
	if k.Cache != nil {
		// Before and after the write: a read that started before it must not be cached (generation), and
		// whatever was cached is stale once it lands (a failed write may have landed too).
		k.Cache.forget(key.ID)
		defer k.Cache.forget(key.ID)
	}
	if _, err := k.Store.CompareAndSet(ctx, []byte(prefixAPIKey+key.ID), expect, b); err != nil {
		return fmt.Errorf("store key %s: %w", key.ID, err)
	}
	return nil
}

// Get returns the key record with id.
func (k Keys) Get(ctx context.Context, id string) (APIKey, persistence.Version, error) {
	it, err := k.Store.Get(ctx, []byte(prefixAPIKey+id))
	if err != nil {
		return APIKey{}, "", fmt.Errorf("load key %s: %w", id, err)
	}
	var key APIKey
	if err := persistence.Unmarshal(it.Value, &key); err != nil {
		return APIKey{}, "", fmt.Errorf("decode key %s: %w", id, err)
	}
	return key, it.Version, nil
}

// Authenticate returns the key that secret belongs to, or ErrInvalidKey when it is malformed, unknown,
// revoked or expired.
func (k Keys) Authenticate(ctx context.Context, secret string) (APIKey, error) {
	rest, ok := strings.CutPrefix(secret, keyPrefix)
	if !ok || len(secret) > 128 {
		return APIKey{}, ErrInvalidKey
	}
	id, _, ok := strings.Cut(rest, "_")
	if !ok || len(id) != 16 {
		return APIKey{}, ErrInvalidKey
	}
	now := k.Clock.Now()
	key, cached, gen := APIKey{}, false, uint64(0)
	if k.Cache != nil {
		key, cached, gen = k.Cache.get(id, now)
	}
	if !cached {
		var err error
		key, _, err = k.Get(ctx, id)
		if errors.Is(err, persistence.ErrNotFound) {
			return APIKey{}, ErrInvalidKey
		}
		if err != nil {
			return APIKey{}, err
		}
		if k.Cache != nil {
			k.Cache.put(key, now, gen)
		}
	}
	sum := sha256.Sum256([]byte(secret))
	if subtle.ConstantTimeCompare(sum[:], key.SecretHash) != 1 {
		return APIKey{}, ErrInvalidKey
	}
	if key.RevokedAt != nil || (key.ExpiresAt != nil && !now.Before(*key.ExpiresAt)) {
		return APIKey{}, ErrInvalidKey
	}
	return key, nil
}

// List returns the keys of an organization (revoked ones included), oldest id first.
func (k Keys) List(ctx context.Context, orgID string) ([]APIKey, error) {
	prefix := []byte(prefixOrgKeys + orgID + "/")
	items, err := k.Store.Scan(ctx, prefix, nil, 10000)
	if err != nil {
		return nil, fmt.Errorf("list keys of %s: %w", orgID, err)
	}
	out := make([]APIKey, 0, len(items))
	for _, it := range items {
		key, _, err := k.Get(ctx, strings.TrimPrefix(string(it.Key), string(prefix)))
		if err != nil {
			return nil, err
		}
		out = append(out, key)
	}
	return out, nil
}

// Revoke marks a key revoked; revoking twice is harmless.
func (k Keys) Revoke(ctx context.Context, id string) (APIKey, error) {
	for attempt := 0; attempt < 5; attempt++ {
		key, v, err := k.Get(ctx, id)
		if err != nil {
			return APIKey{}, err
		}
		if key.RevokedAt != nil {
			return key, nil
		}
		now := k.Clock.Now()
		key.RevokedAt = &now
		err = k.put(ctx, key, v)
		if errors.Is(err, persistence.ErrVersionMismatch) {
			continue
		}
		return key, err
	}
	return APIKey{}, fmt.Errorf("revoke key %s: too much contention", id)
}
