package actors

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	pcluster "github.com/asynkron/protoactor-go/cluster"

	"filigrane/actors/batchstate"
	"filigrane/actors/jobstate"
	"filigrane/persistence"
)

// BatchEnv is what the batch actor needs beyond Deps: the processor (to probe item files), the blob store
// (zip members, archives) and the pace of its checks.
type BatchEnv struct {
	Media Media
	Blobs persistence.Blobs
	// Pulse is how often a started batch checks its items and submits pending ones on its own, in real
	// time (items waiting for a slot freed by a direct request learn of it this way). Default 2 s.
	Pulse time.Duration
	// Step bounds the items submitted per message, so that reads of the batch are answered between steps.
	// Default 10.
	Step int
	// Assemblies bounds the archives this node builds at once (each streams up to 1 GB of results through the
	// blob store): a batch whose files are done waits for a slot with archive_status queued. Default
	// DefaultAssemblies slots.
	Assemblies chan struct{}
}

// DefaultAssemblies is the archives a node builds at once unless BatchEnv.Assemblies says otherwise.
const DefaultAssemblies = 2

// BatchProps returns the props of the batch actor.
func BatchProps(d *Deps, env *BatchEnv) *actor.Props {
	if env.Pulse <= 0 {
		env.Pulse = 2 * time.Second
	}
	if env.Step <= 0 {
		env.Step = 10
	}
	if env.Assemblies == nil {
		env.Assemblies = make(chan struct{}, DefaultAssemblies)
	}
	return actor.PropsFromProducer(func() actor.Actor { return &batchActor{deps: d, env: env} })
}

// batchActor owns one batch record and runs the batchstate machine: it loads the record, applies a command
// with the injected clock, writes it with compare-and-set and then does what the record asks for: submit
// pending items as jobs (through the job actor, with the item's upload or zip member as input), read its
// active items' jobs, cancel those that wait for a worker when the batch is cancelled, assemble the archive. A failed compare-and-set means another activation
// owns the batch: it answers ReplyRetry and stops. Every step is idempotent: item jobs have derived request
// ids and Idempotency-Keys, so a submit repeated after a crash is a replay, never a second job or charge.
type batchActor struct {
	deps    *Deps
	env     *BatchEnv
	id      string
	rec     *batchstate.Record
	version persistence.Version
	loaded  bool

	pulse      *time.Timer
	assembling bool
	// diskWaits counts the archive builds refused for want of disk space since diskSince (the first); no
	// build starts before diskRetryAt (waitForDisk).
	diskWaits   int
	diskSince   time.Time
	diskRetryAt time.Time
	// stopAssembly ends the archive build this activation started (nil: none).
	stopAssembly context.CancelFunc
	zip          *zipSource // the opened request zip of a zip batch, kept for the activation
}

