package jobstate

import (
	"fmt"
	"time"
)

// EffectKind names something the job actor must do outside the record.
type EffectKind string

// Effects. Dispatch and ScheduleWake are volatile: they are recomputed from the record on every activation and
// are never settled. The others are settlement effects of the terminal record: the actor performs each one
// idempotently, keyed by the request id (org.Charge(req_x) twice charges once), then calls MarkSettled and
// writes the record. A crash in between makes the next activation perform it again, which is harmless.
const (
	// EffectDispatch: offer the job to the worker pool; it is claimable now.
	EffectDispatch EffectKind = "dispatch"
	// EffectScheduleWake: call Tick at Effect.At (lease expiry, end of a retry wait, deadline).
	EffectScheduleWake EffectKind = "schedule_wake"
	// EffectWriteAssets: create the source and watermarked asset records named by the output (embed only).
	EffectWriteAssets EffectKind = "write_assets"
	// EffectChargeCredits: settle the hold by charging Effect.Amount (which frees the rest and the slot).
	EffectChargeCredits EffectKind = "charge_credits"
	// EffectReleaseCredits: refund the whole hold and free the concurrency slot.
	EffectReleaseCredits EffectKind = "release_credits"
	// EffectDeliverStorage: hand the output to the storage delivery actor for the customer's bucket.
	EffectDeliverStorage EffectKind = "deliver_storage"
	// EffectNotifyBatch: tell the batch actor how this item ended (batch files send no events of their own).
	EffectNotifyBatch EffectKind = "notify_batch"
	// EffectNotifyWebhook: queue the job's final event for the webhook named by the request.
	EffectNotifyWebhook EffectKind = "notify_webhook"
)

// Effect is one thing the actor still owes.
type Effect struct {
	Kind   EffectKind
	At     time.Time // EffectScheduleWake only
	Amount int64     // EffectChargeCredits only
}

// commitEffects are the effects that make the outcome real (assets, credits). Nothing that announces the
// outcome (batch, webhook, storage delivery) is pending before they are settled, and the caller must not be
// shown the outcome before Committed is true (DESIGN.md rule 3: the caller sees success only after they exist).
func (r *Record) commitEffects() []Effect {
	var fx []Effect
	st := r.Settlement
	switch r.Status {
	case StatusSucceeded:
		if r.Operation == OperationEmbed && !st.AssetsWritten {
			fx = append(fx, Effect{Kind: EffectWriteAssets})
		}
		if !st.CreditsCharged {
			fx = append(fx, Effect{Kind: EffectChargeCredits, Amount: r.Output.Charge})
		}
	case StatusFailed:
		if !st.CreditsReleased {
			fx = append(fx, Effect{Kind: EffectReleaseCredits})
		}
	}
	return fx
}

// announceEffects are the effects that follow a committed outcome, settled or not.
func (r *Record) announceEffects() []EffectKind {
	var kinds []EffectKind
	if r.Status == StatusSucceeded && r.StorageDestinationID != "" {
		kinds = append(kinds, EffectDeliverStorage)
	}
	if r.BatchID != "" {
		kinds = append(kinds, EffectNotifyBatch)
	} else if r.WebhookID != "" {
		kinds = append(kinds, EffectNotifyWebhook)
	}
	return kinds
}

func (r *Record) settled(k EffectKind) bool {
	st := r.Settlement
	switch k {
	case EffectWriteAssets:
		return st.AssetsWritten
	case EffectChargeCredits:
		return st.CreditsCharged
	case EffectReleaseCredits:
		return st.CreditsReleased
	case EffectDeliverStorage:
		return st.StorageHandedOff
	case EffectNotifyBatch:
		return st.BatchNotified
	case EffectNotifyWebhook:
		return st.WebhookNotified
	}
	return false
}

// Committed reports whether the job ended and every effect that makes its outcome real (asset records, the
// charge or the refund) is settled. Only then may a caller be shown the outcome.
func (r *Record) Committed() bool { return r.Status.Terminal() && len(r.commitEffects()) == 0 }

// PendingEffects lists, in the order to perform them, what the record still requires at now. For an active
// job that is a dispatch (when claimable) and the next wake-up; for an ended job, the settlement effects not
// yet marked settled, with the announcements only once the commit effects are settled. An ended job whose
// effects are all settled needs nothing.
func (r *Record) PendingEffects(now time.Time) []Effect {
	if r.Status.Active() {
		var fx []Effect
		if r.Claimable(now) {
			fx = append(fx, Effect{Kind: EffectDispatch})
		}
		if at, ok := r.NextWake(); ok {
			fx = append(fx, Effect{Kind: EffectScheduleWake, At: at})
		}
		return fx
	}
	fx := r.commitEffects()
	if len(fx) > 0 {
		return fx
	}
	for _, k := range r.announceEffects() {
		if !r.settled(k) {
			fx = append(fx, Effect{Kind: k})
		}
	}
	return fx
}

// MarkSettled records that the actor performed effect k. Marking a settled effect again is a no-op. It refuses
// volatile effects, effects this record does not owe (a charge on a failed job, anything on an active job) and
// announcements before the outcome is committed.
func (r *Record) MarkSettled(k EffectKind) error {
	if !r.Status.Terminal() {
		return fmt.Errorf("settle %s on job %s: job is %s: %w", k, r.RequestID, r.Status, ErrInvalid)
	}
	owed := false
	for _, e := range r.commitEffects() {
		owed = owed || e.Kind == k
	}
	announce := false
	for _, a := range r.announceEffects() {
		announce = announce || a == k
	}
	switch {
	case r.settled(k):
		return nil
	case owed:
	case announce && r.Committed():
	case announce:
		return fmt.Errorf("settle %s on job %s: outcome not committed yet: %w", k, r.RequestID, ErrInvalid)
	default:
		return fmt.Errorf("settle %s on job %s: a %s %s job does not owe it: %w", k, r.RequestID, r.Status,
			r.Operation, ErrInvalid)
	}
	st := &r.Settlement
	switch k {
	case EffectWriteAssets:
		st.AssetsWritten = true
	case EffectChargeCredits:
		st.CreditsCharged = true
	case EffectReleaseCredits:
		st.CreditsReleased = true
	case EffectDeliverStorage:
		st.StorageHandedOff = true
	case EffectNotifyBatch:
		st.BatchNotified = true
	case EffectNotifyWebhook:
		st.WebhookNotified = true
	}
	r.changed()
	return nil
}
