// Package batchstate is the durable record of one batch (up to 100 files embedded together, spec 2.4) and the
// pure state machine over it: batch statuses (spec 3.2), item statuses (spec 3.3), counts, credits, cancel
// rules, draft expiry and the events a batch sends when it ends.
//
// The `batch` virtual actor owns one Record: it loads it, calls the methods here with the time of its injected
// clock, writes the record back with compare-and-set and only then does what the record asks for (Next). Like
// actors/jobstate, nothing here does I/O, reads a clock or keeps mutable global state.
//
// # House rules
//
// A command either changes the record (Revision moves) and returns nil, or returns an error and changes
// nothing. A command that already took effect returns nil and changes nothing (cluster requests can be
// delivered twice; DESIGN.md rule 2).
//
// # States
//
//	draft ──Start (within 24 h)──▶ starting ──first item decided──▶ processing ──last item ended──▶ assembling ─▶ completed
//	  │  └─Start or Tick after 24 h──▶ expired                                         └──(no archive)──▶ completed | failed
//	  └─Cancel──▶ cancelled (no event)        starting/processing ──Cancel──▶ (items end) ──▶ cancelled
//	zip request ──▶ starting
//
// Decisions the spec leaves open, and what we chose:
//
//   - starting → processing happens when the first item is accepted as a job or rejected.
//   - An item waiting for a concurrency slot stays `pending`: its credits are reserved together with the slot
//     (the job actor's reserve takes both), so `queued` means "accepted as a job, waiting for a worker".
//     Cancelling a draft rejects every item with error_code `cancelled` and leaves an archive `empty`.
//     Cancelling a started batch rejects pending items with error_code `cancelled` (never charged) and cancels the jobs
//     that wait for a worker (queued or retrying: failed `cancelled`, refunded); running files finish (succeeded and
//     charged, or failed as a single job would). The batch stays `processing` with cancel_requested until every item
//     ended, then ends `cancelled` (archive `empty`, its event once).
//   - Starting a cancelled or ended batch changes nothing and answers the batch (200, "safe to repeat").
//   - Item credits: null while pending; the hold while its job is active; the charge once succeeded; 0 once
//     rejected or failed. Batch credits: reserved = holds of active items, charged = sum of charges,
//     refunded = holds of items whose job failed.
//   - Counts: pending, accepted (every item that became a job), rejected, succeeded, failed, in_progress
//     (queued, running or retrying).
//   - Events (spec 6): `watermark.batch.completed` / `.failed` / `.cancelled` are recorded in the record in
//     the same write that ends the batch (Events); the actor hands them to delivery and marks them. A
//     cancelled draft sends none.
//   - Output format: output_format (png, jpeg, webp) is the format of the image items' results only;
//     documents and videos keep theirs. PNG is stored and fingerprinted as before the option existed (empty
//     field, no fingerprint bytes), so records of older builds keep matching their replays.
//   - Retention: a draft expires 24 h after creation; the record is kept 30 days from creation and then
//     reduced to a tombstone (Removed) that keeps the key's fingerprint, so that reusing the key answers 409
//     (spec 7: "batch key reused ... after batch records were removed").
package batchstate