func (a *batchActor) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		a.deps.actorDelta(KindBatch, 1)
		ctx.SetReceiveTimeout(2 * time.Minute)
	case *actor.Stopped:
		a.deps.actorDelta(KindBatch, -1)
		if a.pulse != nil {
			a.pulse.Stop()
		}
		if a.stopAssembly != nil {
			a.stopAssembly()
		}
	case *pcluster.ClusterInit:
		a.id = msg.Identity.Identity
	case *actor.ReceiveTimeout:
		// A started batch stays active while it works; the sweeper re-activates one whose node died.
		if a.rec == nil || !a.rec.Status.Started() {
			ctx.Poison(ctx.Self())
		}
	case *BatchCreate:
		a.create(ctx, msg)
	case *BatchStart:
		a.start(ctx, msg)
	case *BatchGet:
		if a.loadFor(ctx, msg.BatchID, msg.OrgID) {
			a.deps.Respond(ctx, &BatchReply{Record: a.rec})
		}
	case *BatchCancel:
		if !a.loadFor(ctx, msg.BatchID, msg.OrgID) {
			return
		}
		if !a.adoptSubmitted(ctx) {
			return
		}
		// The first pending item is the only one a submission may have reached (items are submitted in
		// order, each after the one before was accepted or rejected), and the cancel rejects it.
		unsubmitted, pending := a.rec.NextPending()
		next := a.rec.Clone()
		next.Cancel(a.deps.Clock.Now())
		if next.Revision != a.rec.Revision && !a.save(ctx, next) {
			return
		}
		a.deps.Respond(ctx, &BatchReply{Record: a.rec})
		if pending {
			a.settleRejectedSubmit(unsubmitted)
		}
		a.drive(ctx, "")
	case *BatchItemDone:
		if !a.load(ctx, msg.BatchID) {
			return
		}
		a.deps.Respond(ctx, &BatchReply{})
		if a.rec != nil {
			a.drive(ctx, msg.RequestID)
		}
	case *BatchTick:
		if !a.load(ctx, msg.BatchID) {
			return
		}
		if a.rec == nil || a.rec.Removed {
			// The sweeper drops index entries that name no live batch.
			a.deps.Respond(ctx, &BatchReply{Code: ReplyNotFound})
			return
		}
		a.deps.Respond(ctx, &BatchReply{})
		a.drive(ctx, "")
	case *batchAssemblyStarted:
		if a.rec == nil {
			return
		}
		next := a.rec.Clone()
		if next.ArchiveStarted(a.deps.Clock.Now()) {
			// Only what a read shows; a failed write stops this activation (as any failed write does), and
			// the next one builds the archive again.
			_ = a.write(ctx, next)
		}
	case *batchArchived:
		a.assembling = false
		if a.stopAssembly != nil {
			a.stopAssembly() // the build is over: only its context's resources
			a.stopAssembly = nil
		}
		if a.rec == nil {
			return
		}
		if msg.lowDisk && a.waitForDisk() {
			return // the pulse or the sweeper's tick builds it again once the wait is over
		}
		next := a.rec.Clone()
		if err := next.ArchiveDone(msg.outcome, msg.key, msg.size, a.deps.Clock.Now()); err != nil {
			a.deps.Logger.Warn().Err(err).Str("batch", a.id).Msg("archive outcome refused")
			return
		}
		if next.Revision != a.rec.Revision && a.write(ctx, next) != nil {
			return
		}
		a.drive(ctx, "")
	}
}

// load reads the record once per activation; a missing record leaves rec nil.
func (a *batchActor) load(ctx actor.Context, batchID string) bool {
	if a.id == "" {
		a.id = batchID
	}
	if batchID != a.id {
		a.deps.Respond(ctx, &BatchReply{Code: ReplyNotFound})
		return false
	}
	if a.loaded {
		return true
	}
	sctx, cancel := a.deps.storeCtx()
	defer cancel()
	rec, v, err := Batches{Store: a.deps.Store}.Load(sctx, a.id)
	switch {
	case errors.Is(err, persistence.ErrNotFound):
		a.rec = nil
	case err != nil:
		a.deps.Logger.Error().Err(err).Str("batch", a.id).Msg("load batch")
		a.deps.Respond(ctx, &BatchReply{Code: ReplyInternal, Detail: "batch state unavailable"})
		ctx.Poison(ctx.Self())
		return false
	default:
		if err := rec.Validate(); err != nil {
			a.deps.Logger.Error().Err(err).Str("batch", a.id).Msg("invalid batch record")
			a.deps.Respond(ctx, &BatchReply{Code: ReplyInternal, Detail: "batch state unavailable"})
			ctx.Poison(ctx.Self())
			return false
		}
		a.rec, a.version = rec, v
	}
	a.loaded = true
	return true
}

