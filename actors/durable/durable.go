// Package durable is the one way Filigrane's durable state is read and written: a record under one Store key,
// loaded, changed on a copy, and written back with compare-and-set on the version it was read at
// (DESIGN.md section 2, rule 1).
//
// It owns the load / version check / compare-and-set / retry mechanics and the hand-over of the record's
// pending outbox effects; it does not decide state (the record's own pure methods do) and knows nothing of
// actors or messages.
//
// Two shapes:
//
//   - Cell is one actor activation's hold on its record. Load reads it once per activation (a missing record
//     on every Load: another activation may be about to create it); Save writes a changed copy at the held
//     version. A failed compare-and-set means another activation (or writer) owns
//     the identity: Save returns ErrFenced and the cell refuses every later Save, so the actor answers
//     "retry" and stops (the caller re-sends, a fresh activation reloads). Used by the org and job actors.
//   - Update is load-apply-write with retries on conflict, for records written outside an actor by short,
//     idempotent commands (uploads, offline administration).
//
// Outbox effects: a record type that carries pending effects names them with Cell.Pending. Save writes them
// in the same compare-and-set as the state change, then hands them to the outbox (create-only) and clears
// them with a second write; Load hands over whatever a crashed activation left. So an effect is stored with
// its cause, delivered at least once, and never duplicated by a replayed commit (its id comes from its cause).
// Records that derive effects from their state instead (the job record's announcements) hand them over in
// their actor and mark them settled; the outcome is the same.
package durable

import (
	"context"
	"errors"
	"fmt"
	"time"

	"filigrane/actors/outbox"
	"filigrane/persistence"
)

// Ptr is the pointer form of a record type T.
type Ptr[T any] interface {
	*T
	persistence.Record
}

// ErrFenced is returned by Cell.Save when the record changed since this holder read it: another activation
// owns the identity. It wraps persistence.ErrVersionMismatch.
var ErrFenced = fmt.Errorf("durable: record written by another activation: %w", persistence.ErrVersionMismatch)

// Fenced reports whether err means the identity is owned elsewhere (stop, let the caller retry).
func Fenced(err error) bool { return errors.Is(err, persistence.ErrVersionMismatch) }

// Read returns the record under key and its version; persistence.ErrNotFound (wrapped) when there is none.
func Read[T any, P Ptr[T]](ctx context.Context, st persistence.Store, key []byte) (P, persistence.Version, error) {
	it, err := st.Get(ctx, key)
	if err != nil {
		return nil, "", fmt.Errorf("load %s: %w", key, err)
	}
	var rec T
	if err := persistence.Unmarshal(it.Value, P(&rec)); err != nil {
		return nil, "", fmt.Errorf("decode %s: %w", key, err)
	}
	return &rec, it.Version, nil
}

// Write stores rec under key if the stored version is still expect (persistence.NoVersion: create-only) and
// returns the new version; persistence.ErrVersionMismatch (wrapped) otherwise, with nothing written.
func Write[T any, P Ptr[T]](ctx context.Context, st persistence.Store, key []byte, expect persistence.Version, rec P) (persistence.Version, error) {
	b, err := persistence.Marshal(rec)
	if err != nil {
		return "", fmt.Errorf("encode %s: %w", key, err)
	}
	v, err := st.CompareAndSet(ctx, key, expect, b)
	if err != nil {
		return "", fmt.Errorf("save %s: %w", key, err)
	}
	return v, nil
}

// DefaultRetries bounds Update's attempts: contention on one record is a handful of writers at most.
const DefaultRetries = 16

// Update loads the record under key, calls fn with it (nil when there is none) and writes what fn returns,
// retrying from a fresh load when another writer got there first. fn must not change cur: it returns a
// changed copy, or nil to write nothing. On success Update returns the written record (or cur when fn
// returned nil); when fn fails it returns cur and fn's error unchanged, with nothing written; on storage
// trouble or after retries conflicting writes, nil and the error.
func Update[T any, P Ptr[T]](ctx context.Context, st persistence.Store, key []byte, retries int, fn func(cur P) (P, error)) (P, error) {
	if retries <= 0 {
		retries = DefaultRetries
	}
	for range retries {
		cur, ver, err := Read[T, P](ctx, st, key)
		if errors.Is(err, persistence.ErrNotFound) {
			cur, ver = nil, persistence.NoVersion
		} else if err != nil {
			return nil, err
		}
		next, err := fn(cur)
		if err != nil {
			return cur, err
		}
		if next == nil {
			return cur, nil
		}
		if _, err := Write(ctx, st, key, ver, next); err != nil {
			if errors.Is(err, persistence.ErrVersionMismatch) {
				continue
			}
			return nil, err
		}
		return next, nil
	}
	return nil, fmt.Errorf("save %s: %d conflicting writers: %w", key, retries, persistence.ErrVersionMismatch)
}

