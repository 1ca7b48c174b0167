package actors

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	pcluster "github.com/asynkron/protoactor-go/cluster"

	"filigrane/actors/durable"
	"filigrane/actors/jobstate"
	"filigrane/persistence"
	"filigrane/persistence/diskspace"
)

// Storage keys of jobs.
const (
	prefixJob       = "job/"         // job/<request_id> -> jobstate.Record
	prefixActiveJob = "jobs/active/" // jobs/active/<request_id> -> org id; removed once the outcome is committed
)

func jobKey(id string) []byte { return []byte(prefixJob + id) }

// JobProps returns the props of the job actor.
func JobProps(d *Deps) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return &jobActor{deps: d} })
}

// jobActor owns one job record. It runs the jobstate machine: it loads the record, applies a command with
// the injected clock, writes the record with compare-and-set, and only then performs the effects the record
// still owes (dispatch, wake-up, asset records, charge or refund) and answers. A failed compare-and-set
// means another activation owns the job: it answers ReplyRetry and stops.
type jobActor struct {
	deps    *Deps
	id      string
	cell    *durable.Cell[jobstate.Record, *jobstate.Record]
	rec     *jobstate.Record // the cell's record; nil when the job does not exist
	waiters []*actor.PID
	wake    *time.Timer
	wakeAt  time.Time
	// diskRefused is a worker's report of how its attempt ended (that it met a low disk, JobFail with LowDisk,
	// or that it stored its result, JobSucceed) that this activation could not record because the store
	// refused the write for want of disk space (below an eighth of --min-free-disk, see reporting); the
	// attempt's lease then runs out unrecorded. Once the record can be written, the tick applies it instead of
	// the lease's expiry (jobstate.Record.DiskLapse, SucceedLapsed), so the attempt is not counted as a lost
	// worker, nor its stored result made again. Held in memory only, and the activation stays while it is held.
	diskRefused *refusedReport
	// writeLow says that the last write was refused for want of disk space (nothing was written).
	writeLow bool
	// reporting says that the message being handled is a worker's report on its running attempt (a renewal,
	// or how it ended): its writes are the record of work already done (diskspace.Outcome), which a node low
	// on disk takes down to an eighth of its reserve where other records stop at a quarter. Refused, they lost
	// the work (a result stored but never recorded; a wait for disk space counted as a lost worker once the
	// lease lapsed), and nothing else could remember it across a restart.
	reporting bool
}

