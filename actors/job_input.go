package actors

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"filigrane/actors/outbox"
	"filigrane/persistence"
)

// OutboxJobInput is the outbox kind of a stored input file whose job may never have been created: the request
// that stored it could neither submit the job nor ask whether the job exists (the cluster or the store was
// failing), so it kept the file rather than delete one a job may read. The handler asks again later: a job
// that names the file keeps it; no job, or a job that reads another file (a replay's), means nothing will
// ever read this one, and it is deleted.
const OutboxJobInput = "job.input"

// InputCheckSchedule is the input check's waits. The first attempt, made as soon as the effect is handed
// over, never deletes (see InputCheckHandler); the second comes after 10 minutes, when no submission of the
// request that stored the file is in flight any more (a request gives up after 5 minutes). The later waits
// ride out a cluster or store outage; after the last the check goes dead and the file stays.
var InputCheckSchedule = []time.Duration{10 * time.Minute, 30 * time.Minute, 2 * time.Hour, 8 * time.Hour, 24 * time.Hour}

// inputCheck is the payload of an OutboxJobInput effect.
type inputCheck struct {
	OrgID     string `msgpack:"org_id"`
	RequestID string `msgpack:"request_id"`
	BlobKey   string `msgpack:"blob_key"`
}

// InputCheck is the outbox effect that decides later whether the input file blobKey, stored for the
// submission requestID of orgID, is read by a job. Its id derives from the request and the file, so handing
// it over twice is harmless.
func InputCheck(orgID, requestID, blobKey string, now time.Time) (outbox.Effect, error) {
	payload, err := msgpack.Marshal(inputCheck{OrgID: orgID, RequestID: requestID, BlobKey: blobKey})
	if err != nil {
		return outbox.Effect{}, fmt.Errorf("input check of job %s: %w", requestID, err)
	}
	return outbox.Effect{ID: outbox.EffectID("fx_", requestID, OutboxJobInput, blobKey), Kind: OutboxJobInput,
		Payload: payload, Created: now}, nil
}

// errInputCheckTooEarly is the first attempt's answer: the submission that stored the file may still be on
// its way to the job actor, which would then read the file.
var errInputCheckTooEarly = errors.New("the submission may still reach its job: asking after the next wait")

// InputCheckHandler delivers OutboxJobInput effects: it asks the job (through caller) and deletes the file
// from blobs when no job reads it.
func InputCheckHandler(caller Caller, blobs persistence.Blobs) outbox.Handler {
	return outbox.Handler{Schedule: InputCheckSchedule, Deliver: func(ctx context.Context, e outbox.Effect, attempt int) error {
		var in inputCheck
		if err := msgpack.Unmarshal(e.Payload, &in); err != nil || in.BlobKey == "" {
			return outbox.Permanent(fmt.Errorf("input check %s: unreadable payload", e.ID))
		}
		if attempt <= 1 {
			return errInputCheckTooEarly
		}
		rep, err := JobClient{Caller: caller}.Get(ctx, in.OrgID, in.RequestID)
		if err != nil {
			return fmt.Errorf("input check: ask job %s: %w", in.RequestID, err)
		}
		switch {
		case rep.Code == ReplyNotFound, rep.Code == ReplyOK && rep.Record != nil && rep.Record.Input.BlobKey != in.BlobKey:
		case rep.Code == ReplyOK:
			outbox.Note(ctx, "job "+in.RequestID+" reads the file: kept")
			return nil
		default:
			return fmt.Errorf("input check: job %s answered %s %s", in.RequestID, rep.Code, rep.Detail)
		}
		if err := blobs.Delete(ctx, in.BlobKey); err != nil {
			return fmt.Errorf("input check: delete %s: %w", in.BlobKey, err)
		}
		outbox.Note(ctx, "no job reads the file: deleted")
		return nil
	}}
}
