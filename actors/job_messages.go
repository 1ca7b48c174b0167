package actors

import (
	"time"

	"filigrane/actors/jobstate"
	"filigrane/internal/problem"
)

// KindJob is the cluster kind of the job actor; its identity is the request id.
const KindJob = "job"

// Reply codes of the job actor beyond the org actor's (internal, like those; see ReplyOK).
const (
	ReplyIdempotencyConflict = string(problem.IdempotencyConflict)
	ReplyStaleLease          = "stale_lease"
	ReplyNotClaimable        = "not_claimable"
	ReplyInvalid             = "invalid"
)

// JobSubmit accepts a request: on first delivery it reserves credits (and a slot) with the org actor and
// creates the queued job; a repeat with the same fingerprint answers the existing job (Replayed), a different
// fingerprint ReplyIdempotencyConflict.
type JobSubmit struct {
	Spec jobstate.Spec
	// Hold is the credits to reserve (3x the price for accelerator=gpu).
	Hold int64
	// Slot takes a concurrency slot; Batch marks it as a batch file's.
	Slot  bool
	Batch bool
	// ClaimAs, when set, has the new job claimed by that worker under a lease of Lease in the same write
	// that creates it, so no worker of the pool is offered it: the edge runs a synchronous detection sent
	// with an Idempotency-Key itself, as a recorded job (docs/errors.md). A replay is answered as usual and
	// claims nothing; the reply's Lease is set only for a job this submit created.
	ClaimAs string
	Lease   time.Duration
}

// JobGet reads a job of an organization.
type JobGet struct {
	RequestID string
	OrgID     string
}

// JobAwait answers once the job's outcome is committed (immediately if it is). The caller bounds the wait.
type JobAwait struct {
	RequestID string
	OrgID     string
}

// JobClaim asks for the next attempt on behalf of a worker.
type JobClaim struct {
	RequestID string
	WorkerID  string
	Lease     time.Duration
}

// JobRenew extends a worker's lease.
type JobRenew struct {
	RequestID string
	Token     jobstate.Token
}

// JobSucceed reports an attempt's output.
type JobSucceed struct {
	RequestID string
	Token     jobstate.Token
	Output    jobstate.Output
}

// JobFail reports a failed attempt. LowDisk says it failed only because the worker's node is low on disk
// space (persistence/diskspace.ErrLow): the attempt does not count and the job waits for space until its
// deadline (jobstate.Record.WaitForDisk); Code and Retryable are then unused.
type JobFail struct {
	RequestID string
	Token     jobstate.Token
	Code      string
	Detail    string
	Retryable bool
	LowDisk   bool
}

// JobHandBack ends a worker's attempt without an outcome because its node is draining and ran out of time:
// the attempt does not count, and the job is placed again at once (jobstate.Record.HandBack). A repeat, or a
// hand-back of a lease that already ended, is refused as stale.
type JobHandBack struct {
	RequestID string
	Token     jobstate.Token
}

// JobTick makes the job apply what time decided (lease expiry, retry wait, deadline) and re-dispatch.
type JobTick struct {
	RequestID string
}

// JobCancel fails an active job with error_code "cancelled"; its hold is refunded and a worker's later
// report is refused. Cancelling an ended job changes nothing. With UnlessRunning (a file of a cancelled
// batch, spec 3.2: "after running files finish") only a job waiting for a worker is failed; a running one
// finishes its attempt (jobstate.Record.CancelWaiting), decided on the job's own record.
type JobCancel struct {
	RequestID     string
	UnlessRunning bool
}

// JobReply answers every job message.
type JobReply struct {
	Code     string
	Detail   string
	Record   *jobstate.Record
	Lease    *jobstate.Lease
	Replayed bool
}

// JobMessages lists the job actor's message types, for registration with the wire codec.
func JobMessages() []any {
	return []any{JobSubmit{}, JobGet{}, JobAwait{}, JobClaim{}, JobRenew{}, JobSucceed{}, JobFail{}, JobTick{}, JobCancel{}, JobReply{}, JobHandBack{}}
}
