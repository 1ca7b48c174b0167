package actors

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"filigrane/persistence"
)

// UploadRecordRetention is how long an upload record stays readable after the upload's 24 hours, so that
// GET /uploads/{id} and replays with the original Idempotency-Key still find it (the longest idempotency
// window of the API, 30 days).
const UploadRecordRetention = 30 * 24 * time.Hour

// SweepUploads is the sweeper's upload pass. For every upload whose 24 hours are over it marks an unused
// upload expired and deletes its file; it deletes the file of a rejected upload, and of a consumed upload
// that no job owns (a synchronous detection). A job that consumed an upload owns its file from then on
// (its input: a source asset, or purged with its result). Records go UploadRecordRetention later.
// It reports how many uploads it handled. Every step is idempotent, so a crash mid-pass is harmless.
func (s Sweeper) SweepUploads(ctx context.Context) (swept int, err error) {
	now := s.Clock.Now()
	end := fmt.Sprintf("%s%020d/", prefixUploadDue, now.Unix()+1)
	uploads := Uploads{Store: s.Store, Clock: s.Clock}
	err = scanAll(ctx, s.Store, []byte(prefixUploadDue), func(it persistence.Item) error {
		if string(it.Key) >= end {
			return errStopScan
		}
		rest := strings.TrimPrefix(string(it.Key), prefixUploadDue)
		_, id, ok := strings.Cut(rest, "/")
		if !ok {
			return s.dropDue(ctx, it)
		}
		if err := s.sweepUpload(ctx, uploads, id, now); err != nil {
			if errors.Is(err, ErrUploadNotFound) {
				return s.dropDue(ctx, it)
			}
			s.Logger.Warn().Err(err).Str("upload", id).Msg("sweep upload; retried next pass")
			return nil
		}
		swept++
		return s.dropDue(ctx, it)
	})
	if errors.Is(err, errStopScan) {
		err = nil
	}
	return swept, err
}

func (s Sweeper) dropDue(ctx context.Context, it persistence.Item) error {
	if err := s.Store.Delete(ctx, it.Key, it.Version); err != nil && !errors.Is(err, persistence.ErrVersionMismatch) {
		return fmt.Errorf("drop upload index entry: %w", err)
	}
	return nil
}

// sweepUpload handles one due upload; the caller drops the due entry when it returns nil.
func (s Sweeper) sweepUpload(ctx context.Context, uploads Uploads, id string, now time.Time) error {
	u, ver, err := uploads.Load(ctx, id)
	if err != nil {
		return err
	}
	if now.Before(u.ExpiresAt) {
		return nil // indexed early; the entry for its expiry is still there
	}
	if u.FileDeleted || u.BlobKey == "" || u.Status == UploadConsumed {
		// Past the file step; drop the record once its retention is over.
		if !now.Before(u.ExpiresAt.Add(UploadRecordRetention)) {
			if err := s.Store.Delete(ctx, uploadKey(id), ver); err != nil && !errors.Is(err, persistence.ErrVersionMismatch) {
				return fmt.Errorf("delete upload record %s: %w", id, err)
			}
			return nil
		}
	}
	deleteFile := u.BlobKey != "" && !u.FileDeleted
	if deleteFile && u.Status == UploadConsumed {
		owned, err := s.jobOwns(ctx, u.RequestID)
		if err != nil {
			return err
		}
		deleteFile = !owned
	}
	if deleteFile {
		if err := s.Blobs.Delete(ctx, u.BlobKey); err != nil {
			return fmt.Errorf("delete file of upload %s: %w", id, err)
		}
	}
	if _, err := uploads.Update(ctx, id, func(u *Upload, now time.Time) error {
		if err := u.Expire(now); err != nil {
			return err
		}
		if deleteFile {
			u.MarkFileDeleted()
		}
		return nil
	}); err != nil {
		return err
	}
	// Come back when the record's retention is over.
	if now.Before(u.ExpiresAt.Add(UploadRecordRetention)) {
		at := u.ExpiresAt.Add(UploadRecordRetention)
		if _, err := s.Store.CompareAndSet(ctx, uploadDueKey(at, id), persistence.NoVersion, nil); err != nil && !errors.Is(err, persistence.ErrVersionMismatch) {
			return fmt.Errorf("index upload %s for deletion: %w", id, err)
		}
	}
	return nil
}

// jobOwns reports whether a job record (not a void one) exists for requestID.
func (s Sweeper) jobOwns(ctx context.Context, requestID string) (bool, error) {
	if requestID == "" {
		return false, nil
	}
	_, err := ReadJob(ctx, s.Store, requestID)
	if errors.Is(err, persistence.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("look up job %s: %w", requestID, err)
	}
	return true, nil
}