func (a *jobActor) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		a.deps.actorDelta(KindJob, 1)
		ctx.SetReceiveTimeout(2 * time.Minute)
	case *actor.Stopped:
		a.deps.actorDelta(KindJob, -1)
		if a.wake != nil {
			a.wake.Stop()
		}
	case *pcluster.ClusterInit:
		a.id = msg.Identity.Identity
	case *actor.ReceiveTimeout:
		if len(a.waiters) == 0 && a.diskRefused == nil {
			ctx.Poison(ctx.Self())
		}
	case *JobSubmit:
		a.submit(ctx, msg)
	case *JobGet:
		if a.loadFor(ctx, msg.RequestID, msg.OrgID) {
			a.deps.Respond(ctx, &JobReply{Record: a.rec})
		}
	case *JobAwait:
		if !a.loadFor(ctx, msg.RequestID, msg.OrgID) {
			return
		}
		if a.rec.Committed() {
			a.deps.Respond(ctx, &JobReply{Record: a.rec})
			return
		}
		if s := ctx.Sender(); s != nil {
			a.waiters = append(a.waiters, s)
		}
	case *JobClaim:
		var lease jobstate.Lease
		a.command(ctx, msg.RequestID, func(r *jobstate.Record, now time.Time) error {
			var err error
			lease, err = r.ClaimOn(msg.WorkerID, WorkerNode(msg.WorkerID), now, msg.Lease)
			return err
		}, func(rep *JobReply) { rep.Lease = &lease })
	case *JobRenew:
		var lease jobstate.Lease
		a.report(ctx, msg.RequestID, func(r *jobstate.Record, now time.Time) error {
			var err error
			lease, err = r.Renew(msg.Token, now)
			return err
		}, func(rep *JobReply) { rep.Lease = &lease })
	case *JobSucceed:
		a.writeLow = false
		a.report(ctx, msg.RequestID, func(r *jobstate.Record, now time.Time) error {
			return r.Succeed(msg.Token, msg.Output, now)
		}, nil)
		out := msg.Output
		a.keepRefused(&refusedReport{token: msg.Token, output: &out})
	case *JobFail:
		a.writeLow = false
		a.report(ctx, msg.RequestID, func(r *jobstate.Record, now time.Time) error {
			if msg.LowDisk {
				return r.WaitForDisk(msg.Token, msg.Detail, now)
			}
			return r.Fail(msg.Token, msg.Code, msg.Detail, msg.Retryable, now)
		}, nil)
		if msg.LowDisk {
			a.keepRefused(&refusedReport{token: msg.Token, detail: msg.Detail})
		}
	case *JobHandBack:
		a.report(ctx, msg.RequestID, func(r *jobstate.Record, now time.Time) error {
			return r.HandBack(msg.Token, now)
		}, nil)
	case *JobTick:
		if !a.load(ctx, msg.RequestID) {
			return // answered
		}
		if a.rec == nil {
			// The sweeper found an entry whose submission never committed its record.
			if a.voidOrphan(ctx) {
				a.deps.Respond(ctx, &JobReply{Code: ReplyNotFound})
			}
			return
		}
		stored := a.storedOutcome()
		a.command(ctx, msg.RequestID, func(r *jobstate.Record, now time.Time) error {
			if f := a.diskRefused; f != nil && f.apply(r, now) {
				return nil
			}
			if stored != nil && r.Lease != nil && r.SucceedLapsed(r.Lease.Token, *stored, now) {
				a.deps.Logger.Info().Str("job", a.id).Msg("the attempt's lease lapsed with its result stored; the job succeeds from it")
				return nil
			}
			// The sweeper ticks every active job every few seconds: a running attempt whose worker's cluster
			// member left ends then, not when its lease runs out.
			if !r.Tick(now) && r.Status == jobstate.StatusRunning && a.deps.Caller != nil &&
				a.deps.Caller.MemberGone(WorkerNode(r.Lease.WorkerID), WorkerMember(r.Lease.WorkerID)) {
				r.WorkerGone(now)
			}
			return nil
		}, nil)
	case *JobCancel:
		a.command(ctx, msg.RequestID, func(r *jobstate.Record, now time.Time) error {
			if r.Status.Terminal() {
				return nil // it ended first (finished, or cancelled before): nothing to cancel
			}
			if msg.UnlessRunning {
				return r.CancelWaiting(now)
			}
			return r.Cancel(now)
		}, nil)
	}
}

// load reads the record once per activation; a missing record leaves rec nil.
func (a *jobActor) load(ctx actor.Context, requestID string) bool {
	if a.id == "" {
		a.id = requestID
	}
	if requestID != a.id {
		a.deps.Respond(ctx, &JobReply{Code: ReplyNotFound})
		return false
	}
	if a.cell == nil {
		a.cell = &durable.Cell[jobstate.Record, *jobstate.Record]{Store: a.deps.Store, Key: jobKey(a.id),
			Timeout: a.deps.StoreTimeout, Absent: (*jobstate.Record).IsVoid}
	}
	rec, err := a.cell.Load(a.deps.lifetime())
	if err != nil {
		a.fail(ctx, err, "load job")
		return false
	}
	if rec.IsVoid() {
		rec = nil // no job; a submission replaces the void record at its version
	}
	a.rec = rec
	return true
}

// loadFor loads the record and answers not found when it does not exist or belongs to another organization.
func (a *jobActor) loadFor(ctx actor.Context, requestID, orgID string) bool {
	if !a.load(ctx, requestID) {
		return false
	}
	if a.rec == nil || (orgID != "" && a.rec.OrgID != orgID) {
		a.deps.Respond(ctx, &JobReply{Code: ReplyNotFound})
		return false
	}
	return true
}

