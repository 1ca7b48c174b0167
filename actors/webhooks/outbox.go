package webhooks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"filigrane/actors"
	"filigrane/actors/batchstate"
	"filigrane/actors/outbox"
	"filigrane/persistence"
)

// JobHandler is the outbox handler of actors.OutboxJobWebhook: the job actor hands over the committed job's
// request id (in the same settlement as its outcome); each attempt reads the job record (it no longer
// changes), builds its final event (the same id and bytes every time) and posts it. A deleted or disabled
// endpoint, or a job record that is gone, ends the delivery (outbox.Permanent).
func JobHandler(store persistence.Store, d *Deliverer) outbox.Handler {
	return outbox.Handler{
		Schedule: Schedule,
		Timeout:  AttemptTimeout + 5*1e9, // the post's own timeout plus the record reads
		Deliver: func(ctx context.Context, e outbox.Effect, _ int) error {
			rec, err := actors.ReadJob(ctx, store, string(e.Payload))
			if errors.Is(err, persistence.ErrNotFound) {
				return outbox.Permanent(fmt.Errorf("job %s is gone: %w", e.Payload, err))
			}
			if err != nil {
				return err
			}
			ev, err := JobEvent(rec)
			if err != nil {
				return outbox.Permanent(err)
			}
			env, _, err := NewEnvelope(rec.OrgID, rec.WebhookID, rec.RequestID, ev)
			if err != nil {
				return outbox.Permanent(err)
			}
			att, err := d.Deliver(ctx, env, ev.ID, e.Created)
			if att.StatusCode != 0 {
				outbox.Note(ctx, fmt.Sprintf("HTTP %d", att.StatusCode))
			}
			if errors.Is(err, ErrCancelled) {
				return outbox.Permanent(err)
			}
			return err
		},
	}
}

// BatchHandler is the outbox handler of actors.OutboxBatchWebhook: the batch actor hands over the event id
// (the effect id) with the batch id as payload after the write that ended the batch; each attempt reads the
// ended record (it no longer changes), builds the event from it with BatchEvent (the batch without its
// items) and posts it. A deleted or disabled endpoint, or a batch record that is gone, ends the delivery.
func BatchHandler(store persistence.Store, d *Deliverer) outbox.Handler {
	return outbox.Handler{
		Schedule: Schedule,
		Timeout:  AttemptTimeout + 5*1e9,
		Deliver: func(ctx context.Context, e outbox.Effect, _ int) error {
			rec, _, err := actors.Batches{Store: store}.Load(ctx, string(e.Payload))
			if errors.Is(err, persistence.ErrNotFound) {
				return outbox.Permanent(fmt.Errorf("batch %s is gone: %w", e.Payload, err))
			}
			if err != nil {
				return err
			}
			var found *batchstate.Event
			for i := range rec.Events {
				if rec.Events[i].ID == e.ID {
					found = &rec.Events[i]
				}
			}
			if found == nil || rec.Removed || !rec.Status.Ended() {
				return outbox.Permanent(fmt.Errorf("batch %s has no event %s", rec.BatchID, e.ID))
			}
			ev, err := BatchEvent(rec.BatchID, strings.TrimPrefix(found.Type, "watermark.batch."), found.At,
				rec.Summary(found.At))
			if err != nil {
				return outbox.Permanent(err)
			}
			env, _, err := NewEnvelope(rec.OrgID, rec.WebhookID, "", ev)
			if err != nil {
				return outbox.Permanent(err)
			}
			att, err := d.Deliver(ctx, env, ev.ID, e.Created)
			if att.StatusCode != 0 {
				outbox.Note(ctx, fmt.Sprintf("HTTP %d", att.StatusCode))
			}
			if errors.Is(err, ErrCancelled) {
				return outbox.Permanent(err)
			}
			return err
		},
	}
}

// EnvelopeHandler is the outbox handler of EffectKind: events whose body was fixed when they were made (an
// accelerator.ready event) travel whole in the effect's payload as an Envelope; each attempt posts it.
func EnvelopeHandler(d *Deliverer) outbox.Handler {
	return outbox.Handler{
		Schedule: Schedule,
		Timeout:  AttemptTimeout + 5*1e9,
		Deliver: func(ctx context.Context, e outbox.Effect, _ int) error {
			env, err := DecodeEnvelope(e.Payload)
			if err != nil {
				return outbox.Permanent(err)
			}
			var ev struct {
				ID string `json:"id"`
			}
			if err := json.Unmarshal(env.Event, &ev); err != nil || !ValidEventID(ev.ID) {
				return outbox.Permanent(fmt.Errorf("effect %s: the event has no valid id", e.ID))
			}
			att, err := d.Deliver(ctx, env, ev.ID, e.Created)
			if att.StatusCode != 0 {
				outbox.Note(ctx, fmt.Sprintf("HTTP %d", att.StatusCode))
			}
			if errors.Is(err, ErrCancelled) {
				return outbox.Permanent(err)
			}
			return err
		},
	}
}

// AcceleratorReadyEffect is the outbox effect (kind EffectKind, key the endpoint) of the accelerator.ready
// event of wake-up call d.ID for endpoint endpointID of orgID, made at now.
func AcceleratorReadyEffect(orgID, endpointID string, d AcceleratorReady, now time.Time) (outbox.Effect, error) {
	ev, err := AcceleratorReadyEvent(d, now)
	if err != nil {
		return outbox.Effect{}, err
	}
	_, payload, err := NewEnvelope(orgID, endpointID, "", ev)
	if err != nil {
		return outbox.Effect{}, err
	}
	return outbox.Effect{ID: outbox.EffectID("fx_", d.ID, EventAcceleratorReady), Kind: EffectKind, Key: endpointID,
		Payload: payload, Created: now}, nil
}
