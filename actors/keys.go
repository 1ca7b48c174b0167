package actors

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"filigrane/internal/authlimit"
	"filigrane/internal/clock"
	"filigrane/internal/hiddenchar"
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
	// read and decode its key record (from object storage in a cluster), and remembers ids the store did not
	// have for authlimit.MissTTL, so that a repeated unknown key costs no read either. Every write through
	// Keys drops the id from the cache, so a revocation is immediate for the Keys sharing that cache; other
	// nodes of a cluster see it within the cache's TTL. It also makes concurrent lookups of one id share one
	// read. Share one cache between all the Keys of a process.
	Cache *KeyCache
	// Limit, when set, bounds the store reads for key ids the cache knows nothing of (guesses, or a key's
	// first use on this node): per client address for AuthenticateFrom, and in flight across all clients.
	// A refused lookup is a *authlimit.Refusal. Refreshing a key the cache held once is not limited.
	Limit *authlimit.Limiter
}

// KeyCache remembers key records, and ids that have no record, for a fixed time.
type KeyCache struct {
	ttl     time.Duration
	mu      sync.Mutex
	entries map[string]cachedKey
	// misses holds the ids found missing, for authlimit.MissTTL. A miss cached here for an id created later
	// on another node needs someone to have sent that id before it existed: ids are 64 random bits, so only
	// a guesser can, and the guesser then waits MissTTL. A write through these Keys drops it at once.
	misses *authlimit.Misses
	// flights are the reads under way, by id: a second lookup of the id waits for the first one's answer.
	flights authlimit.Flights[APIKey]
	// writes counts the writes through Keys: a record read before a write is not cached after it, or a
	// revocation racing with an authentication could leave the key usable for a TTL (and a miss read before
	// a creation would refuse the new key for MissTTL).
	writes uint64
}

type cachedKey struct {
	key     APIKey
	fetched time.Time
}

// maxCachedKeys bounds the cache; past it the cache starts over rather than tracking recency. (The misses
// are bounded by authlimit.Misses.)
const maxCachedKeys = 100_000

// NewKeyCache returns a cache whose key records live for ttl (ids found missing: authlimit.MissTTL).
func NewKeyCache(ttl time.Duration) *KeyCache {
	return &KeyCache{ttl: ttl, entries: map[string]cachedKey{}, misses: authlimit.NewMisses(authlimit.DefaultMaxMisses)}
}

// cacheLook is what the cache knows of an id.
type cacheLook struct {
	key   APIKey
	fresh bool // key is a record younger than the TTL
	miss  bool // the id was found missing less than authlimit.MissTTL ago
	// known: the cache held a record of the id once (stale now), so a read refreshes a key that exists
	// rather than tests a guess.
	known bool
	// gen is the write count to hand to put or putMiss for a record read after this call.
	gen uint64
}

// look returns what the cache knows of id at now.
func (c *KeyCache) look(id string, now time.Time) cacheLook {
	c.mu.Lock()
	defer c.mu.Unlock()
	l := cacheLook{gen: c.writes}
	if e, ok := c.entries[id]; ok {
		l.known = true
		if now.Sub(e.fetched) < c.ttl && !now.Before(e.fetched) {
			l.key, l.fresh = e.key, true
			return l
		}
	}
	l.miss = c.misses.Has(id, now)
	return l
}

// forget drops an id whose record is being written.
func (c *KeyCache) forget(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writes++
	delete(c.entries, id)
	c.misses.Forget(id)
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
	c.misses.Forget(key.ID)
}

// putMiss remembers that id had no record when the write count was gen, unless a key was written since.
func (c *KeyCache) putMiss(id string, now time.Time, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.writes != gen {
		return
	}
	c.misses.Put(id, now)
}

// NewKeySpec describes a key to create.
type NewKeySpec struct {
	OrgID, MemberID, Name string
	Scopes                []string
	ExpiresAt             *time.Time
}

// ErrBadKeyName is wrapped by the *hiddenchar.Error that CheckKeyName returns.
var ErrBadKeyName = errors.New("the key's name")