func (a *jobActor) fail(ctx actor.Context, err error, what string) {
	a.deps.Logger.Error().Err(err).Str("job", a.id).Msg(what)
	a.deps.Respond(ctx, &JobReply{Code: ReplyInternal, Detail: "job state unavailable"})
	ctx.Poison(ctx.Self())
}

// save writes rec with compare-and-set and answers the request itself when that fails: on a lost race with
// ReplyRetry (and the activation stops), otherwise ReplyInternal.
func (a *jobActor) save(ctx actor.Context, rec *jobstate.Record) bool {
	err := a.write(ctx, rec)
	switch {
	case err == nil:
		return true
	case durable.Fenced(err):
		a.deps.Respond(ctx, &JobReply{Code: ReplyRetry, Detail: "job state changed elsewhere; retry"})
	default:
		a.deps.Respond(ctx, &JobReply{Code: ReplyInternal, Detail: "job state unavailable"})
	}
	return false
}

// write stores rec with compare-and-set. A lost race means another activation owns the job: this one stops.
// So does any other failure, except a write refused for want of disk space (persistence/diskspace.ErrLow):
// that refusal comes before anything is written, so the cell and a.rec are as they were and the activation
// goes on, keeping what it could not record yet (diskRefused).
func (a *jobActor) write(ctx actor.Context, rec *jobstate.Record) error {
	life := a.deps.lifetime()
	if a.reporting {
		life = diskspace.Outcome(life)
	}
	err := a.cell.Save(life, rec)
	a.writeLow = errors.Is(err, diskspace.ErrLow)
	switch {
	case a.writeLow:
		a.deps.Logger.Warn().Err(err).Str("job", a.id).Msg("save job: the node is low on disk space")
		return err
	case err != nil:
		a.deps.saveFailed(ctx, err, KindJob, a.id)
		return err
	}
	a.rec = rec
	return nil
}

