package node

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"filigrane/actors"
	"filigrane/actors/jobstate"
	"filigrane/actors/outbox"
	"filigrane/actors/storagedest"
	"filigrane/actors/webhooks"
	"filigrane/internal/egress"
	"filigrane/internal/hiddenchar"
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

// storageDelivery delivers the job.storage outbox effects: the output of a succeeded embed (or a result moved
// later) into its destination, with a conditional create, recorded in the delivery record. Once the record
// says stored, the hosted copy of the result is removed (Assets.EndStaging); an attempt that finds the
// delivery stored already (a crash after the record) only repeats that removal and the event, so a kill
// between the two still removes it, and the copy is never removed before the record says stored. The final
// outcome (stored, or failed for good) is announced as a storage.delivery.* event to the webhook of the
// result's job, or for a batch item to the batch's, through the webhooks outbox.
type storageDelivery struct {
	store    persistence.Store
	blobs    persistence.Blobs
	lib      *storagedest.Library
	outbox   outbox.Outbox
	now      func() time.Time
	schedule []time.Duration
}

// codedError is a delivery failure with its error_code.
type codedError struct {
	code string
	err  error
}

func (e *codedError) Error() string { return e.err.Error() }
func (e *codedError) Unwrap() error { return e.err }

func errorCode(err error) string {
	var se *storagedest.StepError
	var ce *codedError
	switch {
	case errors.As(err, &ce):
		return ce.code
	case errors.As(err, &se) && se.Code != "":
		return se.Code
	}
	return storagedest.CodeWriteFailed
}

// target is what one delivery writes where.
type target struct {
	seed        storagedest.Delivery // id, organization, request, asset, destination (and a move's effect id)
	assetID     string               // the result whose hosted copy ends once stored; empty: none
	key         string               // under the destination's prefix
	owner       string               // the object's owner metadata: recognises our own earlier write
	blobKey     string
	size        int64
	contentType string
	conflict    bool // a move of a result that belongs to another delivery: fails at once
	// announce sends the final event; nil when the delivery has none.
	announce func(ctx context.Context, d *storagedest.Delivery, now time.Time) error
}

func (sd *storageDelivery) deliver(ctx context.Context, e outbox.Effect, attempt int) error {
	if len(e.Payload) > 0 && e.Payload[0] == '{' {
		return sd.deliverMove(ctx, e, attempt)
	}
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
	key := rec.StorageKey
	if key == "" {
		key = storagedest.DefaultKey(rec.RequestID, rec.Output.Filename)
	}
	return sd.run(ctx, attempt, target{
		seed: storagedest.Delivery{ID: rec.StorageDeliveryID(), OrgID: rec.OrgID, RequestID: rec.RequestID,
			AssetID: rec.Output.AssetID, DestinationID: rec.StorageDestinationID},
		key: key, owner: rec.RequestID, blobKey: rec.Output.BlobKey, size: rec.Output.Size, contentType: rec.Output.ContentType,
		assetID: rec.Output.AssetID,
		announce: func(ctx context.Context, d *storagedest.Delivery, now time.Time) error {
			return sd.announce(ctx, rec, d, now)
		},
	})
}

// deliverMove moves an earlier result into a destination (POST /storage/destinations/{id}/deliveries): the
// asset's hosted file is copied, and once stored the hosted copy goes, as for a job's own delivery. The move
// claims the asset (the request did already; a move whose effect outlived a crash before its claim claims it
// here), so a result has one destination. Its final event goes where its job's would: the job's webhook, or
// its batch's.
func (sd *storageDelivery) deliverMove(ctx context.Context, e outbox.Effect, attempt int) error {
	var m storagedest.Move
	if err := json.Unmarshal(e.Payload, &m); err != nil {
		return outbox.Permanent(fmt.Errorf("effect %s: move payload: %w", e.ID, err))
	}
	t := target{seed: storagedest.Delivery{ID: m.DeliveryID, OrgID: m.OrgID, AssetID: m.AssetID,
		DestinationID: m.DestinationID, EffectID: e.ID}, key: m.Key, owner: m.AssetID, assetID: m.AssetID}
	assets := actors.Assets{Store: sd.store}
	as, _, err := assets.Get(ctx, m.AssetID)
	switch {
	case errors.Is(err, persistence.ErrNotFound) || err == nil && as.OrgID != m.OrgID:
		// the run fails it: result_unavailable
	case err != nil:
		return err
	default:
		t.seed.RequestID = as.RequestID
		if rec, err := actors.ReadJob(ctx, sd.store, as.RequestID); err == nil {
			t.announce = func(ctx context.Context, d *storagedest.Delivery, now time.Time) error {
				return sd.announce(ctx, rec, d, now)
			}
		} else if !errors.Is(err, persistence.ErrNotFound) {
			return err
		}
		if _, err := assets.ClaimDelivery(ctx, m.OrgID, m.AssetID, m.DestinationID, m.DeliveryID); errors.Is(err, actors.ErrAssetHasDestination) {
			t.conflict = true
			break
		} else if err != nil && !errors.Is(err, actors.ErrAssetNotFound) {
			return err
		}
		if as.FileAvailable(sd.now()) {
			t.blobKey, t.size, t.contentType = as.BlobKey, as.SizeBytes, as.ContentType
		}
	}
	return sd.run(ctx, attempt, t)
}

