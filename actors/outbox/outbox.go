// Package outbox holds side effects (webhook events, bucket deliveries, batch notices) that a durable actor's
// state change causes, and delivers each at least once.
//
// It owns the outbox records in the Store and the delivery pass; it does not know what an effect does (a
// Handler registered per Kind does) and it decides no actor state. There is no global registry: the node
// builds one Registry and hands it to the pass.
//
// The life of an effect:
//
//  1. A durable actor records the effect IN THE SAME compare-and-set as the state change that causes it: its
//     record carries the effect (a `Pending []outbox.Effect` field, see actors/durable, or a settlement flag
//     from which the effect is derived, like the job record's announcements).
//  2. After that write it hands the effect over with Outbox.Add (create-only by Effect.ID, so a repeat is a
//     no-op) and only then clears it from its record. A crash in between makes the next activation (or the
//     sweeper's tick of it) hand it over again; Effect.ID is derived from the cause (EffectID), so a replayed
//     commit never makes a second effect.
//  3. The outbox pass (Deliverer.Pass, run by the leased sweeper) calls the Kind's Handler.Deliver when the
//     effect is due: at once, then after each wait of Handler.Schedule. Success marks it delivered; an error
//     wrapped with Permanent, or a failure after the last wait, marks it dead. Every attempt is logged in the
//     record (time, duration, error, handler detail set with Note). Delivery is at least once: a crash after
//     Deliver returned and before the record was written delivers again.
//  4. Redeliver enqueues an effect again now (a manual webhook re-delivery, a storage retry), whatever its
//     status; its schedule starts over and the attempt log is kept.
//  5. Delivered and dead effects stay readable (Get, List) for Outbox.Retention (default 30 days), then the
//     pass deletes them.
//
// Effects with the same Kind and Key (the ordering key, e.g. a webhook endpoint id) are attempted in creation
// order within a pass, and a failed attempt holds back the later effects of its Key for the rest of that
// pass; across passes a retried effect can be overtaken ("in order where possible").
//
// Storage keys (docs/ARCHITECTURE.md):
//
//	outbox/fx/<effect id>                                     -> Entry
//	outbox/due/<next attempt unix ns, 20 digits>/<effect id>  -> empty; the pass scans these in time order
//	outbox/key/<kind>/<key>/<inverted created ns>/<effect id> -> empty; newest-first listing per ordering key
package outbox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"filigrane/internal/clock"
	"filigrane/persistence"
)

// Effect is one side effect to deliver.
type Effect struct {
	// ID is deterministic from the cause (EffectID), so that handing the same effect over twice is harmless.
	ID string `msgpack:"id"`
	// Kind names the Handler ("webhook.event", "storage.delivery", ...).
	Kind string `msgpack:"kind"`
	// Key is the ordering key (for example the webhook endpoint id); empty: no ordering, not listable by key.
	Key string `msgpack:"key,omitempty"`
	// Payload is the handler's input, opaque to the outbox (at most MaxPayload bytes).
	Payload []byte `msgpack:"payload,omitempty"`
	// Created is when the state change that caused the effect happened.
	Created time.Time `msgpack:"created"`
}

// MaxPayload bounds an effect's payload: effects are small records; a large body belongs in Blobs.
const MaxPayload = 256 << 10

// EffectID returns prefix + 32 hex characters of a SHA-256 over the parts, each length-prefixed so that
// ("ab","c") and ("a","bc") differ. Use the cause's identity: EffectID("evt_", requestID, "job.completed").
func EffectID(prefix string, parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		fmt.Fprintf(h, "%d:%s;", len(p), p)
	}
	return prefix + hex.EncodeToString(h.Sum(nil)[:16])
}

// validName: non-empty, at most 200 bytes of printable ASCII without '/' (names are key segments).
func validName(s string, empty bool) bool {
	if s == "" {
		return empty
	}
	if len(s) > 200 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c >= 0x7f || c == '/' {
			return false
		}
	}
	return true
}

// Validate checks an effect before it is stored.
func (e Effect) Validate() error {
	switch {
	case !validName(e.ID, false):
		return fmt.Errorf("outbox: effect id %q: want 1-200 printable ASCII characters without '/'", e.ID)
	case !validName(e.Kind, false):
		return fmt.Errorf("outbox: effect %s: kind %q: want 1-200 printable ASCII characters without '/'", e.ID, e.Kind)
	case !validName(e.Key, true):
		return fmt.Errorf("outbox: effect %s: key %q: want at most 200 printable ASCII characters without '/'", e.ID, e.Key)
	case len(e.Payload) > MaxPayload:
		return fmt.Errorf("outbox: effect %s: payload of %d bytes exceeds %d", e.ID, len(e.Payload), MaxPayload)
	case e.Created.IsZero():
		return fmt.Errorf("outbox: effect %s: no creation time", e.ID)
	}
	return nil
}

// Status of an entry.
type Status string

