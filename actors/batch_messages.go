package actors

import (
	"context"
	"fmt"

	"filigrane/actors/batchstate"
)

// KindBatch is the cluster kind of the batch actor; its identity is the batch id (`bat_` + 32 hex, derived
// from the organization and the Idempotency-Key: batchstate.BatchIDFor).
const KindBatch = "batch"

// Reply codes of the batch actor beyond the others.
const (
	ReplyExpired = "expired"
)

// BatchCreate creates a batch (a draft with one upload per item, or a zip batch already starting); a repeat
// with the same fingerprint answers the batch (Replayed), another fingerprint ReplyIdempotencyConflict.
type BatchCreate struct {
	Spec batchstate.Spec
}

// BatchStart starts a draft; the reply's Started says whether this call started it.
type BatchStart struct {
	BatchID string
	OrgID   string
}

// BatchGet reads a batch of an organization.
type BatchGet struct {
	BatchID string
	OrgID   string
}

// BatchCancel applies a cancel request (spec 3.2).
type BatchCancel struct {
	BatchID string
	OrgID   string
}

// BatchItemDone tells a batch that one of its item jobs ended (a hint: the batch reads the job's record).
type BatchItemDone struct {
	BatchID   string
	RequestID string
}

// BatchTick makes the batch check its items' jobs, submit pending items and assemble its archive; the
// sweeper sends it to every started batch, so a batch whose node died carries on.
type BatchTick struct {
	BatchID string
}

// batchAssemblyStarted is the assembling goroutine's word that it got an assembly slot (local only).
type batchAssemblyStarted struct{}

// batchArchived is the assembling goroutine's report to its actor (local only, never on the wire).
type batchArchived struct {
	outcome batchstate.ArchiveStatus
	key     string
	size    int64
	// lowDisk: the build failed only because the node is low on disk space (persistence/diskspace.ErrLow):
	// the actor builds it again after a wait (batchActor.waitForDisk) before it takes outcome (failed).
	lowDisk bool
}

// BatchReply answers every batch message.
type BatchReply struct {
	Code     string
	Detail   string
	Record   *batchstate.Record
	Replayed bool
	Started  bool
}

// BatchMessages lists the batch actor's message types, for registration with the wire codec.
func BatchMessages() []any {
	return []any{BatchCreate{}, BatchStart{}, BatchGet{}, BatchCancel{}, BatchItemDone{}, BatchTick{}, BatchReply{}}
}

// BatchClient is the typed way to talk to batch actors.
type BatchClient struct {
	Caller Caller
}

func (c BatchClient) call(ctx context.Context, batchID string, msg any) (*BatchReply, error) {
	for attempt := 0; attempt <= maxFencedRetries; attempt++ {
		r, err := c.Caller.Request(ctx, batchID, KindBatch, msg)
		if err != nil {
			return nil, fmt.Errorf("batch %s: %w", batchID, err)
		}
		rep, ok := r.(*BatchReply)
		if !ok {
			return nil, fmt.Errorf("batch %s: unexpected reply %T", batchID, r)
		}
		if rep.Code != ReplyRetry {
			return rep, nil
		}
	}
	return &BatchReply{Code: ReplyRetry}, nil
}

// Create creates a batch or answers the one its key names.
func (c BatchClient) Create(ctx context.Context, spec batchstate.Spec) (*BatchReply, error) {
	return c.call(ctx, spec.BatchID, &BatchCreate{Spec: spec})
}

// Start starts a draft.
func (c BatchClient) Start(ctx context.Context, orgID, batchID string) (*BatchReply, error) {
	return c.call(ctx, batchID, &BatchStart{BatchID: batchID, OrgID: orgID})
}

// Get reads a batch.
func (c BatchClient) Get(ctx context.Context, orgID, batchID string) (*BatchReply, error) {
	return c.call(ctx, batchID, &BatchGet{BatchID: batchID, OrgID: orgID})
}

// Cancel cancels a batch.
func (c BatchClient) Cancel(ctx context.Context, orgID, batchID string) (*BatchReply, error) {
	return c.call(ctx, batchID, &BatchCancel{BatchID: batchID, OrgID: orgID})
}