// run makes one attempt of delivery t and records its outcome.
func (sd *storageDelivery) run(ctx context.Context, attempt int, t target) error {
	now := sd.now()
	seed := t.seed
	seed.Status, seed.CreatedAt = storagedest.DeliveryRetrying, now
	fail := func(err error, permanent bool) error {
		status := storagedest.DeliveryRetrying
		if permanent || attempt > len(sd.schedule) {
			status = storagedest.DeliveryFailed
		}
		d, rerr := sd.lib.RecordDelivery(ctx, seed, func(d *storagedest.Delivery) {
			// err may quote what the S3 server chose: stored escaped and bounded, as the API, the CLI,
			// the console and the storage.delivery.failed event all show it.
			d.Status, d.LastError, d.ErrorCode, d.Attempts, d.UpdatedAt = status, hiddenchar.Remote(err.Error(), hiddenchar.RemoteLimit), errorCode(err), attempt, now
			if d.Bucket == "" {
				d.Bucket, d.Key = seed.Bucket, seed.Key
			}
		})
		if rerr != nil {
			return fmt.Errorf("%v (and recording it: %w)", err, rerr)
		}
		outbox.Note(ctx, err.Error())
		if status == storagedest.DeliveryFailed && d.Status == storagedest.DeliveryFailed && t.announce != nil {
			if aerr := t.announce(ctx, d, now); aerr != nil {
				return aerr // the next attempt fails the same way and announces again
			}
		}
		if permanent {
			return outbox.Permanent(err)
		}
		return err
	}
	if cur, err := sd.lib.GetDelivery(ctx, seed.ID); err == nil && cur.Status == storagedest.DeliveryStored {
		return sd.stored(ctx, t, cur, now)
	} else if err != nil && !errors.Is(err, storagedest.ErrNotFound) {
		return err
	}
	if t.conflict {
		return fail(&codedError{storagedest.CodeResultHasDestination, errors.New("the result already has another storage destination (a result has one destination and key)")}, true)
	}
	dest, err := sd.lib.Get(ctx, seed.OrgID, seed.DestinationID)
	if errors.Is(err, storagedest.ErrNotFound) {
		return fail(&codedError{storagedest.CodeDestinationDeleted, fmt.Errorf("storage destination %s was deleted", seed.DestinationID)}, true)
	}
	if err != nil {
		return err
	}
	seed.Bucket, seed.Key = dest.Bucket, dest.ObjectKey(t.key)
	unstaged := &codedError{storagedest.CodeResultUnavailable, errors.New("the result is no longer staged (its asset was deleted, its file expired or is stored elsewhere)")}
	if t.blobKey == "" {
		return fail(unstaged, true)
	}
	body, err := sd.blobs.Get(ctx, t.blobKey, 0, -1)
	if errors.Is(err, persistence.ErrNotFound) {
		return fail(unstaged, true)
	}
	if err != nil {
		return err
	}
	defer func() { _ = body.Close() }()
	etag, err := sd.lib.Put(ctx, dest, t.key, t.owner, body, t.size, t.contentType)
	if err != nil {
		// An existing object of someone else is never overwritten, and a refused target will not become
		// reachable by waiting: both are final. Everything else (down, 5xx, credentials) may be fixed.
		return fail(err, errors.Is(err, storagedest.ErrExists) || errors.Is(err, egress.ErrRefused))
	}
	d, err := sd.lib.RecordDelivery(ctx, seed, func(d *storagedest.Delivery) {
		t := now
		d.Status, d.ETag, d.DeliveredAt, d.LastError, d.ErrorCode, d.Attempts, d.UpdatedAt = storagedest.DeliveryStored, etag, &t, "", "", attempt, now
		d.Bucket, d.Key = seed.Bucket, seed.Key
	})
	if err != nil {
		return err
	}
	return sd.stored(ctx, t, d, now)
}

// stored finishes a stored delivery: the result's hosted copy goes, then the event. A re-run after a crash
// comes here again from the record: the removal repeats harmlessly and the event keeps its id (one event).
// The event comes last so that a receiver reading the asset finds staging_deleted_at set.
func (sd *storageDelivery) stored(ctx context.Context, t target, d *storagedest.Delivery, now time.Time) error {
	if t.assetID != "" {
		if _, err := (actors.Assets{Store: sd.store, Blobs: sd.blobs}).EndStaging(ctx, t.assetID, d.ID, now); err != nil {
			return err
		}
	}
	if t.announce == nil {
		return nil
	}
	return t.announce(ctx, d, now)
}

// announce hands the delivery's final event to the webhooks outbox: to the job's webhook, or a batch item's
// batch's webhook; nothing when there is none.
func (sd *storageDelivery) announce(ctx context.Context, rec *jobstate.Record, d *storagedest.Delivery, now time.Time) error {
	endpoint := rec.WebhookID
	if endpoint == "" && rec.BatchID != "" {
		b, _, err := actors.Batches{Store: sd.store}.Load(ctx, rec.BatchID)
		if err != nil && !errors.Is(err, persistence.ErrNotFound) {
			return fmt.Errorf("read batch %s for its webhook: %w", rec.BatchID, err)
		}
		if err == nil {
			endpoint = b.WebhookID
		}
	}
	if endpoint == "" {
		return nil
	}
	data := webhooks.StorageDelivery{DeliveryID: d.ID, AssetID: optionalString(d.AssetID), RequestID: d.RequestID,
		DestinationID: d.DestinationID, Status: d.Status, ErrorCode: optionalString(d.ErrorCode),
		Error: optionalString(d.LastError), URI: "s3://" + d.Bucket + "/" + d.Key, Key: d.Key,
		ETag: optionalString(d.ETag), Attempts: d.Attempts}
	fx, err := webhooks.StorageDeliveryEffect(rec.OrgID, endpoint, data, d.Status == storagedest.DeliveryStored, now)
	if err != nil {
		return err
	}
	return sd.outbox.Add(ctx, fx)
}

func optionalString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
