package actors

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"filigrane/actors/jobstate"
	"filigrane/actors/mediakind"
	"filigrane/codec"
)

// InputKey is the blob key of a file sent in request reqID of orgID. The random part keeps two attempts of
// one request (an idempotent replay and its original) from writing the same blob.
func InputKey(orgID, reqID string) string {
	return "inputs/" + orgID + "/" + reqID + "/" + RandomToken()
}

// RandomToken is 16 hex digits from the system's random source.
func RandomToken() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// PriceOf is the credits held and charged for op on a file of kind described by info, at the catalog's
// prices (the media-kind table's price rule).
func (c Catalog) PriceOf(kind mediakind.Kind, op jobstate.Operation, info mediakind.Info) int64 {
	return kind.Price(op, c.Prices, info)
}

// SyncDetector runs a synchronous detection that never becomes a job: the credits are held and a
// concurrency slot taken for the duration, then charged, or released when detection failed or the client
// left. The edge calls it; it decides the credit flow, the edge only encodes the answer.
type SyncDetector struct {
	Orgs   OrgClient
	Pool   *Pool
	Media  Media
	Logger zerolog.Logger
}

// SyncDetectRequest is one synchronous detection.
type SyncDetectRequest struct {
	OrgID, RequestID, BlobKey string
	// Kind is the file's kind; images are decoded in memory, other kinds go through their adapter.
	Kind mediakind.Kind
	// Credits is the charge; Hold, when above it, is what is reserved first (3x for accelerator=gpu).
	Credits, Hold int64
	// Accelerator is the one asked for: gpu runs an image's detection on a ready GPU, charged
	// Media.chargeOn (the GPU price), else on the CPU at Credits.
	Accelerator jobstate.Accelerator
	// BudgetWait is how long the detection waits for decode memory before it fails with CodeDecodeBusy.
	BudgetWait time.Duration
	// Watch is called once the credits are held (a reservation cut short by a cancel could be placed and
	// never released): it returns the context the work runs under, cancelled when the client leaves, and
	// its stop. Gone reports whether such a context was cancelled because the client left.
	Watch func(context.Context) (context.Context, func())
	Gone  func(context.Context) bool
	// SettleWithin is how long the charge (or release) is sent again while the organization's actor does not
	// answer or could not record it; 0 is 10 s. It must outlast the cluster's failure detection (the edge
	// passes its actor timeout): when the node hosting the organization's actor dies, the settlement waits
	// until a survivor hosts it instead of leaving the detection answered but never charged and its hold
	// (and concurrency slot) held.
	SettleWithin time.Duration
}

// SyncDetectError says why a synchronous detection has no result. Exactly one field is set.
type SyncDetectError struct {
	// Reserve is the org actor's refusal to hold the credits or a slot (ReplyInsufficientCredits,
	// ReplyConcurrencyLimit or another reply code).
	Reserve string
	// Gone: the client closed the connection; nothing was charged.
	Gone bool
	// Unavailable is a sentence for a 503: the org actor or the workers did not answer in time.
	Unavailable string
	// Process is the detection's own failure.
	Process *ProcessError
}