// loadFor loads the record and answers not found when it does not exist, was removed or belongs to another
// organization.
func (a *batchActor) loadFor(ctx actor.Context, batchID, orgID string) bool {
	if !a.load(ctx, batchID) {
		return false
	}
	if a.rec == nil || a.rec.Removed || a.rec.OrgID != orgID {
		a.deps.Respond(ctx, &BatchReply{Code: ReplyNotFound})
		return false
	}
	return true
}

// save writes rec and answers the request itself when that fails.
func (a *batchActor) save(ctx actor.Context, rec *batchstate.Record) bool {
	err := a.write(ctx, rec)
	switch {
	case err == nil:
		return true
	case errors.Is(err, persistence.ErrVersionMismatch):
		a.deps.Respond(ctx, &BatchReply{Code: ReplyRetry, Detail: "batch state changed elsewhere; retry"})
	default:
		a.deps.Respond(ctx, &BatchReply{Code: ReplyInternal, Detail: "batch state unavailable"})
	}
	return false
}

// write stores rec with compare-and-set. A lost race means another activation owns the batch: this one
// stops.
func (a *batchActor) write(ctx actor.Context, rec *batchstate.Record) error {
	b, err := persistence.Marshal(rec)
	if err != nil {
		a.deps.Logger.Error().Err(err).Str("batch", a.id).Msg("encode batch")
		return err
	}
	sctx, cancel := a.deps.storeCtx()
	defer cancel()
	if len(rec.PendingEvents()) > 0 && (a.rec == nil || len(a.rec.PendingEvents()) == 0) {
		// The active index entry before the record that carries new events (a draft cancelled before it
		// started was never indexed): the sweeper's tick hands them over if this node dies first.
		a.markActive(sctx, rec)
	}
	v, err := a.deps.Store.CompareAndSet(sctx, batchKey(a.id), a.version, b)
	if err != nil {
		if errors.Is(err, persistence.ErrVersionMismatch) {
			a.deps.Logger.Warn().Str("batch", a.id).Msg("batch written by another activation; stopping")
		} else {
			a.deps.Logger.Error().Err(err).Str("batch", a.id).Msg("save batch")
		}
		ctx.Poison(ctx.Self())
		return err
	}
	a.rec, a.version = rec, v
	return nil
}

// update applies fn to a copy of the record and writes it when it changed; false when the write failed
// (the activation stops).
func (a *batchActor) update(ctx actor.Context, fn func(r *batchstate.Record, now time.Time) error) (bool, error) {
	next := a.rec.Clone()
	if err := fn(next, a.deps.Clock.Now()); err != nil {
		return true, err
	}
	if next.Revision == a.rec.Revision {
		return true, nil
	}
	return a.write(ctx, next) == nil, nil
}

