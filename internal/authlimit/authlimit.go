// Package authlimit bounds what lookups of unknown credentials may cost a node: API-key ids (actors.Keys) and
// console session cookies (accounts.Accounts), one Limiter for both. Anyone can send a well-formed key or a
// random cookie without having one, and each new one would otherwise cost a store read (an S3 GET in a
// cluster). It keeps a token bucket per client address, spent by lookups that found nothing, and a bound on
// such lookups in flight across all clients (Limiter); and, for its callers to hold one each, the two ways a
// lookup is spared: a memory of credentials found missing lately (Misses) and the sharing of one read among
// concurrent lookups of one credential (Flights).
//
// It only answers whether a lookup may go to the store, how long a refused client should wait, and what an
// earlier or concurrent lookup found. It reads no store itself (a Flights runs its caller's read), knows
// nothing of keys, sessions or HTTP, and holds no state but its buckets, its in-flight count, the ids of
// misses and the reads under way.
package authlimit

import (
	"fmt"
	"net"
	"sync"
	"time"

	"filigrane/internal/clock"
)

// Defaults of Config, chosen for a client that makes mistakes rather than guesses. The key cache remembers an
// unknown id (actors.KeyCache, with a Misses), so a client repeating a wrong or deleted key spends one token per 30 s, not
// one per request: only distinct unknown ids spend the bucket. 20 distinct unknown ids in a burst and 20 a
// minute after that is far above what a misconfigured client produces (a handful of stale keys) and far
// below a guesser's rate. 32 lookups in flight is about 1,000-3,000 S3 GETs per second at 10-30 ms each for
// a distributed flood, and never reached by known keys (the cache answers them; a refresh of a known key
// does not count here).
const (
	DefaultBurst       = 20
	DefaultEvery       = 3 * time.Second
	DefaultMaxAddrs    = 16_384
	DefaultMaxInFlight = 32
)

// Config sets the limits. Zero values take the defaults.
type Config struct {
	// Burst is the number of failed lookups an address may make at once; Every gives one back.
	Burst int
	Every time.Duration
	// MaxAddrs bounds the addresses tracked. Past it, buckets that have refilled are dropped (a full bucket
	// is the same as none); when none has, new addresses share one overflow bucket until some do.
	MaxAddrs int
	// MaxInFlight bounds the lookups of unknown key ids under way at once, across all clients.
	MaxInFlight int
}

func (c *Config) defaults() {
	if c.Burst <= 0 {
		c.Burst = DefaultBurst
	}
	if c.Every <= 0 {
		c.Every = DefaultEvery
	}
	if c.MaxAddrs <= 0 {
		c.MaxAddrs = DefaultMaxAddrs
	}
	if c.MaxInFlight <= 0 {
		c.MaxInFlight = DefaultMaxInFlight
	}
}

// Reason says why a lookup was refused.
type Reason string

// Reasons of a Refusal.
const (
	// AddressSpent: the client's address has no token left (answered 429).
	AddressSpent Reason = "address_spent"
	// InFlightFull: MaxInFlight lookups are under way (answered 503).
	InFlightFull Reason = "in_flight_full"
)

// Refusal is the error of a lookup that was not allowed to reach the store.
type Refusal struct {
	Reason Reason
	// RetryAfter is when a retry may succeed: the next token of the address, or a short pause for a lookup
	// slot.
	RetryAfter time.Duration
}

func (r *Refusal) Error() string {
	return fmt.Sprintf("credential lookup refused (%s); retry after %s", r.Reason, r.RetryAfter)
}

// inFlightRetry is the wait suggested when every lookup slot is busy: a healthy store answers a lookup in
// milliseconds, so a slot frees within a second unless the store itself is slow.
const inFlightRetry = time.Second

// Limiter holds the buckets and the in-flight count. Safe for concurrent use; one per process.
type Limiter struct {
	cfg Config
	clk clock.Clock

	mu        sync.Mutex
	buckets   map[string]*bucket
	overflow  bucket
	lastSweep time.Time
	inFlight  int
}

