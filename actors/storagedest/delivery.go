package storagedest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"time"

	"filigrane/actors/durable"
	"filigrane/persistence"
)

// Delivery statuses (Etchv's names).
const (
	DeliveryQueued   = "queued"   // the job succeeded; the first attempt has not run yet (no record exists)
	DeliveryRetrying = "retrying" // an attempt failed; the outbox tries again on the schedule
	DeliveryStored   = "stored"   // the object is in the bucket
	DeliveryFailed   = "failed"   // given up: permanent refusal, or the schedule ran out
)

// Delivery is the state of one job output's delivery (Store key storage/delivery/<delivery id>). The outbox
// entry holds the attempt log; this record holds what the receipt, the asset and the customer read.
type Delivery struct {
	ID            string     `msgpack:"id"`
	OrgID         string     `msgpack:"org_id"`
	RequestID     string     `msgpack:"request_id"`
	AssetID       string     `msgpack:"asset_id"`
	DestinationID string     `msgpack:"destination_id"`
	Bucket        string     `msgpack:"bucket"`
	Key           string     `msgpack:"key"` // the full object key, prefix included
	ETag          string     `msgpack:"etag,omitempty"`
	Status        string     `msgpack:"status"`
	Attempts      int        `msgpack:"attempts"`
	LastError     string     `msgpack:"last_error,omitempty"`
	ErrorCode     string     `msgpack:"error_code,omitempty"` // a Code* value with LastError
	CreatedAt     time.Time  `msgpack:"created_at"`
	UpdatedAt     time.Time  `msgpack:"updated_at"`
	DeliveredAt   *time.Time `msgpack:"delivered_at,omitempty"`
	// EffectID is the outbox effect of a move (MoveEffect); empty for a job's own delivery, whose effect id
	// derives from the request id.
	EffectID string `msgpack:"effect_id,omitempty"`
}

// Move is the payload of a "move an earlier result to my storage" delivery: the asset's hosted file copied
// into a destination. It travels as JSON in a job.storage effect (a job's own delivery carries a bare request
// id), so both kinds of delivery share the destination's index and handler.
type Move struct {
	DeliveryID    string `json:"delivery_id"`
	OrgID         string `json:"org_id"`
	AssetID       string `json:"asset_id"`
	DestinationID string `json:"destination_id"`
	Key           string `json:"key"` // under the destination's prefix
}

// MoveDeliveryID is the delivery id of moving asset into destination under key: "std_" + SHA-256 of the
// three, so asking for the same move again names the same delivery.
func MoveDeliveryID(assetID, destinationID, key string) string {
	sum := sha256.Sum256([]byte("filigrane/move\x00" + assetID + "\x00" + destinationID + "\x00" + key))
	return "std_" + hex.EncodeToString(sum[:])
}

// DefaultMoveKey is the object key of a moved asset whose request named none: <asset id>/<file name>.
func DefaultMoveKey(assetID, filename string) string { return DefaultKey(assetID, filename) }

// SchemaVersion implements persistence.Record.
func (*Delivery) SchemaVersion() uint16 { return 1 }

// StagingWindow is how long after its job a delivery is retried (the outbox schedule of internal/node ends
// within it); the output stays staged at least that long unless its asset is deleted or the delivery stored
// it (then the staged copy is removed: actors.Assets.EndStaging).
const StagingWindow = 30 * 24 * time.Hour

func deliveryKey(id string) []byte { return []byte("storage/delivery/" + id) }

// GetDelivery reads a delivery; ErrNotFound when there is none (yet).
func (l *Library) GetDelivery(ctx context.Context, id string) (*Delivery, error) {
	d, _, err := durable.Read[Delivery](ctx, l.Store, deliveryKey(id))
	if errors.Is(err, persistence.ErrNotFound) {
		return nil, ErrNotFound
	}
	return d, err
}

// RecordDelivery creates or updates the delivery record with fn (which gets a copy to change, seeded with
// seed on the first write). A stored delivery never goes back to another status.
func (l *Library) RecordDelivery(ctx context.Context, seed Delivery, fn func(d *Delivery)) (*Delivery, error) {
	return durable.Update(ctx, l.Store, deliveryKey(seed.ID), 0, func(cur *Delivery) (*Delivery, error) {
		next := seed
		if cur != nil {
			if cur.Status == DeliveryStored {
				return nil, nil
			}
			next = *cur
		}
		fn(&next)
		return &next, nil
	})
}