func (a *batchActor) create(ctx actor.Context, msg *BatchCreate) {
	spec := msg.Spec
	if !a.load(ctx, spec.BatchID) {
		return
	}
	if a.rec != nil {
		fp, err := spec.Fingerprint()
		if err == nil && a.rec.OrgID == spec.OrgID {
			err = a.rec.CheckReplay(fp)
		} else if err == nil {
			err = batchstate.ErrIdempotencyConflict
		}
		if err != nil {
			a.deps.Respond(ctx, &BatchReply{Code: ReplyIdempotencyConflict, Detail: err.Error()})
			return
		}
		a.deps.Respond(ctx, &BatchReply{Record: a.rec, Replayed: true})
		return
	}
	now := a.deps.Clock.Now()
	rec, err := batchstate.New(spec, now)
	if err != nil {
		a.deps.Respond(ctx, &BatchReply{Code: ReplyInvalid, Detail: err.Error()})
		return
	}
	sctx, cancel := context.WithTimeout(a.deps.lifetime(), 2*time.Minute)
	defer cancel()
	if rec.Source == batchstate.SourceUploads {
		// The uploads first (their ids are derived, so a repeat after a crash finds them): a record without
		// its uploads would hand out URLs that answer 403.
		uploads := Uploads{Store: a.deps.Store, Clock: a.deps.Clock}
		for i := range rec.Items {
			it := &rec.Items[i]
			u, err := NewUpload(it.UploadID, rec.OrgID, UploadKind(it.Media), it.Filename, it.Size, now)
			if err != nil {
				a.deps.Respond(ctx, &BatchReply{Code: ReplyInvalid, Detail: err.Error()})
				return
			}
			u.BatchID, u.ForRequest = rec.BatchID, it.RequestID
			if err := uploads.Create(sctx, u); err != nil && !errors.Is(err, persistence.ErrVersionMismatch) {
				a.deps.Logger.Error().Err(err).Str("batch", a.id).Msg("create item upload")
				a.deps.Respond(ctx, &BatchReply{Code: ReplyInternal, Detail: "could not create the uploads"})
				return
			}
		}
	}
	if _, err := a.deps.Store.CompareAndSet(sctx, batchIndexKey(rec), persistence.NoVersion, nil); err != nil && !errors.Is(err, persistence.ErrVersionMismatch) {
		a.deps.Logger.Error().Err(err).Str("batch", a.id).Msg("index batch")
		a.deps.Respond(ctx, &BatchReply{Code: ReplyInternal, Detail: "batch state unavailable"})
		return
	}
	if _, err := a.deps.Store.CompareAndSet(sctx, batchDueKey(rec), persistence.NoVersion, nil); err != nil && !errors.Is(err, persistence.ErrVersionMismatch) {
		a.deps.Logger.Error().Err(err).Str("batch", a.id).Msg("index batch retention")
		a.deps.Respond(ctx, &BatchReply{Code: ReplyInternal, Detail: "batch state unavailable"})
		return
	}
	if rec.Status.Started() {
		a.markActive(sctx, rec)
	}
	if !a.save(ctx, rec) {
		return
	}
	a.deps.Respond(ctx, &BatchReply{Record: a.rec})
	a.drive(ctx, "")
}

func (a *batchActor) start(ctx actor.Context, msg *BatchStart) {
	if !a.loadFor(ctx, msg.BatchID, msg.OrgID) {
		return
	}
	next := a.rec.Clone()
	started, err := next.Start(a.deps.Clock.Now())
	if started {
		// The index entry before the record: a started batch the sweeper cannot find would stall after a crash.
		sctx, cancel := a.deps.storeCtx()
		a.markActive(sctx, next)
		cancel()
	}
	if next.Revision != a.rec.Revision && !a.save(ctx, next) {
		return
	}
	if errors.Is(err, batchstate.ErrExpired) {
		a.deps.Respond(ctx, &BatchReply{Code: ReplyExpired, Record: a.rec, Detail: err.Error()})
		return
	}
	a.deps.Respond(ctx, &BatchReply{Record: a.rec, Started: started})
	a.drive(ctx, "")
}

func (a *batchActor) markActive(ctx context.Context, rec *batchstate.Record) {
	if _, err := a.deps.Store.CompareAndSet(ctx, []byte(prefixActiveBatch+rec.BatchID), persistence.NoVersion, []byte(rec.OrgID)); err != nil && !errors.Is(err, persistence.ErrVersionMismatch) {
		a.deps.Logger.Error().Err(err).Str("batch", rec.BatchID).Msg("index active batch")
	}
}

func (a *batchActor) dropActive(ctx context.Context) {
	key := []byte(prefixActiveBatch + a.id)
	it, err := a.deps.Store.Get(ctx, key)
	if err != nil {
		return
	}
	if err := a.deps.Store.Delete(ctx, key, it.Version); err != nil && !errors.Is(err, persistence.ErrVersionMismatch) {
		a.deps.Logger.Warn().Err(err).Str("batch", a.id).Msg("drop active batch index")
	}
}