// bucket is a token bucket: tokens at time at (refilled lazily).
type bucket struct {
	tokens float64
	at     time.Time
}

// New returns a limiter with cfg's limits on clk's time.
func New(cfg Config, clk clock.Clock) *Limiter {
	cfg.defaults()
	return &Limiter{cfg: cfg, clk: clk, buckets: map[string]*bucket{},
		overflow: bucket{tokens: float64(cfg.Burst), at: clk.Now()}}
}

// Client is the bucket key of a remote address: the IPv4 address, or the /64 of an IPv6 address (one
// subscriber usually holds a whole /64, so per-address buckets would give one client 2^64 of them).
func Client(ip net.IP) string {
	if ip == nil {
		return ""
	}
	if v4 := ip.To4(); v4 != nil {
		return v4.String()
	}
	return ip.Mask(net.CIDRMask(64, 128)).String() + "/64"
}

// Begin asks to look up an unknown key id for client (a Client key; "" for a caller with no address, which
// only the in-flight bound applies to). It takes one token of the client's bucket and one lookup slot, or
// takes nothing and returns a *Refusal. End must follow a nil error.
func (l *Limiter) Begin(client string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clk.Now()
	var b *bucket
	if client != "" {
		b = l.bucketOf(client, now)
		l.refill(b, now)
		if b.tokens < 1 {
			wait := time.Duration((1 - b.tokens) * float64(l.cfg.Every))
			return &Refusal{Reason: AddressSpent, RetryAfter: wait}
		}
	}
	if l.inFlight >= l.cfg.MaxInFlight {
		return &Refusal{Reason: InFlightFull, RetryAfter: inFlightRetry}
	}
	if b != nil {
		b.tokens--
	}
	l.inFlight++
	return nil
}

// End releases the lookup slot Begin took. refund gives the client its token back: the id existed, so the
// lookup was no guess (whether the secret matched is the cache's business from then on), or the store
// failed, which says nothing about the client.
func (l *Limiter) End(client string, refund bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.inFlight--
	if refund && client != "" {
		now := l.clk.Now()
		b := l.bucketOf(client, now)
		l.refill(b, now)
		b.tokens = min(b.tokens+1, float64(l.cfg.Burst))
	}
}

// bucketOf returns client's bucket, making a full one when it has none. Called with mu held.
func (l *Limiter) bucketOf(client string, now time.Time) *bucket {
	if b, ok := l.buckets[client]; ok {
		return b
	}
	if len(l.buckets) >= l.cfg.MaxAddrs {
		l.sweep(now)
		if len(l.buckets) >= l.cfg.MaxAddrs {
			return &l.overflow
		}
	}
	b := &bucket{tokens: float64(l.cfg.Burst), at: now}
	l.buckets[client] = b
	return b
}

// sweep drops the buckets that have refilled, at most once per Every: a table full of spent buckets would
// otherwise make every new address pay a pass over the whole table.
func (l *Limiter) sweep(now time.Time) {
	if !l.lastSweep.IsZero() && now.Sub(l.lastSweep) < l.cfg.Every && !now.Before(l.lastSweep) {
		return
	}
	l.lastSweep = now
	for k, b := range l.buckets {
		l.refill(b, now)
		if b.tokens >= float64(l.cfg.Burst) {
			delete(l.buckets, k)
		}
	}
}

// refill adds the tokens earned since b.at. A clock that went back earns nothing.
func (l *Limiter) refill(b *bucket, now time.Time) {
	if now.After(b.at) {
		b.tokens = min(b.tokens+float64(now.Sub(b.at))/float64(l.cfg.Every), float64(l.cfg.Burst))
		b.at = now
	}
}

// Tracked returns the number of addresses with a bucket.
func (l *Limiter) Tracked() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.buckets)
}