// CheckKeyName refuses a key name that holds a character which shows nothing or reorders the text around it
// (internal/hiddenchar's rule for names): the console and `filigrane admin key list` show keys by name, so
// one could pass for another. Only new names are checked; a stored key keeps its name.
func CheckKeyName(name string) error {
	return hiddenchar.Name(ErrBadKeyName, name)
}

// Create stores a new key and returns its secret, which is shown once and never again. A name CheckKeyName
// refuses is refused here, before anything is stored.
func (k Keys) Create(ctx context.Context, spec NewKeySpec) (string, APIKey, error) {
	if err := CheckKeyName(spec.Name); err != nil {
		return "", APIKey{}, err
	}
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
// revoked or expired. It is AuthenticateFrom for a caller with no client address: Limit's in-flight bound
// applies, its per-address buckets do not.
func (k Keys) Authenticate(ctx context.Context, secret string) (APIKey, error) {
	return k.AuthenticateFrom(ctx, secret, nil)
}

// AuthenticateFrom is Authenticate for a request from the client address from: with Limit set, a lookup
// that has to ask the store about an id the cache knows nothing of spends a token of from's bucket unless
// the key exists, and is refused with a *authlimit.Refusal when none is left or too many such lookups are
// under way.
func (k Keys) AuthenticateFrom(ctx context.Context, secret string, from net.IP) (APIKey, error) {
	rest, ok := strings.CutPrefix(secret, keyPrefix)
	if !ok || len(secret) > 128 {
		return APIKey{}, ErrInvalidKey
	}
	id, _, ok := strings.Cut(rest, "_")
	if !ok || len(id) != 16 {
		return APIKey{}, ErrInvalidKey
	}
	now := k.Clock.Now()
	key, err := k.lookup(ctx, id, now, authlimit.Client(from))
	if err != nil {
		return APIKey{}, err
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

// lookup returns the record of id from the cache, or from the store within Limit; ErrInvalidKey when there
// is none.
func (k Keys) lookup(ctx context.Context, id string, now time.Time, client string) (APIKey, error) {
	if k.Cache == nil {
		return k.limitedRead(ctx, id, client, false)
	}
	for attempt := 0; ; attempt++ {
		key, err := k.cachedLookup(ctx, id, now, client)
		if !errors.Is(err, authlimit.ErrLookAgain) || attempt == 2 {
			return key, err
		}
	}
}

// cachedLookup is lookup with a cache: one read of an id at a time, the others wait for its answer.
func (k Keys) cachedLookup(ctx context.Context, id string, now time.Time, client string) (APIKey, error) {
	l := k.Cache.look(id, now)
	switch {
	case l.fresh:
		return l.key, nil
	case l.miss:
		return APIKey{}, ErrInvalidKey
	}
	return k.Cache.flights.Do(ctx, id, func() (APIKey, error) {
		key, err := k.limitedRead(ctx, id, client, l.known)
		switch {
		case err == nil:
			k.Cache.put(key, now, l.gen)
		case errors.Is(err, ErrInvalidKey):
			k.Cache.putMiss(id, now, l.gen)
		}
		return key, err
	})
}

// limitedRead reads the record of id within Limit: a read of an id the cache never held (known false)
// takes a token of client's bucket, kept only when the store has no such id, and a lookup slot.
func (k Keys) limitedRead(ctx context.Context, id, client string, known bool) (APIKey, error) {
	if k.Limit != nil && !known {
		if err := k.Limit.Begin(client); err != nil {
			return APIKey{}, err
		}
		// Only a miss keeps the token: a store that failed says nothing about the client.
		missed := true
		defer func() { k.Limit.End(client, !missed) }()
		key, _, err := k.Get(ctx, id)
		missed = errors.Is(err, persistence.ErrNotFound)
		return key, notFoundIsInvalid(err)
	}
	key, _, err := k.Get(ctx, id)
	return key, notFoundIsInvalid(err)
}

// notFoundIsInvalid turns a missing record into ErrInvalidKey.
func notFoundIsInvalid(err error) error {
	if errors.Is(err, persistence.ErrNotFound) {
		return ErrInvalidKey
	}
	return err
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