// adoptSubmitted records as accepted the pending items whose job exists already, before a cancel rejects the
// pending ones: an activation that submitted an item's job and stopped before it saved the acceptance (its
// node shut down or died, or a fenced save) leaves the item pending while its job runs, and rejecting it as
// cancelled would leave that job to run and be charged for an item the batch reports cancelled and never
// charged. Accepted, its job is cancelled with the other active ones (failed if it waits for a worker,
// left to finish if it runs), or its outcome recorded if it ended.
// Items are submitted in order, so the first pending item without a job ends the look. It reports false,
// having answered, when the batch could not be saved; a job that cannot be read is left to chance (logged).
func (a *batchActor) adoptSubmitted(ctx actor.Context) bool {
	if a.rec.CancelRequested || (a.rec.Status != batchstate.StatusStarting && a.rec.Status != batchstate.StatusProcessing) {
		return true
	}
	c, cancel := a.deps.peerCtx()
	defer cancel()
	jobs := JobClient{Caller: a.deps.Caller}
	for i := range a.rec.Items {
		it := a.rec.Items[i]
		if it.Status != batchstate.ItemPending {
			continue
		}
		rep, err := jobs.Get(c, a.rec.OrgID, it.RequestID)
		if err != nil || rep.Code != ReplyOK || rep.Record == nil {
			if err != nil || rep.Code != ReplyNotFound {
				a.deps.Logger.Warn().Err(err).Interface("reply", rep).Str("batch", a.id).Int("item", i).
					Str("job", it.RequestID).Msg("cancel: cannot tell whether a pending item's job exists")
			}
			return true
		}
		next := a.rec.Clone()
		if err := next.Accept(i, rep.Record.CreditsHeld, a.deps.Clock.Now()); err != nil {
			a.deps.Logger.Error().Err(err).Str("batch", a.id).Int("item", i).Str("job", it.RequestID).
				Msg("cancel: accept an item whose job exists")
			return true
		}
		if next.Revision != a.rec.Revision && !a.save(ctx, next) {
			return false
		}
	}
	return true
}

// settleRejectedSubmit frees what a submission of item i may have left behind after a cancel rejected the
// item, seeing no job. A submission whose reply was lost (it timed out while the storage stalled) may have
// reserved the item's credits and concurrency slot and then failed to create the job, which keeps the hold
// for a retry under the same request id; with the item rejected nothing retries or settles it, and the
// credits stayed held until the stale-hold reaper (hours). The job is cancelled first: a submission still
// being handled by the job's activation is answered before the cancel, so a job it creates after all is
// cancelled (settling its own hold) rather than run and charged for an item the batch reports cancelled;
// then the hold is released (a no-op when none is left). A later stale submission finds the operation
// settled and runs nothing chargeable: its acceptance is refused and it cancels its job (undoOrphanedSubmit).
func (a *batchActor) settleRejectedSubmit(i int) {
	c, cancel := a.deps.peerCtx()
	defer cancel()
	op := a.rec.Items[i].RequestID
	if _, err := (JobClient{Caller: a.deps.Caller}).call(c, op, &JobCancel{RequestID: op}); err != nil {
		a.deps.Logger.Warn().Err(err).Str("batch", a.id).Int("item", i).Str("job", op).
			Msg("cancel: cancel a rejected item's job")
	}
	rep, err := (OrgClient{Caller: a.deps.Caller}).Release(c, OrgRelease{OrgID: a.rec.OrgID, Op: op})
	if err != nil || rep.Code != ReplyOK {
		a.deps.Logger.Warn().Err(err).Interface("reply", rep).Str("batch", a.id).Int("item", i).
			Str("job", op).Msg("cancel: release a rejected item's hold")
	}
}