func (a *jobActor) submit(ctx actor.Context, msg *JobSubmit) {
	spec := msg.Spec
	if !a.load(ctx, spec.RequestID) {
		return
	}
	if a.rec != nil {
		fp, err := spec.Fingerprint()
		switch {
		case err != nil:
		case a.rec.IsRedelivery(spec):
		case a.rec.OrgID == spec.OrgID:
			err = a.rec.CheckReplay(fp)
		default:
			err = jobstate.ErrIdempotencyConflict
		}
		if err != nil {
			a.deps.Respond(ctx, &JobReply{Code: ReplyIdempotencyConflict, Detail: err.Error()})
			return
		}
		if !a.rec.Status.Terminal() {
			// A replay or a redelivery often follows the end of the activation that accepted the job (the
			// reason the caller retried), which may have ended after the record's commit and before its entry
			// in the active index or its dispatch: repeat both (each is idempotent), or the job would stay
			// queued with no sweeper tick ever reaching it.
			if err := a.indexActive(a.rec.OrgID); err != nil {
				a.deps.Logger.Error().Err(err).Str("job", a.id).Msg("index active job")
			}
			a.settle(ctx)
		}
		// An edge's claim (ClaimAs, unique to one request) whose record was written although the save reported
		// a failure (a write that timed out while the object storage stalled and landed later) left the job
		// running under that request's lease while the edge, answered internal, ran nothing. The edge's repeated
		// submission with the same ClaimAs gets the lease back, as a worker's repeated claim does, so that it
		// runs the attempt now instead of waiting for a lease nobody renews to expire. Any other submission
		// (a client's retry is a new request, with another ClaimAs) gets none: it may not run a second attempt
		// beside the holder's.
		var lease *jobstate.Lease
		if r := a.rec; msg.ClaimAs != "" && r.Status == jobstate.StatusRunning && r.Lease != nil &&
			r.Lease.WorkerID == msg.ClaimAs && a.deps.Clock.Now().Before(r.Lease.ExpiresAt) {
			l := *r.Lease
			lease = &l
		}
		a.deps.Respond(ctx, &JobReply{Record: a.rec, Replayed: true, Lease: lease})
		return
	}
	cctx, cancel := a.deps.peerCtx()
	rep, err := a.deps.orgs().Reserve(cctx, OrgReserve{OrgID: spec.OrgID, Op: spec.RequestID, Credits: msg.Hold,
		Slot: msg.Slot, Batch: msg.Batch})
	cancel()
	if err != nil {
		a.deps.Logger.Error().Err(err).Str("job", a.id).Msg("reserve credits")
		a.deps.Respond(ctx, &JobReply{Code: ReplyInternal, Detail: "could not reserve credits"})
		return
	}
	if rep.Code != ReplyOK {
		a.deps.Respond(ctx, &JobReply{Code: rep.Code, Detail: rep.Detail})
		return
	}
	spec.CreditsHeld = msg.Hold
	now := a.deps.Clock.Now()
	rec, err := jobstate.Accept(spec, now)
	var lease *jobstate.Lease
	if err == nil && msg.ClaimAs != "" {
		var l jobstate.Lease
		l, err = rec.ClaimOn(msg.ClaimAs, WorkerNode(msg.ClaimAs), now, msg.Lease)
		lease = &l
	}
	if err != nil {
		a.releaseQuietly(spec.OrgID, spec.RequestID)
		a.deps.Respond(ctx, &JobReply{Code: ReplyInvalid, Detail: err.Error()})
		return
	}
	// The active-index entry is written before the record: a job whose entry could not be written would never
	// be ticked after its activation ended (a lost worker's lease would never expire, the deadline never
	// pass), so such a submission is refused with no job created. Its hold is kept, not released: a retry
	// under the same request id (an Idempotency-Key) reserves again, which finds the hold, whereas after a
	// release it would find the operation settled and run unheld; without a retry the organization's
	// stale-hold reaper frees it, as after a crash between the two writes. An entry whose record commit
	// then fails names no job; the sweeper's tick voids the job and drops the entry (voidOrphan).
	if err := a.indexActive(spec.OrgID); err != nil {
		a.deps.Logger.Error().Err(err).Str("job", a.id).Msg("index active job")
		a.deps.Respond(ctx, &JobReply{Code: ReplyInternal, Detail: "job state unavailable"})
		return
	}
	if !a.save(ctx, rec) {
		return
	}
	a.settle(ctx)
	a.deps.Respond(ctx, &JobReply{Record: a.rec, Lease: lease})
}

// indexActive creates the job's entry in the active index (create-only: an existing entry is kept), which is
// how the sweeper's ticks find a job whose activation ended.
func (a *jobActor) indexActive(orgID string) error {
	sctx, cancel := a.deps.storeCtx()
	_, err := a.deps.Store.CompareAndSet(sctx, []byte(prefixActiveJob+a.id), persistence.NoVersion, []byte(orgID))
	cancel()
	if err != nil && !errors.Is(err, persistence.ErrVersionMismatch) {
		return fmt.Errorf("index active job %s: %w", a.id, err)
	}
	return nil
}

// voidOrphan retires the active-index entry of a job that has no record: its submission wrote the entry and
// then failed (or its node died) before the record's commit, or its node is only paused (frozen, partitioned)
// with the commit still to come. So the record's key is taken first with a void record (create-only): the
// paused submission's late commit then fails (its caller retries and a new submission replaces the void
// record) instead of creating a job whose entry is gone, which nothing would tick again. Only then is the
// entry deleted. When the commit got there first, the void write is fenced: this activation answers retry
// and stops, and the next tick reaches an activation that reads the job. The hold of the voided submission
// is released by the organization's stale-hold reaper once no entry names it. It answers the request itself
// unless it returns true.
func (a *jobActor) voidOrphan(ctx actor.Context) bool {
	if !a.cell.Held().IsVoid() {
		if !a.save(ctx, jobstate.Void(a.id, a.deps.Clock.Now())) {
			return false
		}
		a.rec = nil
	}
	sctx, cancel := a.deps.storeCtx()
	defer cancel()
	if err := a.deps.Store.Delete(sctx, []byte(prefixActiveJob+a.id), a.activeVersion(sctx)); err != nil && !errors.Is(err, persistence.ErrVersionMismatch) {
		a.deps.Logger.Warn().Err(err).Str("job", a.id).Msg("drop the active-index entry of a job without a record")
	}
	return true
}

