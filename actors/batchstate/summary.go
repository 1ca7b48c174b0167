package batchstate

import "time"

// Summary is the batch as the API shows it without its items (spec 2.4): the fields of a list entry, and the
// data of the batch's final webhook event. now decides whether a draft shows as expired; an ended batch
// renders the same at any now, so the event built from it is the same bytes on every attempt.
func (r *Record) Summary(now time.Time) map[string]any {
	st := r.StatusAt(now)
	v := map[string]any{
		"batch_id": r.BatchID, "status": st, "item_count": len(r.Items), "archive": r.Archive,
		"accelerator": r.Accelerator, "output_format": r.OutputFormat.OrPNG(), "webhook_id": strOrNil(r.WebhookID),
		"storage_destination_id": strOrNil(r.StorageDestinationID), "counts": r.Counts(), "credits": r.Credits(),
		"cancel_requested": r.CancelRequested, "created_at": timeOrNil(r.CreatedAt),
		"started_at": timeOrNil(r.StartedAt), "completed_at": timeOrNil(r.CompletedAt),
		"upload_expires_at": nil, "status_url": "/watermarks/batches/" + r.BatchID,
	}
	if r.Source == SourceUploads {
		v["upload_expires_at"] = timeOrNil(r.DraftExpiresAt())
	}
	if st == StatusExpired && r.Status == StatusDraft {
		v["completed_at"] = timeOrNil(r.DraftExpiresAt())
	}
	if r.Archive {
		v["archive_status"] = strOrNil(string(r.ArchiveStatus))
		v["archive_url"] = "/watermarks/batches/" + r.BatchID + "/archive"
		v["archive_expires_at"] = timeOrNil(r.ArchiveExpiresAt)
	}
	return v
}

func timeOrNil(t time.Time) *string {
	if t.IsZero() {
		return nil
	}
	s := t.UTC().Format(time.RFC3339)
	return &s
}

func strOrNil(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