// drive does what the record asks for now: cancel the waiting jobs of a cancelled batch, read the active items'
// jobs (only onlyJob's when set), submit up to Step pending items, start the archive, and keep a pulse while
// the batch is started. Failures are logged and left to the next pulse or sweep.
func (a *batchActor) drive(ctx actor.Context, onlyJob string) {
	if a.rec == nil || a.rec.Removed {
		return
	}
	c, cancel := context.WithTimeout(a.deps.lifetime(), 2*time.Minute)
	defer cancel()
	if !a.deps.Clock.Now().Before(a.rec.RetainUntil()) {
		a.removeIfDue(ctx, c)
		if a.rec.Removed {
			return
		}
	}
	jobs := JobClient{Caller: a.deps.Caller}
	for _, i := range a.rec.CancelJobs() {
		// Each job decides on its own record whether it still waits for a worker (then it fails, refunded)
		// or runs (then it finishes): the batch's view of it may be a pulse old.
		op := a.rec.Items[i].RequestID
		if _, err := jobs.call(c, op, &JobCancel{RequestID: op, UnlessRunning: true}); err != nil {
			a.deps.Logger.Warn().Err(err).Str("batch", a.id).Int("item", i).Msg("cancel item job")
		}
	}
	for _, i := range a.rec.ActiveItems() {
		if onlyJob != "" && a.rec.Items[i].RequestID != onlyJob {
			continue
		}
		if !a.pollItem(ctx, c, i) {
			return
		}
	}
	more := false
	// Submitting is bounded per message, by count and by wall time (a video's probe runs ffprobe), so that
	// reads of the batch queued meanwhile are answered well within their timeout.
	budget := time.Now().Add(2 * time.Second)
	for n := 0; ; n++ {
		i, ok := a.rec.NextPending()
		if !ok {
			break
		}
		if n == a.env.Step || (n > 0 && time.Now().After(budget)) {
			more = true
			break
		}
		if !a.submitItem(ctx, c, i) {
			break
		}
	}
	if a.rec.Status == batchstate.StatusAssembling && !a.assembling && !a.deps.Clock.Now().Before(a.diskRetryAt) {
		a.assembling = true
		a.startAssembly(ctx)
	}
	if a.rec.Status.Ended() {
		// The active index entry keeps the sweeper ticking the batch until its events are handed over and its
		// files are listed for purging: a purge entry is all that ever deletes them.
		handed := a.handOver(ctx, c)
		if indexed := a.indexPurges(c); handed && indexed {
			a.dropActive(c)
		}
	}
	if more {
		ctx.Send(ctx.Self(), &BatchTick{BatchID: a.id})
	}
	a.schedulePulse(ctx)
}

// archiveDiskWait is how long a batch's archive waits for disk space, from its first build (ArchiveStartedAt),
// before it ends failed: as long as a build may take (archiveBuildLimit), and about an image job's deadline.
const archiveDiskWait = archiveBuildLimit

// waitForDisk takes a build refused because the node is low on disk space and reports whether the archive
// waits for space (the next build no sooner than 2 s later, doubling up to jobstate.MaxDiskWait, as a job's
// attempt does) rather than ending failed, which it does once archiveDiskWait has passed since its first build
// began (the record's ArchiveStartedAt; this activation's first refusal in a record from before it was kept).
// Nothing is written while it waits (the batch reads assembling, and below a quarter of the reserve no record
// could be), so the backoff lives in the activation: a new one (a restart, the batch moving to another node)
// tries at once, but the wait ends when it would have. Before, a restart started the 30 minutes over.
func (a *batchActor) waitForDisk() bool {
	now := a.deps.Clock.Now()
	if a.diskWaits == 0 {
		a.diskSince = now
	}
	since := a.diskSince
	if first := a.rec.ArchiveStartedAt; !first.IsZero() && first.Before(since) {
		since = first
	}
	if now.Sub(since) >= archiveDiskWait {
		a.deps.Logger.Error().Str("batch", a.id).Int("tries", a.diskWaits+1).
			Msg("archive: the node stayed low on disk space; the archive ends failed (docs/operations.md, Disk space)")
		return false
	}
	a.diskWaits++
	wait := min(jobstate.Backoff(a.diskWaits), jobstate.MaxDiskWait)
	a.diskRetryAt = now.Add(wait)
	a.deps.Logger.Warn().Str("batch", a.id).Int("tries", a.diskWaits).Dur("next_in", wait).
		Msg("archive refused for want of disk space; building it again after the wait")
	return true
}