// releaseQuietly frees a hold whose job could not be created.
func (a *jobActor) releaseQuietly(orgID, op string) {
	cctx, cancel := a.deps.peerCtx()
	defer cancel()
	if _, err := a.deps.orgs().Release(cctx, OrgRelease{OrgID: orgID, Op: op}); err != nil {
		a.deps.Logger.Error().Err(err).Str("job", op).Msg("release credits of a refused job")
	}
}

// report is command for a worker's report on its running attempt (reporting).
func (a *jobActor) report(ctx actor.Context, requestID string, fn func(*jobstate.Record, time.Time) error, decorate func(*JobReply)) {
	a.reporting = true
	defer func() { a.reporting = false }()
	a.command(ctx, requestID, fn, decorate)
}

// command applies fn to a copy of the record, saves it when it changed, settles effects and answers.
func (a *jobActor) command(ctx actor.Context, requestID string, fn func(*jobstate.Record, time.Time) error, decorate func(*JobReply)) {
	if !a.loadFor(ctx, requestID, "") {
		return
	}
	defer a.forgetDiskRefused()
	next := a.rec.Clone()
	err := fn(next, a.deps.Clock.Now())
	if err != nil {
		code := ReplyInvalid
		switch {
		case errors.Is(err, jobstate.ErrStaleLease), errors.Is(err, jobstate.ErrTerminal), errors.Is(err, jobstate.ErrDeadlineExceeded):
			code = ReplyStaleLease
		case errors.Is(err, jobstate.ErrNotClaimable):
			code = ReplyNotClaimable
		}
		a.settle(ctx) // a refused command still lets due effects (a dispatch after restart) happen
		a.deps.Respond(ctx, &JobReply{Code: code, Detail: err.Error(), Record: a.rec})
		return
	}
	if next.Revision != a.rec.Revision && !a.save(ctx, next) {
		return
	}
	a.settle(ctx)
	rep := &JobReply{Record: a.rec}
	if decorate != nil {
		decorate(rep)
	}
	a.deps.Respond(ctx, rep)
}

// storedOutcome is the Output of the result an attempt stored, read from the job's outcome file
// (OutcomeFiles), when the running attempt's lease lapsed before the deadline and this activation keeps no
// refused report of it: the attempt's report was never recorded (refused below an eighth of the disk reserve
// and lost with a restart, or its node died between storing and reporting), and the tick then completes the job
// from that result rather than count the attempt as a lost worker and make the result again. Nil otherwise,
// or when the blob store could not answer (the lapse counts as before).
func (a *jobActor) storedOutcome() *jobstate.Output {
	r, now := a.rec, a.deps.Clock.Now()
	if a.deps.Outcomes == nil || a.diskRefused != nil || r == nil || r.Status != jobstate.StatusRunning || r.Lease == nil ||
		now.Before(r.Lease.ExpiresAt) || !now.Before(r.Deadline) {
		return nil
	}
	sctx, cancel := a.deps.storeCtx()
	defer cancel()
	out, err := a.deps.Outcomes.Stored(sctx, r)
	if err != nil {
		a.deps.Logger.Warn().Err(err).Str("job", a.id).Msg("read the outcome file of a lapsed attempt")
		return nil
	}
	return out
}

