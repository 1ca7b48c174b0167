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

// NoteFiltered is the attempt detail of an event the endpoint's filter left out (nothing was sent); the
// delivery log does not list such events.
const NoteFiltered = "filtered"

// ErrGone: the effect's event can no longer be built (its job or batch record is gone, or its payload is
// not an event): the delivery ends, and the delivery log leaves it out.
var ErrGone = errors.New("webhooks: the event's cause is gone")

// Built is one effect's event, ready to send: the envelope (organization, endpoint, exact body) and the
// event's id.
type Built struct {
	Envelope Envelope
	EventID  string
}

// builder builds the event of one effect of its outbox kind; ErrGone (wrapped) when it no longer can.
type builder func(ctx context.Context, store persistence.Store, e outbox.Effect) (Built, error)

// kinds lists every outbox kind that carries webhook events and how each builds its event. The handlers,
// the delivery log and redelivery all read this one table: a new event source (a storage delivery's event,
// say) is one row here. Kinds whose body is fixed when the event is made travel as an Envelope (EffectKind).
var kinds = []struct {
	kind  string
	build builder
}{
	{actors.OutboxJobWebhook, buildJob},
	{actors.OutboxBatchWebhook, buildBatch},
	{EffectKind, buildEnvelope},
}

// Kinds lists the outbox kinds of webhook events; each has a Handler, and the delivery log of an endpoint
// is their entries keyed by the endpoint id.
func Kinds() []string {
	out := make([]string, 0, len(kinds))
	for _, k := range kinds {
		out = append(out, k.kind)
	}
	return out
}

// Build builds the event of effect e of any webhook kind (the same id and bytes on every call).
func Build(ctx context.Context, store persistence.Store, e outbox.Effect) (Built, error) {
	for _, k := range kinds {
		if k.kind == e.Kind {
			return k.build(ctx, store, e)
		}
	}
	return Built{}, fmt.Errorf("%w: %q is not a webhook kind", ErrGone, e.Kind)
}

// Handler is the outbox handler of every webhook kind: each attempt builds the effect's event (Build) and
// posts it. A deleted or disabled endpoint, or an event that can no longer be built, ends the delivery
// (outbox.Permanent).
func Handler(store persistence.Store, d *Deliverer) outbox.Handler {
	return outbox.Handler{
		Schedule: Schedule,
		Timeout:  d.Sender.Timeout() + 5*time.Second, // the post's own timeout plus the record reads
		Deliver: func(ctx context.Context, e outbox.Effect, _ int) error {
			b, err := Build(ctx, store, e)
			if errors.Is(err, ErrGone) {
				return outbox.Permanent(err)
			}
			if err != nil {
				return err
			}
			att, err := d.Deliver(ctx, b.Envelope, b.EventID, e.Created)
			switch {
			case att.StatusCode != 0:
				outbox.Note(ctx, fmt.Sprintf("HTTP %d", att.StatusCode))
			case att.Filtered:
				outbox.Note(ctx, NoteFiltered)
			}
			if errors.Is(err, ErrCancelled) {
				return outbox.Permanent(err)
			}
			return err
		},
	}
}

// RegisterHandlers registers Handler for every webhook kind on reg.
func RegisterHandlers(reg *outbox.Registry, store persistence.Store, d *Deliverer) {
	for _, k := range Kinds() {
		reg.MustRegister(k, Handler(store, d))
	}
}

// buildJob: actors.OutboxJobWebhook. The job actor hands over the committed job's request id (in the same
// settlement as its outcome); the job record no longer changes, so JobEvent gives the same bytes each time.
func buildJob(ctx context.Context, store persistence.Store, e outbox.Effect) (Built, error) {
	rec, err := actors.ReadJob(ctx, store, string(e.Payload))
	if errors.Is(err, persistence.ErrNotFound) {
		return Built{}, fmt.Errorf("%w: job %s: %w", ErrGone, e.Payload, err)
	}
	if err != nil {
		return Built{}, err
	}
	ev, err := JobEvent(rec)
	if err != nil {
		return Built{}, fmt.Errorf("%w: %w", ErrGone, err)
	}
	env, _, err := NewEnvelope(rec.OrgID, rec.WebhookID, rec.RequestID, ev)
	if err != nil {
		return Built{}, fmt.Errorf("%w: %w", ErrGone, err)
	}
	return Built{Envelope: env, EventID: ev.ID}, nil
}

// buildBatch: actors.OutboxBatchWebhook. The batch actor hands over the event id (the effect id) with the
// batch id as payload after the write that ended the batch; the ended record no longer changes, and the body
// is the batch without its items (BatchEvent).
func buildBatch(ctx context.Context, store persistence.Store, e outbox.Effect) (Built, error) {
	rec, _, err := actors.Batches{Store: store}.Load(ctx, string(e.Payload))
	if errors.Is(err, persistence.ErrNotFound) {
		return Built{}, fmt.Errorf("%w: batch %s: %w", ErrGone, e.Payload, err)
	}
	if err != nil {
		return Built{}, err
	}
	var found *batchstate.Event
	for i := range rec.Events {
		if rec.Events[i].ID == e.ID {
			found = &rec.Events[i]
		}
	}
	if found == nil || rec.Removed || !rec.Status.Ended() {
		return Built{}, fmt.Errorf("%w: batch %s has no event %s", ErrGone, rec.BatchID, e.ID)
	}
	ev, err := BatchEvent(rec.BatchID, strings.TrimPrefix(found.Type, "watermark.batch."), found.At, rec.Summary(found.At))
	if err != nil {
		return Built{}, fmt.Errorf("%w: %w", ErrGone, err)
	}
	env, _, err := NewEnvelope(rec.OrgID, rec.WebhookID, "", ev)
	if err != nil {
		return Built{}, fmt.Errorf("%w: %w", ErrGone, err)
	}
	return Built{Envelope: env, EventID: ev.ID}, nil
}

// buildEnvelope: EffectKind, events whose body was fixed when they were made (accelerator.ready) and travel
// whole in the effect's payload as an Envelope.
func buildEnvelope(_ context.Context, _ persistence.Store, e outbox.Effect) (Built, error) {
	env, err := DecodeEnvelope(e.Payload)
	if err != nil {
		return Built{}, fmt.Errorf("%w: %w", ErrGone, err)
	}
	var ev struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(env.Event, &ev); err != nil || !ValidEventID(ev.ID) {
		return Built{}, fmt.Errorf("%w: effect %s: the event has no valid id", ErrGone, e.ID)
	}
	return Built{Envelope: env, EventID: ev.ID}, nil
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