// Cell is one activation's hold on the record under Key. It is not safe for concurrent use: an actor
// handles one message at a time.
type Cell[T any, P Ptr[T]] struct {
	Store persistence.Store
	Key   []byte
	// Timeout bounds each storage call; 0 means 10 s.
	Timeout time.Duration
	// AfterLoad runs on a freshly read record before it is held (the org record copies its journal out).
	AfterLoad func(ctx context.Context, rec P) error
	// BeforeSave runs on the copy about to be written (pruning).
	BeforeSave func(rec P)
	// AfterSave runs once a write succeeded; an error is returned by Save, but the record is saved and held.
	AfterSave func(ctx context.Context, rec P) error
	// Pending, when set, names the record's pending outbox effects (a field of the record); Outbox must then
	// be set too. See the package doc.
	Pending func(rec P) *[]outbox.Effect
	Outbox  outbox.Outbox
	// OnHandOverError is told when handing effects over failed after the state was saved (Save still returns
	// nil: the state change is committed, and the effects stay in the record for the next Save or activation).
	OnHandOverError func(err error)
	// Absent, when set, says which stored records stand for none (a tombstone): Load reads again while such
	// a record is held, as it does while none is.
	Absent func(rec P) bool

	rec     P
	version persistence.Version
	loaded  bool
	fenced  bool
}

func (c *Cell[T, P]) ctx(parent context.Context) (context.Context, context.CancelFunc) {
	t := c.Timeout
	if t <= 0 {
		t = 10 * time.Second
	}
	return context.WithTimeout(parent, t)
}

// Load returns the held record, reading it on the first call of the activation; nil (and no error) when the
// record does not exist yet. A failed read is not remembered: the next call reads again. Neither is a missing
// (or Absent) record: during a partition two activations of one identity can live for a moment, and one that
// found nothing must see the record the other creates, or it would keep answering "no such record" for a
// record that exists (its own Save is fenced by the version either way).
func (c *Cell[T, P]) Load(ctx context.Context) (P, error) {
	if c.loaded && c.rec != nil && (c.Absent == nil || !c.Absent(c.rec)) {
		return c.rec, nil
	}
	sctx, cancel := c.ctx(ctx)
	defer cancel()
	rec, ver, err := Read[T, P](sctx, c.Store, c.Key)
	switch {
	case errors.Is(err, persistence.ErrNotFound):
		rec, ver = nil, persistence.NoVersion
	case err != nil:
		return nil, err
	default:
		if c.AfterLoad != nil {
			if err := c.AfterLoad(sctx, rec); err != nil {
				return nil, err
			}
		}
	}
	c.rec, c.version, c.loaded = rec, ver, true
	if rec != nil && c.pending(rec) {
		// A crashed activation left effects that were committed but not handed over.
		if err := c.handOver(ctx); err != nil && c.OnHandOverError != nil {
			c.OnHandOverError(err)
		}
	}
	return c.rec, nil
}

// Held returns the record as last loaded or saved (nil before Load or when it does not exist).
func (c *Cell[T, P]) Held() P { return c.rec }

// Version is the version of the held record (persistence.NoVersion when it does not exist).
func (c *Cell[T, P]) Version() persistence.Version { return c.version }

// Save writes next (a changed copy of the held record, or a new record) at the held version and holds it.
// ErrFenced when another writer changed the record since: nothing was written, and every later Save of this
// cell fails the same way (the activation must stop). Save may be called before Load for a record that is
// known not to exist (create-only).
func (c *Cell[T, P]) Save(ctx context.Context, next P) error {
	if c.fenced {
		return ErrFenced
	}
	if c.BeforeSave != nil {
		c.BeforeSave(next)
	}
	sctx, cancel := c.ctx(ctx)
	v, err := Write(sctx, c.Store, c.Key, c.version, next)
	cancel()
	if err != nil {
		if errors.Is(err, persistence.ErrVersionMismatch) {
			c.fenced = true
			return fmt.Errorf("%w (%s)", ErrFenced, c.Key)
		}
		return err
	}
	c.rec, c.version, c.loaded = next, v, true
	if c.AfterSave != nil {
		actx, cancel := c.ctx(ctx)
		err := c.AfterSave(actx, next)
		cancel()
		if err != nil {
			return err
		}
	}
	if c.pending(next) {
		if err := c.handOver(ctx); err != nil && c.OnHandOverError != nil {
			c.OnHandOverError(err)
		}
	}
	return nil
}

// IsFenced reports whether a Save found the record owned elsewhere.
func (c *Cell[T, P]) IsFenced() bool { return c.fenced }

func (c *Cell[T, P]) pending(rec P) bool {
	return c.Pending != nil && len(*c.Pending(rec)) > 0
}

// handOver gives the held record's pending effects to the outbox, then writes the record without them. A
// failure leaves them in the record; the next Save or activation hands them over again. A conflict on the
// clearing write fences the cell like a failed Save.
func (c *Cell[T, P]) handOver(ctx context.Context) error {
	sctx, cancel := c.ctx(ctx)
	defer cancel()
	if err := c.Outbox.Add(sctx, *c.Pending(c.rec)...); err != nil {
		return fmt.Errorf("hand effects of %s to the outbox: %w", c.Key, err)
	}
	// Clear them on a shallow copy: the held record may be shared with a reader of the previous state.
	cleared := new(T)
	*cleared = *c.rec
	*c.Pending(cleared) = nil
	v, err := Write(sctx, c.Store, c.Key, c.version, P(cleared))
	if err != nil {
		if errors.Is(err, persistence.ErrVersionMismatch) {
			c.fenced = true
			return fmt.Errorf("%w (%s)", ErrFenced, c.Key)
		}
		return err
	}
	c.rec, c.version = cleared, v
	return nil
}
