package webhooks

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"filigrane/actors/jobstate"
)

// APIVersion is the layout version of event bodies (the `api_version` field): the date the layout was fixed.
// A change that removes or retypes a field gets a new date.
const APIVersion = "2026-11-25"

// Event types.
const (
	EventEmbedSucceeded   = "watermark.embed.succeeded"
	EventEmbedFailed      = "watermark.embed.failed"
	EventDetectSucceeded  = "watermark.detect.succeeded"
	EventDetectFailed     = "watermark.detect.failed"
	EventBatchCompleted   = "watermark.batch.completed"
	EventBatchFailed      = "watermark.batch.failed"
	EventBatchCancelled   = "watermark.batch.cancelled"
	EventAcceleratorReady = "accelerator.ready"
	EventStorageSucceeded = "storage.delivery.succeeded"
	EventStorageFailed    = "storage.delivery.failed"
)

// EventTypes lists every event type, for endpoint filters and the documentation.
func EventTypes() []string {
	return []string{EventEmbedSucceeded, EventEmbedFailed, EventDetectSucceeded, EventDetectFailed,
		EventBatchCompleted, EventBatchFailed, EventBatchCancelled, EventAcceleratorReady,
		EventStorageSucceeded, EventStorageFailed}
}

// KnownEventType reports whether t is an event type.
func KnownEventType(t string) bool { return slices.Contains(EventTypes(), t) }

// Event is the body of a delivery: the same bytes on every attempt and redelivery.
type Event struct {
	ID         string          `json:"id"`
	Type       string          `json:"type"`
	APIVersion string          `json:"api_version"`
	CreatedAt  string          `json:"created_at"`
	Data       json.RawMessage `json:"data"`
}

// EventID derives an event's id from its cause (a request id, a batch id, a wake-up id) and type: "evt_" + 64
// hex characters. A cause replayed after a crash makes the same id, so the outbox stores it once and receivers
// deduplicate on it.
func EventID(cause, eventType string) string {
	sum := sha256.Sum256([]byte("filigrane/event\x00" + cause + "\x00" + eventType))
	return "evt_" + hex.EncodeToString(sum[:])
}

// ValidEventID reports whether id has the form EventID makes.
func ValidEventID(id string) bool {
	if len(id) != 4+64 || id[:4] != "evt_" {
		return false
	}
	for _, c := range id[4:] {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

func newEvent(cause, eventType string, created time.Time, data any) (Event, error) {
	raw, err := json.Marshal(data)
	if err != nil {
		return Event{}, fmt.Errorf("encode %s event data: %w", eventType, err)
	}
	return Event{ID: EventID(cause, eventType), Type: eventType, APIVersion: APIVersion,
		CreatedAt: created.UTC().Format(time.RFC3339), Data: raw}, nil
}

// jobData is a job event's data: the receipt (spec 2.3), the watermark id, and for a detection its result.
type jobData struct {
	jobstate.Receipt
	WatermarkID *string         `json:"watermark_id"`
	Result      json.RawMessage `json:"result,omitempty"`
}

// JobEventType is the final event type of a job record, or "" while it has not ended.
func JobEventType(r *jobstate.Record) string {
	switch {
	case r.Status == jobstate.StatusSucceeded && r.Operation == jobstate.OperationEmbed:
		return EventEmbedSucceeded
	case r.Status == jobstate.StatusFailed && r.Operation == jobstate.OperationEmbed:
		return EventEmbedFailed
	case r.Status == jobstate.StatusSucceeded && r.Operation == jobstate.OperationDetect:
		return EventDetectSucceeded
	case r.Status == jobstate.StatusFailed && r.Operation == jobstate.OperationDetect:
		return EventDetectFailed
	}
	return ""
}

// JobEvent builds the final event of an ended job from its record alone (the record no longer changes, so a
// rebuild after a crash or for a redelivery makes the same bytes). A succeeded detection carries its
// findings under `result` (the record's summary: watermarked, confidence, watermark_id, at most
// jobstate.MaxSummaryUnits units and units_total) and their watermark_id as the event's.
func JobEvent(r *jobstate.Record) (Event, error) {
	t := JobEventType(r)
	if t == "" {
		return Event{}, fmt.Errorf("job %s is %s: it has no final event yet", r.RequestID, r.Status)
	}
	d := jobData{Receipt: r.Receipt()}
	switch {
	case r.Operation == jobstate.OperationEmbed && r.Status == jobstate.StatusSucceeded:
		wm := r.WatermarkID
		d.WatermarkID = &wm
	case r.Operation == jobstate.OperationDetect && r.Output != nil && r.Output.Detection != "":
		result := json.RawMessage(r.Output.Detection)
		var found struct {
			WatermarkID *string `json:"watermark_id"`
		}
		if err := json.Unmarshal(result, &found); err != nil {
			return Event{}, fmt.Errorf("job %s: detection summary is not JSON: %w", r.RequestID, err)
		}
		d.WatermarkID, d.Result = found.WatermarkID, result
	}
	return newEvent(r.RequestID, t, r.CompletedAt, d)
}

// BatchEvent builds a batch's final event; status is completed, failed or cancelled, and batch is the batch
// as the API shows it without its items (counts, credits, links).
func BatchEvent(batchID, status string, ended time.Time, batch any) (Event, error) {
	t := "watermark.batch." + status
	if t != EventBatchCompleted && t != EventBatchFailed && t != EventBatchCancelled {
		return Event{}, fmt.Errorf("batch %s: %q is not a final batch status", batchID, status)
	}
	return newEvent(batchID, t, ended, batch)
}

// AcceleratorReady is the data of an accelerator.ready event.
type AcceleratorReady struct {
	ID          string  `json:"id"` // the wake-up call's id
	Accelerator string  `json:"accelerator"`
	Status      string  `json:"status"`
	ReadyAt     *string `json:"ready_at"`
	WarmUntil   *string `json:"warm_until"`
}

// AcceleratorReadyEvent builds the accelerator.ready event of wake-up call d.ID.
func AcceleratorReadyEvent(d AcceleratorReady, at time.Time) (Event, error) {
	return newEvent(d.ID, EventAcceleratorReady, at, d)
}
