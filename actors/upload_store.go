package actors

import (
	"context"
	"errors"
	"fmt"
	"time"

	"filigrane/actors/durable"
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
	// The index entry first: an upload record without one would never be swept; an entry without a record is
	// dropped by the sweeper.
	if _, err := r.Store.CompareAndSet(ctx, uploadDueKey(u.ExpiresAt, u.ID), persistence.NoVersion, nil); err != nil && !errors.Is(err, persistence.ErrVersionMismatch) {
		return fmt.Errorf("index upload %s: %w", u.ID, err)
	}
	if _, err := durable.Write(ctx, r.Store, uploadKey(u.ID), persistence.NoVersion, u); err != nil {
		return fmt.Errorf("upload %s: %w", u.ID, err)
	}
	return nil
}

// Load returns the upload and the version it was read at; ErrUploadNotFound when there is none.
func (r Uploads) Load(ctx context.Context, id string) (*Upload, persistence.Version, error) {
	u, v, err := durable.Read[Upload](ctx, r.Store, uploadKey(id))
	if errors.Is(err, persistence.ErrNotFound) {
		return nil, "", ErrUploadNotFound
	}
	if err != nil {
		return nil, "", fmt.Errorf("upload %s: %w", id, err)
	}
	return u, v, nil
}

// Update applies fn to a copy of the upload at the clock's time and writes it when fn changed it (its
// Revision moved). On a compare-and-set conflict it reloads and applies fn again. An error from fn is
// returned as is with the record as loaded, and nothing is written.
func (r Uploads) Update(ctx context.Context, id string, fn func(u *Upload, now time.Time) error) (*Upload, error) {
	u, err := durable.Update(ctx, r.Store, uploadKey(id), maxUploadRetries, func(cur *Upload) (*Upload, error) {
		if cur == nil {
			return nil, ErrUploadNotFound
		}
		next := cur.Clone()
		if err := fn(next, r.Clock.Now()); err != nil {
			return nil, err
		}
		if next.Revision == cur.Revision {
			return nil, nil
		}
		return next, nil
	})
	if err != nil && u == nil && !errors.Is(err, ErrUploadNotFound) {
		return nil, fmt.Errorf("upload %s: %w", id, err)
	}
	return u, err
}