// forgetDiskRefused drops the refused report once its attempt no longer runs (the tick applied it,
// the worker's own report got through, or the job ended otherwise), so that the activation may idle out.
func (a *jobActor) forgetDiskRefused() {
	if f := a.diskRefused; f != nil && (a.rec == nil || a.rec.Lease == nil || a.rec.Lease.Token != f.token) {
		a.diskRefused = nil
	}
}

// refusedReport is a worker's report of how attempt token ended that the store refused for want of disk space
// (jobActor.diskRefused): a success with its stored result (output), or else a wait for disk space (detail).
type refusedReport struct {
	token  jobstate.Token
	detail string
	output *jobstate.Output
}

// keepRefused keeps f when the report just handled was refused for want of disk space and its attempt still
// runs in the record.
func (a *jobActor) keepRefused(f *refusedReport) {
	if a.writeLow && a.rec != nil && a.rec.Lease != nil && a.rec.Lease.Token == f.token {
		a.diskRefused = f // not recorded: the attempt still runs in the record
	}
}

// apply ends the attempt in r as its refused report would have on time, once its lease lapsed; it reports
// whether r changed.
func (f *refusedReport) apply(r *jobstate.Record, now time.Time) bool {
	if f.output != nil {
		return r.SucceedLapsed(f.token, *f.output, now)
	}
	return r.DiskLapse(f.token, f.detail, now)
}

// settle performs what the record still owes, marking each settled effect in the record, and tells waiters
// once the outcome is committed. Announcements (webhook, storage, batch) become owed only once the commit
// effects are settled, so a settle that commits the outcome goes round once more to hand them to the outbox.
// The job stays in the active index until nothing is owed, so that after a crash the sweeper's tick
// activates it again and the hand-over is repeated.
func (a *jobActor) settle(ctx actor.Context) {
	now := a.deps.Clock.Now()
	for round := 0; round < 2; round++ {
		wasCommitted := a.rec.Committed()
		next := a.rec.Clone()
		for _, fx := range next.PendingEffects(now) {
			switch fx.Kind {
			case jobstate.EffectDispatch:
				if a.deps.Dispatch != nil {
					a.deps.Dispatch(next)
				}
			case jobstate.EffectScheduleWake:
				a.scheduleWake(ctx, fx.At, now)
			default:
				if err := a.perform(next, fx); err != nil {
					a.deps.Logger.Warn().Err(err).Str("job", a.id).Str("effect", string(fx.Kind)).Msg("effect not settled yet; the sweeper retries")
					continue
				}
				if err := next.MarkSettled(fx.Kind); err != nil {
					a.deps.Logger.Error().Err(err).Str("job", a.id).Msg("mark effect settled")
				}
			}
		}
		if next.Settlement == a.rec.Settlement {
			break
		}
		// settle runs inside handlers that answer themselves, so a failed write only stops here.
		if a.write(ctx, next) != nil {
			return
		}
		if wasCommitted || !a.rec.Committed() {
			break
		}
	}
	if a.rec.Committed() {
		sctx, cancel := a.deps.storeCtx()
		indexed := true
		if keys, at := a.purgeable(); keys != "" {
			if _, err := a.deps.Store.CompareAndSet(sctx, purgeKey(at, a.id), persistence.NoVersion, []byte(keys)); err != nil && !errors.Is(err, persistence.ErrVersionMismatch) {
				// The job stays in the active index, so the sweeper's next tick writes the entry again: the
				// entry is all that ever deletes these files.
				a.deps.Logger.Warn().Err(err).Str("job", a.id).Msg("index result for purging; the sweeper retries")
				indexed = false
			}
		}
		if indexed && len(a.rec.PendingEffects(now)) == 0 {
			// The outcome file goes before the entry, so that a job whose file could not be deleted is ticked
			// again: once settled, nothing needs it (the record holds the outcome).
			if err := a.deps.Outcomes.Drop(sctx, a.rec); err != nil {
				a.deps.Logger.Warn().Err(err).Str("job", a.id).Msg("drop the outcome file; the sweeper retries")
				indexed = false
			}
		}
		if indexed && len(a.rec.PendingEffects(now)) == 0 {
			if err := a.deps.Store.Delete(sctx, []byte(prefixActiveJob+a.id), a.activeVersion(sctx)); err != nil && !errors.Is(err, persistence.ErrVersionMismatch) {
				a.deps.Logger.Warn().Err(err).Str("job", a.id).Msg("drop active job index")
			}
		}
		cancel()
		for _, w := range a.waiters {
			a.deps.Reply(ctx, w, &JobReply{Record: a.rec})
		}
		a.waiters = nil
	}
}

