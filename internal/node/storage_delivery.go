package node

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"filigrane/actors"
	"filigrane/actors/jobstate"
	"filigrane/actors/outbox"
	"filigrane/actors/storagedest"
	"filigrane/internal/egress"
	"filigrane/persistence"
)

// storageSecretFile holds the development key that seals storage destination secrets when none is
// configured (Config.StorageSecretKey). A cluster must configure one key for every node instead.
const storageSecretFile = "storage-secret.key"

// storageSealer returns the sealer of destination secrets: the configured key, else the data directory's
// generated key file (created 0600 on first use).
func storageSealer(dataDir string, key []byte) (*storagedest.Sealer, error) {
	if len(key) > 0 {
		return storagedest.NewSealer(key)
	}
	path := filepath.Join(dataDir, storageSecretFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		b = make([]byte, 32)
		if _, err := rand.Read(b); err != nil {
			return nil, err
		}
		if err := os.MkdirAll(dataDir, 0o750); err != nil {
			return nil, err
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return nil, fmt.Errorf("create %s: %w", path, err)
		}
		if _, err := f.Write(b); err != nil {
			_ = f.Close()
			return nil, err
		}
		if err := f.Close(); err != nil {
			return nil, err
		}
	} else if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return storagedest.NewSealer(b)
}

// StorageSchedule is the retry schedule of storage deliveries: the webhook schedule (30 s, 2 min, 10 min,
// 30 min, 1 h, 2 h, 4 h, 6 h, 8 h), then every 8 h until 30 days after the first attempt.
func StorageSchedule() []time.Duration {
	s := []time.Duration{30 * time.Second, 2 * time.Minute, 10 * time.Minute, 30 * time.Minute, time.Hour,
		2 * time.Hour, 4 * time.Hour, 6 * time.Hour, 8 * time.Hour}
	var total time.Duration
	for _, d := range s {
		total += d
	}
	for total+8*time.Hour <= 30*24*time.Hour {
		s = append(s, 8*time.Hour)
		total += 8 * time.Hour
	}
	return s
}

// storageDelivery delivers the job.storage outbox effects: the output of a succeeded embed into the
// destination named by the job, with a conditional create, recorded in the delivery record.
type storageDelivery struct {
	store    persistence.Store
	blobs    persistence.Blobs
	lib      *storagedest.Library
	now      func() time.Time
	schedule []time.Duration
}

func (sd *storageDelivery) deliver(ctx context.Context, e outbox.Effect, attempt int) error {
	rec, err := actors.ReadJob(ctx, sd.store, string(e.Payload))
	if errors.Is(err, persistence.ErrNotFound) {
		return outbox.Permanent(fmt.Errorf("job %s no longer exists", e.Payload))
	}
	if err != nil {
		return err
	}
	if rec.Status != jobstate.StatusSucceeded || rec.StorageDestinationID == "" {
		return outbox.Permanent(fmt.Errorf("job %s has no output to deliver", rec.RequestID))
	}
	now := sd.now()
	seed := storagedest.Delivery{ID: rec.StorageDeliveryID(), OrgID: rec.OrgID, RequestID: rec.RequestID,
		AssetID: rec.Output.AssetID, DestinationID: rec.StorageDestinationID, Status: storagedest.DeliveryRetrying, CreatedAt: now}
	key := rec.StorageKey
	if key == "" {
		key = storagedest.DefaultKey(rec.RequestID, rec.Output.Filename)
	}
	fail := func(err error, permanent bool) error {
		status := storagedest.DeliveryRetrying
		if permanent || attempt > len(sd.schedule) {
			status = storagedest.DeliveryFailed
		}
		if _, rerr := sd.lib.RecordDelivery(ctx, seed, func(d *storagedest.Delivery) {
			d.Status, d.LastError, d.Attempts, d.UpdatedAt = status, err.Error(), attempt, now
		}); rerr != nil {
			return fmt.Errorf("%v (and recording it: %w)", err, rerr)
		}
		outbox.Note(ctx, err.Error())
		if permanent {
			return outbox.Permanent(err)
		}
		return err
	}
	dest, err := sd.lib.Get(ctx, rec.OrgID, rec.StorageDestinationID)
	if errors.Is(err, storagedest.ErrNotFound) {
		return fail(fmt.Errorf("storage destination %s was deleted", rec.StorageDestinationID), true)
	}
	if err != nil {
		return err
	}
	seed.Bucket, seed.Key = dest.Bucket, dest.ObjectKey(key)
	body, err := sd.blobs.Get(ctx, rec.Output.BlobKey, 0, -1)
	if errors.Is(err, persistence.ErrNotFound) {
		return fail(errors.New("the result is no longer staged (its retention passed)"), true)
	}
	if err != nil {
		return err
	}
	defer func() { _ = body.Close() }()
	etag, err := sd.lib.Put(ctx, dest, key, rec.RequestID, body, rec.Output.Size, rec.Output.ContentType)
	if err != nil {
		// An existing object of someone else is never overwritten, and a refused target will not become
		// reachable by waiting: both are final. Everything else (down, 5xx, credentials) may be fixed.
		return fail(err, errors.Is(err, storagedest.ErrExists) || errors.Is(err, egress.ErrRefused))
	}
	_, err = sd.lib.RecordDelivery(ctx, seed, func(d *storagedest.Delivery) {
		t := now
		d.Status, d.ETag, d.DeliveredAt, d.LastError, d.Attempts, d.UpdatedAt = storagedest.DeliveryStored, etag, &t, "", attempt, now
		d.Bucket, d.Key = seed.Bucket, seed.Key
	})
	return err
}
