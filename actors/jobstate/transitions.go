package jobstate

import (
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// Backoff is the wait before the attempt that follows failed attempt n (1-based): 2 s, 4 s, 8 s, 16 s.
// Attempt 5 is the last and has no successor; Backoff keeps doubling past it only so that it is total.
func Backoff(n int) time.Duration {
	if n < 1 {
		n = 1
	}
	if n > 20 {
		n = 20 // far beyond MaxAttempts; only keeps the shift from overflowing
	}
	return FirstBackoff << (n - 1)
}

// changed marks a real change: Revision is how the actor knows it must write the record.
func (r *Record) changed() { r.Revision++ }

// Claimable reports whether a worker may claim the job at now: it is queued, or retrying with its wait over,
// and the deadline has not passed.
func (r *Record) Claimable(now time.Time) bool {
	if !now.Before(r.Deadline) {
		return false
	}
	switch r.Status {
	case StatusQueued:
		return true
	case StatusRetrying:
		return !now.Before(r.NextAttemptAt)
	}
	return false
}

// Claim hands the next attempt to workerID under a lease of leaseDuration and counts the attempt. Worker ids
// name one worker incarnation (a restarted worker gets a new id), so a repeated Claim by the holder of the
// live lease is a duplicate delivery: it returns the same lease and changes nothing.
func (r *Record) Claim(workerID string, now time.Time, leaseDuration time.Duration) (Lease, error) {
	return r.ClaimOn(workerID, "", now, leaseDuration)
}

// MaxAttemptNodes bounds Record.AttemptNodes: attempts handed back by draining nodes do not count toward
// MaxAttempts, so the list keeps the latest ones only.
const MaxAttemptNodes = 16

// ClaimOn is Claim by a worker of node (recorded in AttemptNodes when the claim starts an attempt; "" records
// nothing).
func (r *Record) ClaimOn(workerID, node string, now time.Time, leaseDuration time.Duration) (Lease, error) {
	if workerID == "" {
		return Lease{}, fmt.Errorf("claim job %s: worker id is empty: %w", r.RequestID, ErrInvalid)
	}
	if leaseDuration <= 0 {
		return Lease{}, fmt.Errorf("claim job %s: lease duration %v: %w", r.RequestID, leaseDuration, ErrInvalid)
	}
	now = now.UTC()
	if r.Status.Terminal() {
		return Lease{}, fmt.Errorf("claim job %s: job %s: %w", r.RequestID, r.Status, ErrTerminal)
	}
	// The deadline is checked before the replay, so that a duplicate claim cannot send a worker off on work
	// whose result would be refused.
	if !now.Before(r.Deadline) {
		return Lease{}, fmt.Errorf("claim job %s: deadline %s: %w", r.RequestID, r.Deadline.Format(time.RFC3339), ErrDeadlineExceeded)
	}
	if r.Status == StatusRunning && r.Lease.WorkerID == workerID && now.Before(r.Lease.ExpiresAt) {
		return *r.Lease, nil
	}
	if !r.Claimable(now) {
		return Lease{}, fmt.Errorf("claim job %s by %s: job %s: %w", r.RequestID, workerID, r.describe(now), ErrNotClaimable)
	}
	r.Attempts++
	r.Epoch++
	r.Lease = &Lease{WorkerID: workerID, Token: r.Epoch, ClaimedAt: now, ExpiresAt: now.Add(leaseDuration),
		Duration: leaseDuration}
	r.Status = StatusRunning
	r.NextAttemptAt = time.Time{}
	if node != "" {
		r.AttemptNodes = append(r.AttemptNodes, node)
		if n := len(r.AttemptNodes); n > MaxAttemptNodes {
			r.AttemptNodes = slices.Delete(r.AttemptNodes, 0, n-MaxAttemptNodes)
		}
	}
	if r.StartedAt.IsZero() {
		r.StartedAt = now
	}
	r.changed()
	return *r.Lease, nil
}

// describe says why a job is not claimable, for error messages.
func (r *Record) describe(now time.Time) string {
	switch r.Status {
	case StatusRunning:
		if !now.Before(r.Lease.ExpiresAt) {
			return fmt.Sprintf("running under expired lease %d (tick first)", r.Lease.Token)
		}
		return fmt.Sprintf("running under lease %d of %s until %s", r.Lease.Token, r.Lease.WorkerID,
			r.Lease.ExpiresAt.Format(time.RFC3339Nano))
	case StatusRetrying:
		return fmt.Sprintf("retrying, next attempt at %s", r.NextAttemptAt.Format(time.RFC3339Nano))
	}
	return string(r.Status)
}

// checkLease verifies that token holds the live lease of a running job at now and that the deadline has not
// passed. It is the fence every worker command goes through.
func (r *Record) checkLease(token Token, now time.Time) error {
	if r.Status.Terminal() {
		return fmt.Errorf("job %s: %w", r.Status, ErrTerminal)
	}
	if r.Status != StatusRunning || r.Lease.Token != token {
		cur := Token(0)
		if r.Lease != nil {
			cur = r.Lease.Token
		}
		return &StaleLeaseError{Token: token, Current: cur}
	}
	if !now.Before(r.Lease.ExpiresAt) {
		return &StaleLeaseError{Token: token, Current: token, Expired: true}
	}
	if !now.Before(r.Deadline) {
		return fmt.Errorf("deadline %s: %w", r.Deadline.Format(time.RFC3339), ErrDeadlineExceeded)
	}
	return nil
}

// Renew extends the live lease to now + its duration (never shortening it) and returns it. Past the deadline
// it refuses with ErrDeadlineExceeded, which tells the worker to give up early.
func (r *Record) Renew(token Token, now time.Time) (Lease, error) {
	now = now.UTC()
	if err := r.checkLease(token, now); err != nil {
		return Lease{}, fmt.Errorf("renew lease %d of job %s: %w", token, r.RequestID, err)
	}
	if exp := now.Add(r.Lease.Duration); exp.After(r.Lease.ExpiresAt) {
		r.Lease.ExpiresAt = exp
		r.changed()
	}
	return *r.Lease, nil
}

// Succeed commits the attempt's output as the job's outcome: the status, output, asset ids and charge are
// written together (DESIGN.md rule 3), and the result stays downloadable for ResultRetention. Repeating the
// same Succeed after success is a no-op; any other command on the ended job fails with ErrTerminal.
func (r *Record) Succeed(token Token, out Output, now time.Time) error {
	now = now.UTC()
	if r.Status == StatusSucceeded && token == r.Epoch && r.Output != nil && *r.Output == out {
		return nil
	}
	if err := r.checkLease(token, now); err != nil {
		return fmt.Errorf("succeed job %s with lease %d: %w", r.RequestID, token, err)
	}
	if err := r.validOutput(out); err != nil {
		return fmt.Errorf("succeed job %s with lease %d: %w", r.RequestID, token, err)
	}
	r.succeed(out, now)
	return nil
}

// succeed commits out as the job's outcome (Succeed, SucceedLapsed).
func (r *Record) succeed(out Output, now time.Time) {
	o := out
	r.Output = &o
	r.Status = StatusSucceeded
	r.Lease = nil
	r.CompletedAt = now
	r.ResultExpiresAt = now.Add(ResultRetention)
	r.changed()
}

// SucceedLapsed is DiskLapse for a success: attempt token stored its result and reported it on time, but the
// report could not be written for want of disk space (nor the renewals), and the lease lapsed. The caller (the
// job actor, which saw that report refused) applies it now, as Succeed would have on time, instead of the
// lease's expiry, which would count the attempt lost and make the stored result again. It reports whether the
// record changed: only when attempt token still runs, its lease expired, the deadline has not come, and out
// is a valid output of the job.
func (r *Record) SucceedLapsed(token Token, out Output, now time.Time) bool {
	now = now.UTC()
	if r.Status != StatusRunning || r.Lease == nil || r.Lease.Token != token || now.Before(r.Lease.ExpiresAt) ||
		!now.Before(r.Deadline) || r.validOutput(out) != nil {
		return false
	}
	r.succeed(out, now)
	return true
}

func (r *Record) validOutput(o Output) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("output: %s: %w", fmt.Sprintf(format, args...), ErrInvalid)
	}
	switch {
	case o.BlobKey == "":
		return bad("blob key is empty")
	case o.Size <= 0:
		return bad("size %d", o.Size)
	case !ValidHex(o.SHA256, 64):
		return bad("sha256 %q is not 64 lowercase hex", o.SHA256)
	case o.ContentType == "":
		return bad("content type is empty")
	case o.Accelerator != AcceleratorCPU && o.Accelerator != AcceleratorGPU:
		return bad("accelerator %q", o.Accelerator)
	case o.Charge < 0 || o.Charge > r.CreditsHeld:
		return bad("charge %d outside the hold of %d credits", o.Charge, r.CreditsHeld)
	}
	if r.Operation == OperationEmbed {
		switch {
		case o.AssetID == "" || o.SourceAssetID == "" || o.AssetID == o.SourceAssetID:
			return bad("an embed needs two distinct asset ids, got %q and %q", o.AssetID, o.SourceAssetID)
		case o.WatermarkID != r.WatermarkID:
			return bad("watermark id %q differs from the one fixed at acceptance", o.WatermarkID)
		case o.Detection != "":
			return bad("an embed carries no detection summary")
		}
		return nil
	}
	if o.AssetID != "" || o.SourceAssetID != "" || o.WatermarkID != "" || o.Units != "" {
		return bad("a detection creates no assets and carries no watermark id or embed units")
	}
	if len(o.Detection) > MaxDetectionSummary {
		return bad("detection summary of %d bytes exceeds %d", len(o.Detection), MaxDetectionSummary)
	}
	return nil
}

