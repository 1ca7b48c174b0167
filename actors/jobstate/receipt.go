package jobstate

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"time"

	"filigrane/actors/assetid"
)

// Receipt is the job receipt of spec 2.3, as returned with 202 and by the status URL. Field names are the
// spec's; nullable fields are pointers so that JSON shows null, and batch and storage fields are left out
// when the job has none.
type Receipt struct {
	RequestID            string       `json:"request_id"`
	Status               Status       `json:"status"`
	Operation            Operation    `json:"operation"`
	Format               string       `json:"format"`
	FrameCount           int          `json:"frame_count"`
	Credits              int64        `json:"credits"`
	Attempts             int          `json:"attempts"`
	WebhookID            *string      `json:"webhook_id"`
	AssetID              *string      `json:"asset_id"`
	SourceAssetID        *string      `json:"source_asset_id"`
	StatusURL            string       `json:"status_url"`
	ResultURL            string       `json:"result_url"`
	ErrorCode            *string      `json:"error_code"`
	ResultExpiresAt      *string      `json:"result_expires_at"`
	AcceleratorRequested Accelerator  `json:"accelerator_requested"`
	Accelerator          *Accelerator `json:"accelerator"`
	BatchID              string       `json:"batch_id,omitempty"`
	StorageDestinationID string       `json:"storage_destination_id,omitempty"`
	StorageKey           string       `json:"storage_key,omitempty"`
	// Node and AttemptNodes are extensions (docs/operations.md, "Work classes and placement"): the node that
	// claimed the latest attempt and every attempt's node, oldest first; absent before the first claim.
	Node              string   `json:"node,omitempty"`
	AttemptNodes      []string `json:"attempt_nodes,omitempty"`
	StorageProvider   string   `json:"storage_provider,omitempty"`
	StorageDeliveryID string   `json:"storage_delivery_id,omitempty"`
	// Units are a succeeded video embed's units (one per second of frames), absent for every other job.
	Units []EmbedUnit `json:"units,omitempty"`
	// StorageStatus is the delivery's status once the job succeeded (queued, retrying, stored, failed); the
	// HTTP layer fills it from the delivery record, which this package does not read.
	StorageStatus string `json:"storage_status,omitempty"`
}

// StorageDeliveryID is the id of the delivery of the job's output to its storage destination: "std_" + the
// SHA-256 of the request id, so the edge can name it (X-Storage-Delivery-ID) before the delivery exists, and a
// replayed hand-over names the same delivery. Empty without a destination.
func (r *Record) StorageDeliveryID() string {
	if r.StorageDestinationID == "" {
		return ""
	}
	return StorageDeliveryIDFor(r.RequestID)
}

// StorageDeliveryIDFor is the storage delivery id of the job requestID's output (Record.StorageDeliveryID).
func StorageDeliveryIDFor(requestID string) string {
	sum := sha256.Sum256([]byte(requestID))
	return "std_" + hex.EncodeToString(sum[:])
}

// StatusURL is the job's status path, relative to the base URL: /watermarks/jobs/{request_id} for every
// job (spec 2.3). /watermarks/detection-jobs/{request_id} answers detection jobs too (DESIGN.md 5), but
// receipts name only the spec's path, which is where clients poll.
func (r *Record) StatusURL() string { return "/watermarks/jobs/" + r.RequestID }

// ResultURL is the job's result path, relative to the base URL.
func (r *Record) ResultURL() string { return r.StatusURL() + "/result" }

// OutputAssetIDs are the ids of the watermarked and source assets of a succeeded embed as the API shows them:
// the full form also where the output recorded the short ids of earlier versions. Empty without an output.
func (r *Record) OutputAssetIDs() (marked, source string) {
	if r.Output == nil {
		return "", ""
	}
	return assetid.Canonical(r.Output.AssetID, r.RequestID, assetid.KindWatermarked),
		assetid.Canonical(r.Output.SourceAssetID, r.RequestID, assetid.KindSource)
}

// Credits is the receipt's credits: the hold while the job is active, the actual charge once it succeeded,
// and 0 once it failed (the hold was refunded).
func (r *Record) Credits() int64 {
	switch r.Status {
	case StatusSucceeded:
		return r.Output.Charge
	case StatusFailed:
		return 0
	}
	return r.CreditsHeld
}

// Receipt renders the record as the API's job receipt.
func (r *Record) Receipt() Receipt {
	rc := Receipt{
		RequestID: r.RequestID, Status: r.Status, Operation: r.Operation, Format: r.Format,
		FrameCount: r.FrameCount, Credits: r.Credits(), Attempts: r.Attempts,
		WebhookID: optional(r.WebhookID), StatusURL: r.StatusURL(), ResultURL: r.ResultURL(),
		AcceleratorRequested: r.AcceleratorRequested, BatchID: r.BatchID,
		StorageDestinationID: r.StorageDestinationID, StorageKey: r.StorageKey,
		StorageDeliveryID: r.StorageDeliveryID(),
	}
	if r.StorageDestinationID != "" {
		rc.StorageProvider = "s3"
	}
	if n := len(r.AttemptNodes); n > 0 {
		rc.Node = r.AttemptNodes[n-1]
		rc.AttemptNodes = slices.Clone(r.AttemptNodes)
	}
	switch r.Status {
	case StatusSucceeded:
		marked, source := r.OutputAssetIDs()
		rc.AssetID = optional(marked)
		rc.SourceAssetID = optional(source)
		ts := r.ResultExpiresAt.UTC().Format(time.RFC3339)
		rc.ResultExpiresAt = &ts
		a := r.Output.Accelerator
		rc.Accelerator = &a
		rc.Units = r.Output.EmbedUnits()
	case StatusFailed:
		rc.ErrorCode = optional(r.ErrorCode)
	}
	return rc
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