// schedulePulse keeps a started batch checking its items in real time.
func (a *batchActor) schedulePulse(ctx actor.Context) {
	if a.rec == nil || !a.rec.Status.Started() {
		if a.pulse != nil {
			a.pulse.Stop()
			a.pulse = nil
		}
		return
	}
	if a.pulse != nil {
		a.pulse.Stop()
	}
	root, self, id := ctx.ActorSystem().Root, ctx.Self(), a.id
	a.pulse = time.AfterFunc(a.env.Pulse, func() { root.Send(self, &BatchTick{BatchID: id}) })
}

// indexPurges lists the batch's own files for the sweeper's purge pass (jobs/purge): the archive when it
// expires; the request zip of a zip batch, and the members unpacked for items that never became a job (their
// check refused them after the unpacking, or a cancel rejected them while they waited for a slot), 24 hours
// after the batch ended. A member that became a job's input is its job's to keep (the source asset) or purge
// (a failed job). An item the batch reports rejected has no job that runs on: a submission the record missed
// is cancelled (settleRejectedSubmit, undoOrphanedSubmit), and a cancelled job purges the same member itself.
// Create-only, so repeats are harmless. It reports whether every entry is written: the batch stays in the
// active index until then, so that the sweeper's next tick writes what the store refused (below a quarter of
// the disk reserve, or a store that failed); before, the files of a refused entry stayed for ever.
func (a *batchActor) indexPurges(c context.Context) bool {
	r := a.rec
	indexed := true
	put := func(at time.Time, suffix, key string) {
		if key == "" {
			return
		}
		if _, err := a.deps.Store.CompareAndSet(c, purgeKey(at, r.BatchID+suffix), persistence.NoVersion, []byte(key)); err != nil && !errors.Is(err, persistence.ErrVersionMismatch) {
			a.deps.Logger.Warn().Err(err).Str("batch", a.id).Msg("index batch files for purging; the sweeper retries")
			indexed = false
		}
	}
	if r.ArchiveStatus == batchstate.ArchiveReady {
		put(r.ArchiveExpiresAt, ".archive", r.ArchiveBlobKey)
	}
	put(r.CompletedAt.Add(batchstate.ArchiveRetention), ".zip", r.ZipBlobKey)
	if r.Source == batchstate.SourceZip {
		var members []string
		for i := range r.Items {
			if !r.Items[i].Accepted() {
				members = append(members, memberKey(r.OrgID, r.Items[i].RequestID))
			}
		}
		put(r.CompletedAt.Add(batchstate.ArchiveRetention), ".members", strings.Join(members, "\n"))
	}
	return indexed
}

// removeIfDue reduces a batch past its 30 days to its tombstone (the key stays, answering 409 to a reuse)
// and drops its list and retention entries.
func (a *batchActor) removeIfDue(ctx actor.Context, c context.Context) {
	old := a.rec
	ok, _ := a.update(ctx, func(r *batchstate.Record, now time.Time) error {
		r.Remove(now)
		return nil
	})
	if !ok || !a.rec.Removed {
		return
	}
	for _, key := range [][]byte{batchIndexKey(old), batchDueKey(old), []byte(prefixActiveBatch + a.id)} {
		if it, err := a.deps.Store.Get(c, key); err == nil {
			if err := a.deps.Store.Delete(c, key, it.Version); err != nil && !errors.Is(err, persistence.ErrVersionMismatch) {
				a.deps.Logger.Warn().Err(err).Str("batch", a.id).Msg("drop batch index entry")
			}
		}
	}
}