// Detect runs req and says where it ran. The credits are charged if and only if it returns a detection (but
// for a charge whose every send went unanswered until SettleWithin ended: it may have landed, and the detection
// is returned).
func (d SyncDetector) Detect(ctx context.Context, req SyncDetectRequest) (codec.Detection, jobstate.Accelerator, *SyncDetectError) {
	// The hold names this process: if it dies before settling, nothing else would (no job record), and the
	// organization's actor releases the hold and slot once the cluster knows it gone.
	rep, err := d.Orgs.Reserve(ctx, OrgReserve{OrgID: req.OrgID, Op: req.RequestID, Credits: max(req.Hold, req.Credits), Slot: true,
		Holder: d.Pool.EdgeWorkerID()})
	if err != nil {
		return codec.Detection{}, jobstate.AcceleratorCPU, &SyncDetectError{Unavailable: "could not reserve credits in time"}
	}
	if rep.Code != ReplyOK {
		return codec.Detection{}, jobstate.AcceleratorCPU, &SyncDetectError{Reserve: rep.Code}
	}
	acc := jobstate.AcceleratorCPU
	// settle charges or releases the hold; it reports whether the organization's actor refused it (an answer
	// that it was not recorded, or none, is sent again until the window ends and is not a refusal).
	settle := func(charge bool) (refused bool) {
		within := req.SettleWithin
		if within <= 0 {
			within = 10 * time.Second
		}
		// The settlement outlives the client (a detection finished is charged even if it leaves now), but
		// not the settle window: each send waits for the actor until the window's end (a request to an
		// actor whose node died is re-sent once the cluster declares the node dead), and a send that got no
		// answer, or an answer that the state could not be saved, is sent again: Charge and Release are
		// idempotent by operation.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), within)
		defer cancel()
		send := func() (*OrgReply, error) {
			if !charge {
				return d.Orgs.Release(sctx, OrgRelease{OrgID: req.OrgID, Op: req.RequestID})
			}
			credits := req.Credits
			if acc == jobstate.AcceleratorGPU {
				credits = d.Media.chargeOn(acc, req.Credits)
			}
			return d.Orgs.Charge(sctx, OrgCharge{OrgID: req.OrgID, Op: req.RequestID, Credits: credits})
		}
		wait := 250 * time.Millisecond
		for {
			r, err := send()
			if err == nil && r.Code == ReplyOK {
				return false
			}
			unrecorded := err != nil || r.Code == ReplyInternal || r.Code == ReplyRetry
			if !unrecorded || sctx.Err() != nil {
				d.Logger.Error().Err(err).Interface("reply", r).Str("request", req.RequestID).Msg("settle synchronous detection")
				return !unrecorded
			}
			d.Logger.Warn().Err(err).Interface("reply", r).Str("request", req.RequestID).Msg("settle synchronous detection: not recorded; sending it again")
			select {
			case <-sctx.Done():
			case <-time.After(wait):
			}
			wait = min(2*wait, 2*time.Second)
		}
	}
	c, stopWatch := req.Watch(ctx)
	defer stopWatch()
	gone := func() (codec.Detection, jobstate.Accelerator, *SyncDetectError) {
		settle(false)
		d.Logger.Info().Str("request", req.RequestID).Msg("client closed the connection during synchronous detection; not charged")
		return codec.Detection{}, jobstate.AcceleratorCPU, &SyncDetectError{Gone: true}
	}
	release, err := d.Pool.Acquire(c)
	if err != nil {
		if req.Gone(c) {
			return gone()
		}
		settle(false)
		return codec.Detection{}, jobstate.AcceleratorCPU, &SyncDetectError{Unavailable: "no worker became free in time"}
	}
	var det codec.Detection
	var perr *ProcessError
	if req.Kind.Media == jobstate.MediaImage {
		det, acc, perr = d.Media.detectStoredOn(c, req.Accelerator, req.OrgID, req.BlobKey, req.BudgetWait)
	} else {
		det, perr = d.Media.DetectStoredFile(c, req.Kind, req.OrgID, req.BlobKey, req.BudgetWait)
	}
	release()
	if req.Gone(c) {
		return gone() // even when detection finished: the client never gets the answer
	}
	if perr != nil {
		settle(false)
		if perr.Cause != nil {
			d.Logger.Warn().Err(perr.Cause).Str("request", req.RequestID).Str("code", perr.Code).Msg("synchronous detection failed")
		}
		return codec.Detection{}, jobstate.AcceleratorCPU, &SyncDetectError{Process: perr}
	}
	if settle(true) {
		// The organization's actor refused the charge: the hold is gone. It released it because the cluster
		// declared this process gone (a node frozen past failure detection that resumed before it learned
		// so), so nothing was charged and the slot is free. Answering the detection now would hand it out
		// for free: it is thrown away and the client told to retry (a key-less retry is another operation,
		// held and charged afresh). The release frees a hold that a refused charge may have left (one above
		// its hold); on a released hold it is a no-op.
		settle(false)
		return codec.Detection{}, jobstate.AcceleratorCPU, &SyncDetectError{Unavailable: "the detection could not be charged; retry"}
	}
	// A charge still unrecorded when the window ended may have landed: the detection is answered (a retry
	// would be charged again), as it is when the charge was recorded.
	return det, acc, nil
}

// String renders e for logs.
func (e *SyncDetectError) String() string {
	switch {
	case e.Reserve != "":
		return "reserve: " + e.Reserve
	case e.Gone:
		return "client gone"
	case e.Process != nil:
		return e.Process.Error()
	}
	return fmt.Sprintf("unavailable: %s", e.Unavailable)
}