// purgeable lists the files that go 24 hours after the outcome, and when: a detection keeps nothing (spec
// 1.10) and a failed (or cancelled) job's input belongs to no asset, while a succeeded embed's input and
// output are the source and watermarked assets, kept by file retention. A failed job also lists every key an
// attempt could have stored a result under (OutputKeys): an attempt whose success was never recorded (its
// report refused as stale, or lost with its node) leaves its result there, named by no record, and on one node
// its outcome file (OutcomeFiles) beside it. No succeeded job shares those keys (they are the request's own),
// so nothing a client is served goes with them.
func (a *jobActor) purgeable() (string, time.Time) {
	r := a.rec
	switch {
	case r.Status == jobstate.StatusSucceeded && r.Operation == jobstate.OperationDetect:
		return r.Input.BlobKey + "\n" + r.Output.BlobKey, r.ResultExpiresAt
	case r.Status == jobstate.StatusFailed:
		keys := append([]string{r.Input.BlobKey}, OutputKeys(r)...)
		if a.deps.Outcomes != nil {
			keys = append(keys, OutcomeKey(r)) // one a late attempt keeps after the job ended (OutcomeFiles)
		}
		return strings.Join(keys, "\n"), r.CompletedAt.Add(jobstate.ResultRetention)
	}
	return "", time.Time{}
}

func (a *jobActor) activeVersion(ctx context.Context) persistence.Version {
	it, err := a.deps.Store.Get(ctx, []byte(prefixActiveJob+a.id))
	if err != nil {
		return persistence.NoVersion
	}
	return it.Version
}

// perform carries out one settlement effect; each is idempotent, so a crash before MarkSettled is saved only
// makes the next activation repeat it harmlessly.
func (a *jobActor) perform(r *jobstate.Record, fx jobstate.Effect) error {
	// Charges, releases and asset records ask the organization actor (a peer); the outbox is a storage call.
	cctx, cancel := a.deps.peerCtx()
	defer cancel()
	switch fx.Kind {
	case jobstate.EffectChargeCredits:
		rep, err := a.deps.orgs().Charge(cctx, OrgCharge{OrgID: r.OrgID, Op: r.RequestID, Credits: fx.Amount})
		return replyErr(rep, err)
	case jobstate.EffectReleaseCredits:
		rep, err := a.deps.orgs().Release(cctx, OrgRelease{OrgID: r.OrgID, Op: r.RequestID})
		return replyErr(rep, err)
	case jobstate.EffectWriteAssets:
		return a.writeAssets(cctx, r)
	case jobstate.EffectNotifyBatch:
		// A hint only, sent without waiting (the batch actor reads this job while it runs a command, so a
		// blocking call here could wait on it); the batch's own polling of its items' records is what makes
		// the outcome reach it after a crash.
		if a.deps.NotifyBatch != nil {
			a.deps.NotifyBatch(r.BatchID, r.RequestID)
		}
		return nil
	case jobstate.EffectNotifyWebhook, jobstate.EffectDeliverStorage:
		// Announcements go to the outbox (create-only by an id derived from the request id); its pass
		// delivers them.
		e, err := JobAnnouncement(r, fx.Kind)
		if err != nil {
			return err
		}
		if a.deps.Outbox.Store == nil {
			return errors.New("no outbox on this node")
		}
		sctx, cancel := a.deps.storeCtx()
		defer cancel()
		return a.deps.Outbox.Add(sctx, e)
	}
	return nil
}