// Statuses.
const (
	StatusPending   Status = "pending"   // waiting for its next attempt (NextAt)
	StatusDelivered Status = "delivered" // a Deliver call succeeded
	StatusDead      Status = "dead"      // permanent failure or schedule exhausted; Redeliver revives it
)

// Attempt is the outcome of one Deliver call.
type Attempt struct {
	// N counts attempts of the entry from 1, across redeliveries.
	N        int           `msgpack:"n"`
	At       time.Time     `msgpack:"at"`
	Duration time.Duration `msgpack:"duration"`
	// Error is empty on success.
	Error string `msgpack:"error,omitempty"`
	// Detail is what the handler noted (Note), for example "HTTP 503".
	Detail    string `msgpack:"detail,omitempty"`
	Permanent bool   `msgpack:"permanent,omitempty"`
}

// maxAttemptLog bounds the attempt log of one entry; the oldest attempts go first.
const maxAttemptLog = 100

// Entry is the stored state of one effect (Store key outbox/fx/<id>).
type Entry struct {
	Effect Effect `msgpack:"effect"`
	Status Status `msgpack:"status"`
	// NextAt is when the pass looks at the entry next: the next attempt while pending, the deletion once
	// delivered or dead.
	NextAt time.Time `msgpack:"next_at"`
	// Round counts the attempts since the entry was (re-)enqueued; it indexes the schedule.
	Round    int       `msgpack:"round"`
	Attempts []Attempt `msgpack:"attempts,omitempty"`
	// Total counts every attempt ever made (the log keeps the last maxAttemptLog).
	Total   int        `msgpack:"total"`
	EndedAt *time.Time `msgpack:"ended_at,omitempty"`
}

// SchemaVersion implements persistence.Record.
func (*Entry) SchemaVersion() uint16 { return 1 }

// Storage key prefixes.
const (
	prefixFx  = "outbox/fx/"
	prefixDue = "outbox/due/"
	prefixKey = "outbox/key/"
)

func fxKey(id string) []byte { return []byte(prefixFx + id) }

func dueKey(at time.Time, id string) []byte {
	ns := at.UnixNano()
	if ns < 0 {
		ns = 0
	}
	return []byte(fmt.Sprintf("%s%020d/%s", prefixDue, ns, id))
}

func keyPrefix(kind, key string) string { return prefixKey + kind + "/" + key + "/" }

func keyIndex(e Effect) []byte { return []byte(keyPrefix(e.Kind, e.Key) + e.position()) }

// position is the effect's place in its key's listing: newest first, then by id. Positions of different
// kinds compare the same way, so listings of several kinds merge (ListKinds).
func (e Effect) position() string {
	return fmt.Sprintf("%020d/%s", math.MaxInt64-e.Created.UnixNano(), e.ID)
}

// DefaultRetention is how long delivered and dead entries stay readable.
const DefaultRetention = 30 * 24 * time.Hour

// ErrNotFound: no entry with that id (never created, or deleted after its retention).
var ErrNotFound = errors.New("outbox: effect not found")

// Outbox reads and writes outbox entries. It is a value: build one wherever a Store and a Clock are at hand.
type Outbox struct {
	Store persistence.Store
	Clock clock.Clock
	// Retention keeps delivered and dead entries readable; 0 means DefaultRetention.
	Retention time.Duration
}

func (o Outbox) retention() time.Duration {
	if o.Retention > 0 {
		return o.Retention
	}
	return DefaultRetention
}

// Add hands effects over: each is stored create-only under its id and made due at once. An id that exists
// already is left as it is (whatever its status), so handing the same effect over twice delivers it once;
// Add also restores the index keys of a pending entry whose first hand-over was cut short. It returns once
// every effect is stored; only then may the caller clear them from its record.
func (o Outbox) Add(ctx context.Context, effects ...Effect) error {
	for _, e := range effects {
		if err := e.Validate(); err != nil {
			return err
		}
		ent := &Entry{Effect: e, Status: StatusPending, NextAt: e.Created}
		b, err := persistence.Marshal(ent)
		if err != nil {
			return fmt.Errorf("outbox: encode %s: %w", e.ID, err)
		}
		// The entry first, then its index keys: a due key never points at nothing for long, and a crash
		// before the index keys is repaired by the repeat hand-over that follows it.
		_, err = o.Store.CompareAndSet(ctx, fxKey(e.ID), persistence.NoVersion, b)
		switch {
		case errors.Is(err, persistence.ErrVersionMismatch):
			cur, _, gerr := o.get(ctx, e.ID)
			if gerr != nil {
				return gerr
			}
			if cur.Status != StatusPending {
				continue
			}
			ent = cur
		case err != nil:
			return fmt.Errorf("outbox: store %s: %w", e.ID, err)
		}
		if err := o.create(ctx, dueKey(ent.NextAt, e.ID)); err != nil {
			return err
		}
		if e.Key != "" {
			if err := o.create(ctx, keyIndex(e)); err != nil {
				return err
			}
		}
	}
	return nil
}