// ValidCode accepts error codes as the API shows them: 1 to 64 of lowercase letters, digits and underscores.
func ValidCode(code string) bool {
	if code == "" || len(code) > 64 {
		return false
	}
	for i := 0; i < len(code); i++ {
		c := code[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_' {
			return false
		}
	}
	return true
}

// TruncateDetail makes a worker's message safe to store and show: valid UTF-8 (it ends up in JSON), at most
// maxDetail bytes, cut at a rune boundary. Batch items keep their details the same way.
func TruncateDetail(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= maxDetail {
		return s
	}
	n := maxDetail
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// HandBack ends the current attempt without an outcome because its worker's node is shutting down (a
// drain that ran out of time): the job is claimable again at once, and the attempt does not count toward
// MaxAttempts (nothing went wrong with the job), so Attempts goes back by one: the job is queued again when
// this was its first attempt, else retrying with no wait. The lease's holder must still hold it; a repeat
// after the hand-back is refused as stale, like any command of a lease that ended.
func (r *Record) HandBack(token Token, now time.Time) error {
	now = now.UTC()
	if err := r.checkLease(token, now); err != nil {
		return fmt.Errorf("hand back job %s with lease %d: %w", r.RequestID, token, err)
	}
	r.Lease = nil
	r.Attempts--
	if r.Attempts == 0 {
		r.Status = StatusQueued
		r.NextAttemptAt = time.Time{}
	} else {
		// An earlier attempt ended retryably (that is how this one started), so LastError is set.
		r.Status = StatusRetrying
		r.NextAttemptAt = now
	}
	r.settleCancel(now)
	r.changed()
	return nil
}

// WaitForDisk ends the current attempt without an outcome because its node was low on disk space (it could
// not store the result, or a file the work needs): nothing is wrong with the job, and the condition clears when
// an operator frees space, so the attempt does not count toward MaxAttempts (like a hand-back) and the job
// waits, retrying, for FirstBackoff doubling up to MaxDiskWait (DiskWaits counts the waits), so that a full node
// does not spin on it; another node, or this one later, takes it then. The waits go on until the deadline,
// where Tick fails the job with deadline_exceeded, saying that the disk was low. detail says what could not be
// written, for the logs and that failure. A repeat after the wait began is refused as stale, like any command
// of a lease that ended.
func (r *Record) WaitForDisk(token Token, detail string, now time.Time) error {
	now = now.UTC()
	if err := r.checkLease(token, now); err != nil {
		return fmt.Errorf("wait for disk space, job %s with lease %d: %w", r.RequestID, token, err)
	}
	r.waitForDisk(token, detail, now)
	return nil
}

// DiskLapse ends a running attempt whose lease ran out while its node could not record anything: below an
// eighth of --min-free-disk even a worker's reports on its attempt are refused, so the attempt's WaitForDisk
// could not be written, nor its renewals, and the lease lapsed. The caller (the job actor, which saw that report refused
// for want of disk space) applies the report now, as WaitForDisk would have on time, instead of the lease's
// expiry (Tick: worker_lost, counted). The record cannot know the report was made; the caller does. It
// reports whether the record changed: only when attempt token still runs, its lease expired, and the
// deadline has not come (Tick fails the job then).
func (r *Record) DiskLapse(token Token, detail string, now time.Time) bool {
	now = now.UTC()
	if r.Status != StatusRunning || r.Lease == nil || r.Lease.Token != token || now.Before(r.Lease.ExpiresAt) ||
		!now.Before(r.Deadline) {
		return false
	}
	r.waitForDisk(token, detail, now)
	return true
}

// waitForDisk ends attempt token as a wait for disk space (WaitForDisk, DiskLapse).
func (r *Record) waitForDisk(token Token, detail string, now time.Time) {
	r.Lease = nil
	r.Attempts--
	r.DiskWaits++
	r.LastError = &AttemptError{Token: token, Code: CodeLowDisk, Detail: TruncateDetail(detail), Retryable: true, At: now}
	r.Status = StatusRetrying
	r.NextAttemptAt = now.Add(min(Backoff(r.DiskWaits), MaxDiskWait))
	if r.NextAttemptAt.After(r.Deadline) {
		r.NextAttemptAt = r.Deadline // not claimable then: the wake at the deadline fails the job
	}
	r.settleCancel(now)
	r.changed()
}

// WaitingForDisk reports whether the job waits because its last attempt met a node low on disk space
// (WaitForDisk), for an answer that says so.
func (r *Record) WaitingForDisk() bool {
	return r.Status == StatusRetrying && r.LastError != nil && r.LastError.Code == CodeLowDisk
}

// Fail ends the current attempt with an error. The job goes to retrying when the error is retryable,
// attempts remain and the next attempt could start before the deadline; otherwise it fails with code.
// A repeated Fail for an attempt that already failed the same way is a no-op.
func (r *Record) Fail(token Token, code, detail string, retryable bool, now time.Time) error {
	now = now.UTC()
	if !ValidCode(code) {
		return fmt.Errorf("fail job %s with lease %d: error code %q is not 1 to 64 of [a-z0-9_]: %w",
			r.RequestID, token, code, ErrInvalid)
	}
	detail = TruncateDetail(detail)
	if e := r.LastError; e != nil && e.Token == token && e.Code == code && e.Detail == detail &&
		e.Retryable == retryable && (r.Lease == nil || r.Lease.Token != token) {
		return nil // duplicate delivery of the Fail that ended this attempt
	}
	if err := r.checkLease(token, now); err != nil {
		return fmt.Errorf("fail job %s with lease %d: %w", r.RequestID, token, err)
	}
	r.endAttempt(AttemptError{Token: token, Code: code, Detail: detail, Retryable: retryable, At: now}, now)
	r.changed()
	return nil
}

// endAttempt closes the running attempt with e and moves the job to retrying or failed.
func (r *Record) endAttempt(e AttemptError, now time.Time) {
	r.Lease = nil
	r.LastError = &e
	if next := now.Add(Backoff(r.Attempts)); e.Retryable && r.Attempts < MaxAttempts && next.Before(r.Deadline) {
		r.Status = StatusRetrying
		r.NextAttemptAt = next
		r.settleCancel(now)
		return
	}
	r.finishFailed(e.Code, e.Detail, now)
}

func (r *Record) finishFailed(code, detail string, now time.Time) {
	r.Status = StatusFailed
	r.Lease = nil
	r.NextAttemptAt = time.Time{}
	r.ErrorCode = code
	r.ErrorDetail = detail
	r.CompletedAt = now
}

// Cancel fails an active job with error_code "cancelled" (a canceled batch's files); a running worker's
// later commands are refused with ErrTerminal. Cancelling a job already cancelled is a no-op.
func (r *Record) Cancel(now time.Time) error {
	return r.Abort(CodeCancelled, "the job was cancelled before it finished", now)
}

// CancelWaiting applies a started batch's cancel to one of its files (spec 3.2: the batch is cancelled
// "after running files finish"; spec 3.3: a queued item is failed and refunded). A job waiting for a worker
// (queued, or retrying: waiting for its next attempt, a wait for disk space included) fails with "cancelled"
// as Cancel does. A running job is left to finish its attempt: it succeeds (and is charged) or fails with
// its attempt's code as a single job would; it only remembers the cancel (CancelPending), so that an attempt
// ending without an outcome (a retryable failure, a lost worker, a hand-back, a wait for disk space), which
// would have it wait for a worker again, fails it with "cancelled" instead (settleCancel). The decision is
// taken on the job's own state, in the same command as any claim, so a job claimed just before the cancel
// runs on, and one cancelled just before a claim is never claimed. A repeat is a no-op; an ended job is
// refused with ErrTerminal, like Cancel.
func (r *Record) CancelWaiting(now time.Time) error {
	now = now.UTC()
	if r.Status.Terminal() {
		if r.Status == StatusFailed && r.ErrorCode == CodeCancelled {
			return nil
		}
		return fmt.Errorf("cancel job %s unless running: job %s: %w", r.RequestID, r.Status, ErrTerminal)
	}
	if r.Status != StatusRunning {
		return r.Cancel(now)
	}
	if !r.CancelPending {
		r.CancelPending = true
		r.changed()
	}
	return nil
}

// settleCancel fails with "cancelled" a job whose batch was cancelled while it ran (CancelPending) once an
// attempt left it waiting for a worker again: the cancel waited for that attempt only.
func (r *Record) settleCancel(now time.Time) {
	if !r.CancelPending || (r.Status != StatusQueued && r.Status != StatusRetrying) {
		return
	}
	detail := "the batch was cancelled while this file ran, and its attempt ended without a result"
	if e := r.LastError; e != nil && e.Code != "" {
		detail += " (" + e.Code + ": " + e.Detail + ")"
	}
	r.finishFailed(CodeCancelled, TruncateDetail(detail), now)
}

// Abort fails an active job with code without a worker attempt, for endings the actor finds itself (a
// cancel, an input that vanished from the blob store). Aborting again with the same code is a no-op.
func (r *Record) Abort(code, detail string, now time.Time) error {
	now = now.UTC()
	if !ValidCode(code) {
		return fmt.Errorf("abort job %s: error code %q is not 1 to 64 of [a-z0-9_]: %w", r.RequestID, code, ErrInvalid)
	}
	if r.Status == StatusFailed && r.ErrorCode == code {
		return nil
	}
	if r.Status.Terminal() {
		return fmt.Errorf("abort job %s with %s: job %s: %w", r.RequestID, code, r.Status, ErrTerminal)
	}
	r.finishFailed(code, TruncateDetail(detail), now)
	r.changed()
	return nil
}

// Tick applies what the passage of time decides at now, and reports whether the record changed:
//   - the deadline has passed on an active job: failed with "deadline_exceeded" (this wins over the others);
//   - a running job's lease has expired (its worker or node died): the attempt counts, and the job retries
//     like after a retryable failure, or fails with "worker_lost" when attempts are exhausted.
//
// A retrying job whose wait is over is left alone: it is Claimable and stays `retrying` until claimed.
// Terminal records ignore Tick.
func (r *Record) Tick(now time.Time) bool {
	now = now.UTC()
	if !r.Status.Active() {
		return false
	}
	if !now.Before(r.Deadline) {
		detail := fmt.Sprintf("the job did not finish within %s of acceptance (%d attempts)", r.Deadline.Sub(r.CreatedAt), r.Attempts)
		if r.WaitingForDisk() {
			detail += fmt.Sprintf("; the node was low on disk space and could not store its result (%d tries, not counted as attempts)", r.DiskWaits)
		}
		r.finishFailed(CodeDeadlineExceeded, detail, now)
		r.changed()
		return true
	}
	if r.Status == StatusRunning && !now.Before(r.Lease.ExpiresAt) {
		l := r.Lease
		r.endAttempt(AttemptError{Token: l.Token, Code: CodeWorkerLost, Retryable: true, At: now,
			// The worker's name is internal (node and slot); the detail is shown to the client.
			Detail: fmt.Sprintf("the worker running attempt %d stopped (its node may have failed)", r.Attempts)}, now)
		r.changed()
		return true
	}
	return false
}

// WorkerGone ends the running attempt whose worker's cluster member left (killed, or declared dead), as the
// lease's expiry would, without waiting for it: that worker can no longer renew, finish or hand back (a node
// the cluster dropped exits as soon as it learns so), and a job would otherwise wait out the whole lease
// (30 s by default) after the cluster already knew. The caller decides that the member left; the record
// cannot know it. It reports whether the record changed: false unless the job is running.
func (r *Record) WorkerGone(now time.Time) bool {
	now = now.UTC()
	if r.Status != StatusRunning {
		return false
	}
	l := r.Lease
	r.endAttempt(AttemptError{Token: l.Token, Code: CodeWorkerLost, Retryable: true, At: now,
		Detail: fmt.Sprintf("the worker running attempt %d stopped (its node left the cluster)", r.Attempts)}, now)
	r.changed()
	return true
}

// NextWake is the next time at which the job needs attention without any message arriving: a lease expiry,
// the end of a retry wait, or the deadline. ok is false for terminal records.
func (r *Record) NextWake() (at time.Time, ok bool) {
	if !r.Status.Active() {
		return time.Time{}, false
	}
	at = r.Deadline
	switch r.Status {
	case StatusRunning:
		if r.Lease.ExpiresAt.Before(at) {
			at = r.Lease.ExpiresAt
		}
	case StatusRetrying:
		if r.NextAttemptAt.Before(at) {
			at = r.NextAttemptAt
		}
	}
	return at, true
}

// ResultAvailable reports whether a succeeded job's result can still be downloaded at now (410 afterwards).
func (r *Record) ResultAvailable(now time.Time) bool {
	return r.Status == StatusSucceeded && now.Before(r.ResultExpiresAt)
}
