package actors

import (
	"context"
	"fmt"

	"filigrane/actors/durable"
	"filigrane/actors/jobstate"
	"filigrane/actors/outbox"
	"filigrane/persistence"
)

// Outbox kinds of the announcements a job's outcome causes (actors/outbox). The payload of each is the job's
// request id: the handler reads the job record, which no longer changes once the outcome is committed, to
// build the webhook event, the bucket upload or the batch notice. The effect's Key is the webhook, storage
// destination or batch id, so that one endpoint's effects go out in order where possible.
const (
	OutboxJobWebhook = "job.webhook"
	OutboxJobStorage = "job.storage"
	OutboxJobBatch   = "job.batch"
)

// JobAnnouncement is the outbox effect of announcement k of the committed job r. Its id is derived from the
// request id and the kind, so handing it over again after a crash never makes a second effect.
func JobAnnouncement(r *jobstate.Record, k jobstate.EffectKind) (outbox.Effect, error) {
	var kind, key string
	switch k {
	case jobstate.EffectNotifyWebhook:
		kind, key = OutboxJobWebhook, r.WebhookID
	case jobstate.EffectDeliverStorage:
		kind, key = OutboxJobStorage, r.StorageDestinationID
	case jobstate.EffectNotifyBatch:
		kind, key = OutboxJobBatch, r.BatchID
	default:
		return outbox.Effect{}, fmt.Errorf("job %s: %s is not an announcement", r.RequestID, k)
	}
	return outbox.Effect{ID: outbox.EffectID("fx_", r.RequestID, kind), Kind: kind, Key: key,
		Payload: []byte(r.RequestID), Created: r.CompletedAt}, nil
}

// ReadJob reads the stored record of job requestID for an outbox handler of a job announcement (the payload
// is the request id). It reads the Store directly, not through the job actor: a committed job's record no
// longer changes. persistence.ErrNotFound (wrapped) when there is none, or only a void record.
func ReadJob(ctx context.Context, store persistence.Store, requestID string) (*jobstate.Record, error) {
	rec, _, err := durable.Read[jobstate.Record](ctx, store, jobKey(requestID))
	if err == nil && rec.IsVoid() {
		return nil, fmt.Errorf("job %s was voided before it was created: %w", requestID, persistence.ErrNotFound)
	}
	return rec, err
}
