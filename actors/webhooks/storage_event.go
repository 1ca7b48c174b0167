package webhooks

import (
	"time"

	"filigrane/actors/outbox"
)

// StorageDelivery is the data of a storage.delivery.succeeded or .failed event (the fields Etchv's SDKs
// read, plus the object's key and ETag).
type StorageDelivery struct {
	DeliveryID    string  `json:"delivery_id"`
	AssetID       *string `json:"asset_id"`
	RequestID     string  `json:"request_id"`
	DestinationID string  `json:"destination_id"`
	Status        string  `json:"status"`
	ErrorCode     *string `json:"error_code"`
	Error         *string `json:"error"`
	URI           string  `json:"uri"`
	PublicURL     *string `json:"public_url"`
	Key           string  `json:"key"`
	ETag          *string `json:"etag"`
	Attempts      int     `json:"attempts"`
}

// StorageDeliveryEffect is the outbox effect (kind EffectKind, key the endpoint) of the final event of storage
// delivery d for endpoint endpointID of orgID: storage.delivery.succeeded when stored, else .failed. Its id
// comes from the delivery id and the type, so announcing the same outcome again (a handler re-run after a
// crash) makes no second event.
func StorageDeliveryEffect(orgID, endpointID string, d StorageDelivery, stored bool, at time.Time) (outbox.Effect, error) {
	t := EventStorageFailed
	if stored {
		t = EventStorageSucceeded
	}
	ev, err := newEvent(d.DeliveryID, t, at, d)
	if err != nil {
		return outbox.Effect{}, err
	}
	_, payload, err := NewEnvelope(orgID, endpointID, d.RequestID, ev)
	if err != nil {
		return outbox.Effect{}, err
	}
	return outbox.Effect{ID: outbox.EffectID("fx_", d.DeliveryID, t), Kind: EffectKind, Key: endpointID,
		Payload: payload, Created: at}, nil
}