func replyErr(rep *OrgReply, err error) error {
	if err != nil {
		return err
	}
	if rep.Code != ReplyOK {
		return errors.New("org actor: " + rep.Code + ": " + rep.Detail)
	}
	return nil
}

// writeAssets creates the source and watermarked asset records of a succeeded embed; ctx bounds the question
// to the organization actor (its plan sets the retention).
func (a *jobActor) writeAssets(ctx context.Context, r *jobstate.Record) error {
	rep, err := a.deps.orgs().Get(ctx, r.OrgID)
	if err := replyErr(rep, err); err != nil {
		return err
	}
	retention := FileRetention(a.deps.Catalog, rep.Plan)
	done := r.CompletedAt
	out := r.Output
	source := &Asset{ID: out.SourceAssetID, OrgID: r.OrgID, Name: r.Input.Filename, Version: 1, Kind: AssetSource,
		MediaType: string(r.Media), Format: r.Format, ContentType: r.Input.ContentType, SizeBytes: r.Input.Size,
		SHA256: r.Input.SHA256, RequestID: r.RequestID, BlobKey: r.Input.BlobKey, Filename: r.Input.Filename,
		CreatedAt: done, UpdatedAt: done, FileExpiresAt: done.Add(retention), Media: out.SourceMedia}
	marked := &Asset{ID: out.AssetID, OrgID: r.OrgID, Name: out.Filename, Version: 1, Kind: AssetWatermarked,
		ParentAssetID: out.SourceAssetID, MediaType: string(r.Media), Format: formatOfContentType(out.ContentType, r.Format),
		ContentType: out.ContentType, SizeBytes: out.Size, SHA256: out.SHA256, RequestID: r.RequestID,
		WatermarkID: out.WatermarkID, BlobKey: out.BlobKey, Filename: out.Filename,
		CreatedAt: done, UpdatedAt: done, FileExpiresAt: done.Add(retention), Media: out.Media,
		StorageDestinationID: r.StorageDestinationID}
	sctx, cancel := a.deps.storeCtx()
	defer cancel()
	assets := Assets{Store: a.deps.Store}
	if err := assets.Create(sctx, source); err != nil {
		return err
	}
	return assets.Create(sctx, marked)
}

// formatOfContentType is the format label of an output of content type ct: an image embed's output has the
// format it was asked for (output_format), which is not the input's, and a video's the container it was
// written in (an MP4 with PCM audio comes back a MOV: mediakind.Kind.OutputType); PDFs keep the input's label.
func formatOfContentType(ct, fallback string) string {
	switch ct {
	case "image/png":
		return "PNG"
	case "image/jpeg":
		return "JPEG"
	case "image/webp":
		return "WEBP"
	case "video/quicktime":
		return "MOV"
	case "video/mp4":
		return "MP4"
	}
	return fallback
}

// FileRetention is how long a file hosted for an organization on plan stays available: 30 days on a
// trial, a year otherwise (spec 8). The rule after a subscription ends needs billing state we do not keep.
func FileRetention(c Catalog, plan string) time.Duration {
	if p, ok := c.Plan(plan); ok && p.TrialDays > 0 {
		return 30 * 24 * time.Hour
	}
	return 365 * 24 * time.Hour
}

// scheduleWake sends this actor a JobTick when the record next needs attention. The timer runs on real time
// for the clock's distance to at; with a manual clock in tests the sweeper ticks instead.
func (a *jobActor) scheduleWake(ctx actor.Context, at, now time.Time) {
	if a.wake != nil && a.wakeAt.Equal(at) {
		return
	}
	if a.wake != nil {
		a.wake.Stop()
	}
	d := at.Sub(now)
	if d < 0 {
		d = 0
	}
	root, self, id := ctx.ActorSystem().Root, ctx.Self(), a.id
	a.wakeAt = at
	a.wake = time.AfterFunc(d+10*time.Millisecond, func() { root.Send(self, &JobTick{RequestID: id}) })
}