// create writes an empty index key; an existing one is fine.
func (o Outbox) create(ctx context.Context, key []byte) error {
	if _, err := o.Store.CompareAndSet(ctx, key, persistence.NoVersion, nil); err != nil && !errors.Is(err, persistence.ErrVersionMismatch) {
		return fmt.Errorf("outbox: index %s: %w", key, err)
	}
	return nil
}

func (o Outbox) get(ctx context.Context, id string) (*Entry, persistence.Version, error) {
	it, err := o.Store.Get(ctx, fxKey(id))
	if errors.Is(err, persistence.ErrNotFound) {
		return nil, "", fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	if err != nil {
		return nil, "", fmt.Errorf("outbox: load %s: %w", id, err)
	}
	var ent Entry
	if err := persistence.Unmarshal(it.Value, &ent); err != nil {
		return nil, "", fmt.Errorf("outbox: decode %s: %w", id, err)
	}
	return &ent, it.Version, nil
}

// Get returns the entry of effect id, or ErrNotFound.
func (o Outbox) Get(ctx context.Context, id string) (*Entry, error) {
	ent, _, err := o.get(ctx, id)
	return ent, err
}

// List returns up to limit entries of kind with ordering key key, newest first, starting after the position
// after ("" from the newest), and the position to continue from ("" at the end). Positions are opaque.
func (o Outbox) List(ctx context.Context, kind, key, after string, limit int) ([]*Entry, string, error) {
	if limit < 1 || !validName(kind, false) || !validName(key, false) {
		return nil, "", fmt.Errorf("outbox: list %q/%q limit %d: invalid", kind, key, limit)
	}
	prefix := keyPrefix(kind, key)
	start := []byte(prefix)
	if after != "" {
		start = persistence.KeyAfter([]byte(prefix + after))
	}
	items, err := o.Store.Scan(ctx, []byte(prefix), start, limit)
	if err != nil {
		return nil, "", fmt.Errorf("outbox: list %s/%s: %w", kind, key, err)
	}
	var out []*Entry
	for _, it := range items {
		pos := strings.TrimPrefix(string(it.Key), prefix)
		_, id, _ := strings.Cut(pos, "/")
		ent, err := o.Get(ctx, id)
		if errors.Is(err, ErrNotFound) {
			continue // deleted after its retention; its index key goes with the next pass
		}
		if err != nil {
			return nil, "", err
		}
		out = append(out, ent)
	}
	next := ""
	if len(items) == limit {
		next = strings.TrimPrefix(string(items[len(items)-1].Key), prefix)
	}
	return out, next, nil
}

// ListKinds is List over several kinds with the same ordering key, merged: up to limit entries newest first,
// starting after position after, and the position to continue from ("" at the end).
func (o Outbox) ListKinds(ctx context.Context, kinds []string, key, after string, limit int) ([]*Entry, string, error) {
	var all []*Entry
	more := false
	for _, kind := range kinds {
		ents, next, err := o.List(ctx, kind, key, after, limit)
		if err != nil {
			return nil, "", err
		}
		all = append(all, ents...)
		more = more || next != ""
	}
	slices.SortFunc(all, func(a, b *Entry) int { return strings.Compare(a.Effect.position(), b.Effect.position()) })
	if len(all) > limit {
		all, more = all[:limit], true
	}
	next := ""
	if more && len(all) > 0 {
		next = all[len(all)-1].Effect.position()
	}
	return all, next, nil
}

// Redeliver enqueues effect id again now: a pending entry is made due at once, a delivered or dead one
// becomes pending with its schedule started over. The attempt log is kept. ErrNotFound when there is no
// such entry (never created, or past its retention).
func (o Outbox) Redeliver(ctx context.Context, id string) (*Entry, error) {
	for range 16 {
		cur, ver, err := o.get(ctx, id)
		if err != nil {
			return nil, err
		}
		next := *cur
		now := o.Clock.Now()
		next.Status, next.NextAt, next.EndedAt = StatusPending, now, nil
		if cur.Status != StatusPending {
			next.Round = 0
		}
		if err := o.create(ctx, dueKey(now, id)); err != nil {
			return nil, err
		}
		b, err := persistence.Marshal(&next)
		if err != nil {
			return nil, fmt.Errorf("outbox: encode %s: %w", id, err)
		}
		if _, err := o.Store.CompareAndSet(ctx, fxKey(id), ver, b); err != nil {
			if errors.Is(err, persistence.ErrVersionMismatch) {
				continue // the pass wrote it meanwhile; the due key made above is dropped as stale if unused
			}
			return nil, fmt.Errorf("outbox: redeliver %s: %w", id, err)
		}
		// The old due key (if any) no longer matches NextAt; the pass drops it when it comes due.
		return &next, nil
	}
	return nil, fmt.Errorf("outbox: redeliver %s: too much contention: %w", id, persistence.ErrVersionMismatch)
}
