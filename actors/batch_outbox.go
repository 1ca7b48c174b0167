package actors

import (
	"context"
	"errors"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"filigrane/actors/batchstate"
	"filigrane/actors/outbox"
)

// OutboxBatchWebhook is the outbox kind of a batch's final webhook event (watermark.batch.completed, failed or
// cancelled). The effect's id is the event's id (batchstate.EventID), its Key the webhook id and its payload
// the batch id: the handler reads the ended batch record, which no longer changes, to build the event.
const OutboxBatchWebhook = "batch.webhook"

// BatchAnnouncement is the outbox effect of event e of the ended batch r.
func BatchAnnouncement(r *batchstate.Record, e batchstate.Event) outbox.Effect {
	return outbox.Effect{ID: e.ID, Kind: OutboxBatchWebhook, Key: r.WebhookID, Payload: []byte(r.BatchID), Created: e.At}
}

// handOver gives the record's pending events to the outbox (create-only by the event id, so a repeat after a
// crash is harmless) and then marks them delivered in the record. A batch without a webhook marks them
// settled without an effect. A failure leaves them pending: the batch stays in the active index (drive drops
// it only once no event is pending) and the sweeper's next tick hands them over again. False when events are
// still pending.
func (a *batchActor) handOver(ctx actor.Context, c context.Context) bool {
	pending := a.rec.PendingEvents()
	if len(pending) == 0 {
		return true
	}
	if a.rec.WebhookID != "" {
		if a.deps.Outbox.Store == nil {
			a.deps.Logger.Error().Err(errNoOutbox).Str("batch", a.id).Msg("hand over batch events")
			return false
		}
		for _, e := range pending {
			if err := a.deps.Outbox.Add(c, BatchAnnouncement(a.rec, e)); err != nil {
				a.deps.Logger.Warn().Err(err).Str("batch", a.id).Str("event", e.ID).Msg("hand over batch event")
				return false
			}
		}
	}
	ok, _ := a.update(ctx, func(r *batchstate.Record, _ time.Time) error {
		for _, e := range pending {
			r.MarkDelivered(e.ID)
		}
		return nil
	})
	return ok
}

// errNoOutbox: the node has no outbox, so a batch's events cannot be handed over.
var errNoOutbox = errors.New("no outbox on this node")
