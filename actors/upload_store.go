package actors

import (
	"context"
	"errors"
	"fmt"
	"time"

	"filigrane/internal/clock"
	"filigrane/persistence"
)

// Storage keys of uploads (docs/ARCHITECTURE.md).
const (
	prefixUpload = "upload/" // upload/<upload_id> -> Upload
	// prefixUploadDue indexes uploads by the time the sweeper must look at them again:
	// uploads/due/<unix seconds, 20 digits>/<upload_id> -> empty.
	prefixUploadDue = "uploads/due/"
)

func uploadKey(id string) []byte { return []byte(prefixUpload + id) }

func uploadDueKey(at time.Time, id string) []byte {
	return []byte(fmt.Sprintf("%s%020d/%s", prefixUploadDue, at.Unix(), id))
}

// Uploads reads and writes upload records with compare-and-set. Uploads are small records changed by short
// requests (create, receive, claim, settle), so they are written directly from the edge with optimistic
// concurrency instead of through an actor: a lost race re-reads and re-applies the command, and every
// command is idempotent by its request id.
type Uploads struct {
	Store persistence.Store
	Clock clock.Clock
}

// maxUploadRetries bounds compare-and-set retries of one command; contention on one upload is a handful of
// requests at most.
const maxUploadRetries = 16

// Create stores a new upload record (create-only) and indexes it for the sweeper at its expiry.
func (r Uploads) Create(ctx context.Context, u *Upload) error {
	b, err := persistence.Marshal(u)
	if err != nil {
		return fmt.Errorf("encode upload %s: %w", u.ID, err)
	}
	// The index entry first: an upload record without one would never be swept; an entry without a record is
	// dropped by the sweeper.
	if _, err := r.Store.CompareAndSet(ctx, uploadDueKey(u.ExpiresAt, u.ID), persistence.NoVersion, nil); err != nil && !errors.Is(err, persistence.ErrVersionMismatch) {
		return fmt.Errorf("index upload %s: %w", u.ID, err)
	}
	if _, err := r.Store.CompareAndSet(ctx, uploadKey(u.ID), persistence.NoVersion, b); err != nil {
		return fmt.Errorf("save upload %s: %w", u.ID, err)
	}
	return nil
}

// Load returns the upload and the version it was read at; ErrUploadNotFound when there is none.
func (r Uploads) Load(ctx context.Context, id string) (*Upload, persistence.Version, error) {
	it, err := r.Store.Get(ctx, uploadKey(id))
	if errors.Is(err, persistence.ErrNotFound) {
		return nil, "", ErrUploadNotFound
	}
	if err != nil {
		return nil, "", fmt.Errorf("load upload %s: %w", id, err)
	}
	var u Upload
	if err := persistence.Unmarshal(it.Value, &u); err != nil {
		return nil, "", fmt.Errorf("decode upload %s: %w", id, err)
	}
	return &u, it.Version, nil
}

// Update applies fn to a copy of the upload at the clock's time and writes it when fn changed it (its
// Revision moved). On a compare-and-set conflict it reloads and applies fn again. An error from fn is
// returned as is with the record as loaded, and nothing is written.
func (r Uploads) Update(ctx context.Context, id string, fn func(u *Upload, now time.Time) error) (*Upload, error) {
	for range maxUploadRetries {
		cur, ver, err := r.Load(ctx, id)
		if err != nil {
			return nil, err
		}
		next := cur.Clone()
		if err := fn(next, r.Clock.Now()); err != nil {
			return cur, err
		}
		if next.Revision == cur.Revision {
			return next, nil
		}
		b, err := persistence.Marshal(next)
		if err != nil {
			return nil, fmt.Errorf("encode upload %s: %w", id, err)
		}
		_, err = r.Store.CompareAndSet(ctx, uploadKey(id), ver, b)
		if errors.Is(err, persistence.ErrVersionMismatch) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("save upload %s: %w", id, err)
		}
		return next, nil
	}
	return nil, fmt.Errorf("save upload %s: %d conflicting writers: %w", id, maxUploadRetries, persistence.ErrVersionMismatch)
}
