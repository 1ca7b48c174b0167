// Package jobstate is the durable record of one watermarking job and the pure state machine over it.
//
// A job is one embed or detect request on one image, document or video, identified by its request_id
// (`req_` + 64 hex). The `job` virtual actor owns one Record: it loads it from the store when it activates,
// calls the methods here with the time it read from its injected clock, writes the record back with
// compare-and-set, and only then performs the effects the record asks for (see PendingEffects). Nothing in
// this package does I/O, reads a clock, or keeps global mutable state; like etcd's raft, the state machine is
// pure and the I/O lives at the edges, so every transition is testable with a hand-moved clock.
//
// # House rules of every method
//
// A command method (Claim, Renew, Succeed, Fail, Abort, Cancel, Tick, MarkSettled) either changes the record
// and returns nil, or returns an error and changes nothing. A repeated command that already took effect
// returns nil and changes nothing, because cluster requests can be delivered more than once (DESIGN.md rule 2):
// the holder of the live lease claiming again gets the same lease; the Succeed that ended the job, repeated
// with the same token and output; the Fail that ended an attempt, repeated with the same token, code, detail
// and retryable flag; Abort/Cancel with the code the job already failed with; MarkSettled of a settled effect.
// Every other command on an ended job fails with ErrTerminal, and Tick ignores ended jobs. Record.Revision is
// incremented on every real change, so the actor knows whether there is anything to write.
//
// Commands never move the record because time passed; only Tick does. A command that arrives after its lease
// expired or after the deadline is refused (ErrStaleLease, ErrDeadlineExceeded) even if Tick has not run yet,
// so the outcome never depends on when the actor happened to tick.
//
// # States
//
//	queued ──Claim──▶ running ──Succeed──────────────────────────────▶ succeeded
//	                   │  ▲
//	     Fail(retry) / │  │ Claim (once NextAttemptAt has passed)
//	   lease expiry    ▼  │
//	                  retrying
//	any active ──Fail(final) / lease expiry on the last attempt / deadline / Abort, Cancel──▶ failed
//
// Decisions the spec leaves open, and what we chose:
//
//   - Deadline. The spec closes a job whose deadline passes but does not name the status. We use `failed`
//     with error_code "deadline_exceeded": clients already handle `failed`, and the refund rule is the same.
//     The deadline wins over any other time-driven move due at the same moment.
//   - Retry waits. After failed attempt n (1..4) the next attempt may start Backoff(n) later: 2 s, 4 s, 8 s,
//     16 s. No jitter: the state machine is deterministic, and dispatch through the worker pool's capacity
//     already spreads a herd of retries. A retry that could not start before the deadline is not scheduled;
//     the job fails at once with the attempt's own error, which tells the client more than a later timeout.
//   - Claimable retries. When the wait has passed the status stays `retrying` (Tick changes nothing) and
//     Claimable reports true. `queued` means "never attempted"; going back to it would hide from the client
//     that a retry is under way, and would cost a write per retry for no information.
//   - Low disk space does not count. An attempt that failed only because its node could not write for want
//     of disk space (WaitForDisk) is given back like a drain's HandBack, and the job waits, `retrying`, for
//     2 s doubling up to MaxDiskWait (30 s, the low disk's Retry-After) before the next try, until the
//     deadline: the condition clears when an operator frees space, and counting it failed accepted jobs for
//     good within a minute. While it waits after its first try the job is `retrying` with 0 attempts.
//   - Lease expiry counts the attempt (it was counted when the worker claimed it). On the last attempt it
//     fails the job with error_code "worker_lost". Except DiskLapse: a lease that ran out because even the
//     low-disk report could not be written (the caller saw it refused for want of disk space) ends as that
//     report would have, a wait for disk space, not counted.
//   - Refused late work. A success that arrives after the lease expired or after the deadline is refused
//     even though the output exists: accepting it would make the outcome depend on how late the actor
//     ticked. The output stays under the job's name, where the next attempt's replaces it. Except
//     SucceedLapsed: a success that arrived on time but could not be written for want of disk space (the
//     caller saw it refused so) is applied once the lease lapsed, as DiskLapse applies a wait.
//   - Credits on the receipt: the amount held while the job is active, the actual charge once it succeeded,
//     and 0 once it failed (the hold was refunded, so the actual charge is zero).
//   - Effects are derived, not emitted: PendingEffects computes from the record what is still owed (the
//     credit charge or release, asset records, storage delivery, batch and webhook notices, plus the volatile
//     dispatch and wake-up timer), and MarkSettled records each completed one. A re-activated actor therefore
//     finds exactly the missing effects in the record it loaded (rule 3), with no separate effect log.
//     The commit effects (asset records, then the charge; or the refund) come first; storage delivery, the
//     batch notice and the webhook event are owed only once those are settled, and the actor must not show a
//     terminal outcome to a caller before Committed reports true. Batch files notify their batch, never a
//     webhook of their own (spec 6, rule 1).
package jobstate
