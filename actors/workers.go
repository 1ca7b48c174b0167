package actors

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"filigrane/actors/jobstate"
	"filigrane/actors/mediakind"
	"filigrane/actors/workqueue"
	"filigrane/persistence/diskspace"
)

// ProcessError is how processing an attempt failed: Code becomes the job's error_code; Retryable attempts
// are tried again from the original input.
type ProcessError struct {
	Code string
	// Detail is what the client is shown (the job's error detail): a readable sentence, never an internal
	// path, blob key or Go error chain.
	Detail    string
	Retryable bool
	// Cause is the underlying error, for the logs only.
	Cause error
}

func (e *ProcessError) Error() string { return e.Code + ": " + e.Detail }

// LowDisk reports whether the attempt failed only because the node is low on disk space: a retryable failure
// whose cause is a write the node's disk guard refused or its filesystem refused for want of space (ENOSPC).
// Such an attempt does not count toward the job's attempts; the job waits for space (JobFail.LowDisk).
func (e *ProcessError) LowDisk() bool {
	return e.Retryable && e.Cause != nil && errors.Is(diskspace.MarkFull(e.Cause), diskspace.ErrLow)
}

// Processor does the work of one attempt and returns its output.
type Processor interface {
	Process(ctx context.Context, rec *jobstate.Record) (jobstate.Output, *ProcessError)
}

// Pool is a node's workers of one work class (Pools holds a node's pools). Jobs are offered to it by
// request id, with their organization, whether a client waits and their creation time: its queue
// (actors/workqueue) hands them to the workers fairly between organizations, a client's synchronous request
// ahead of its organization's async and batch work. A worker claims the job from its actor under a lease,
// renews the lease while it works, and reports the outcome to the job actor wherever that runs. The CPU tokens it shares with the node's other CPU
// pools bound synchronous detection at the edge too (Acquire), so that a node never runs more codec work than
// it has cores for.
type Pool struct {
	caller    Caller
	processor Processor
	logger    zerolog.Logger
	lease     time.Duration
	// Metrics, when set, counts the pool's work per work class.
	Metrics *WorkMetrics
	// OnChange, when set before the pool is used, is called whenever Free may have changed (a job queued,
	// taken, started or ended); the node gossips the new value. It must not block.
	OnChange func()
	busy     atomic.Int64
	tokens   chan struct{}
	node     string
	member   string // the node's cluster member id, in worker ids (Pools.SetMember)
	workers  int
	wg       sync.WaitGroup
	// OnClaim, when set, is called after a worker claimed a job and before it processes it (tests use it to
	// simulate a worker that dies mid-job).
	OnClaim func(ctx context.Context, requestID string) bool
	// OnReport, when set, is called after a worker's attempt ended (its result and outcome file stored, when it
	// succeeded) and before it reports how (tests use it to make the disk run low at that moment).
	OnReport func(ctx context.Context, requestID string)
	// outcomes writes each stored result's outcome file before the attempt reports it (PoolsConfig.Outcomes;
	// nil: none).
	outcomes *OutcomeFiles

	// class, when set, is the work class every job of this pool counts under (a pool of Pools); "" counts each
	// job under its own kind's class (NewPool).
	class string
	// mu guards queue (a job offered again while it waits is queued once), running and idle. A job leaves
	// the queue in the same step that counts it running (a worker, next) or hands it elsewhere (TakeQueued),
	// so that under mu every job taken is in one or the other: a drain's Idle cannot fall between a worker's
	// take from the queue and its count.
	mu      sync.Mutex
	queue   *workqueue.Queue
	running int
	idle    chan struct{} // closed when no attempt runs and no job waits (idleLocked)
	// wake tells an idle worker that a job may wait; a worker that takes a job and leaves others passes it on.
	wake chan struct{}
	// draining refuses new offers (the node is shutting down); abandon ends running attempts with a hand-back.
	draining   atomic.Bool
	abandon    context.Context
	abandonNow context.CancelFunc
}

// NewPool returns a pool of n workers.
func NewPool(caller Caller, p Processor, logger zerolog.Logger, node string, n int, lease time.Duration) *Pool {
	if n < 1 {
		n = 1
	}
	return newPool(caller, p, logger, node, "", n, lease, make(chan struct{}, n))
}

// newPool returns a pool of n workers (0: a pool that only lends tokens and runs attempts claimed by its
// caller) taking tokens from tokens.
func newPool(caller Caller, p Processor, logger zerolog.Logger, node, class string, n int, lease time.Duration, tokens chan struct{}) *Pool {
	// The abandon context belongs to the pool, not to a request: it ends when the node's drain runs out of time.
	abandon, abandonNow := context.WithCancel(context.Background())
	return &Pool{caller: caller, processor: p, logger: logger, lease: lease, node: node, workers: n, class: class,
		queue: workqueue.New(maxQueued), tokens: tokens, wake: make(chan struct{}, 1), abandon: abandon, abandonNow: abandonNow}
}

// maxQueued bounds the jobs waiting in one pool; beyond it an offer is dropped, and the job, still claimable,
// is placed again by the sweeper's next tick.
const maxQueued = 4096

// QueuedJob is a job offered to a pool: its request id, and what orders it in the queue (workqueue.Job).
type QueuedJob struct {
	RequestID string
	OrgID     string
	// Sync says a client waits for the job's outcome (jobstate.Record.Sync).
	Sync    bool
	Created time.Time
}

// QueuedJobOf is a claimable job as a pool queues it.
func QueuedJobOf(rec *jobstate.Record) QueuedJob {
	return QueuedJob{RequestID: rec.RequestID, OrgID: rec.OrgID, Sync: rec.Sync, Created: rec.CreatedAt}
}

// Dispatch queues a job of no organization; it never blocks. A job dropped from a full queue stays
// claimable and the sweeper dispatches it again.
func (p *Pool) Dispatch(requestID string) {
	p.dispatch(QueuedJob{RequestID: requestID}, string(mediakind.ClassCPU))
}

// DispatchJob queues a claimable job like Dispatch, with its organization, and counted under its work class.
func (p *Pool) DispatchJob(rec *jobstate.Record) {
	p.dispatch(QueuedJobOf(rec), classOf(rec.Media, rec.AcceleratorRequested))
}

// Offer queues a job like Dispatch and reports whether the pool took it: a pool without workers or a
// draining one takes nothing. A job already waiting in the queue is not queued twice.
func (p *Pool) Offer(w QueuedJob) bool {
	class := p.class
	if class == "" {
		class = string(mediakind.ClassCPU)
	}
	return p.dispatch(w, class)
}

// Free is the pool's free worker slots: workers less the attempts running and the jobs waiting in its queue;
// 0 while draining.
func (p *Pool) Free() int {
	if p.draining.Load() {
		return 0
	}
	return max(0, p.workers-int(p.busy.Load())-p.Waiting())
}

// Waiting is the number of jobs in the pool's queue.
func (p *Pool) Waiting() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.queue.Len()
}

// Takes reports whether the pool takes new work: it has workers and is not draining.
func (p *Pool) Takes() bool { return p.workers > 0 && !p.draining.Load() }

// TakeQueued removes up to n jobs from the queue, in the order the workers would have taken them, and returns
// them (to be placed on another node).
func (p *Pool) TakeQueued(n int) []QueuedJob {
	var ws []QueuedJob
	p.mu.Lock()
	for _, j := range p.queue.Take(n) {
		p.Metrics.queue(j.Class, -1)
		ws = append(ws, queuedJob(j))
	}
	p.closeIdleLocked()
	p.mu.Unlock()
	if len(ws) > 0 {
		p.changed()
	}
	return ws
}

// queuedJob is j as the pool's callers know it.
func queuedJob(j workqueue.Job) QueuedJob {
	return QueuedJob{RequestID: j.ID, OrgID: j.Org, Sync: j.Sync, Created: j.Created}
}

// BeginDrain makes the pool refuse new offers and advertise no free slot, and returns the jobs that were
// waiting in its queue, for the caller to place elsewhere. Attempts already running go on.
func (p *Pool) BeginDrain() []QueuedJob {
	p.draining.Store(true)
	ids := p.TakeQueued(maxQueued)
	p.changed()
	return ids
}

// Draining reports whether BeginDrain was called.
func (p *Pool) Draining() bool { return p.draining.Load() }

// Running is the number of attempts running in the pool: those its workers took from the queue (claiming
// included) and those its callers claimed themselves.
func (p *Pool) Running() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.running
}

// Idle returns a channel that is closed once no attempt runs in the pool and no job waits in its queue (a
// drain takes the queue first, BeginDrain; a job a worker takes counts as running in the same step).
func (p *Pool) Idle() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.idle == nil {
		p.idle = make(chan struct{})
		p.closeIdleLocked()
	}
	return p.idle
}

// closeIdleLocked closes idle when the pool is idle (p.mu held).
func (p *Pool) closeIdleLocked() {
	if p.running != 0 || p.queue.Len() != 0 || p.idle == nil {
		return
	}
	select {
	case <-p.idle:
	default:
		close(p.idle)
	}
}

// busyLocked forgets an idle channel already closed (p.mu held): work came, and the next Idle makes a fresh one.
func (p *Pool) busyLocked() {
	if p.idle != nil {
		select {
		case <-p.idle:
			p.idle = nil
		default:
		}
	}
}

// HandBackRunning ends every running attempt by handing its job back to the job actor (not counted as an
// attempt; another node takes it), for a drain that ran out of time. An attempt that finishes anyway still
// reports its outcome.
func (p *Pool) HandBackRunning() { p.abandonNow() }

func (p *Pool) attemptStarted() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.running++
	p.busyLocked()
}

func (p *Pool) attemptEnded() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.running--
	p.closeIdleLocked()
}

// Workers is the pool's number of workers.
func (p *Pool) Workers() int { return p.workers }

func (p *Pool) changed() {
	if p.OnChange != nil {
		p.OnChange()
	}
}

func (p *Pool) dispatch(w QueuedJob, class string) bool {
	if !p.Takes() {
		return false
	}
	if p.class != "" {
		class = p.class
	}
	defer p.changed()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.draining.Load() {
		return false // BeginDrain ran since the check above; its TakeQueued would miss this one
	}
	j := workqueue.Job{ID: w.RequestID, Org: w.OrgID, Sync: w.Sync, Created: w.Created, Class: class, Queued: time.Now()}
	switch p.queue.Push(j) {
	case workqueue.Already:
		// offered again while it waits (a sweeper tick): it is queued already
	case workqueue.Queued:
		p.busyLocked()
		p.Metrics.queue(class, 1)
		select {
		case p.wake <- struct{}{}:
		default: // a wake-up is pending already; the worker it wakes passes it on while jobs wait
		}
	case workqueue.Full:
		p.logger.Warn().Str("job", w.RequestID).Msg("worker queue full; the sweeper will dispatch the job again")
	}
	return true
}

// Acquire takes a CPU token for work done outside the pool; call release when done.
func (p *Pool) Acquire(ctx context.Context) (release func(), err error) {
	select {
	case p.tokens <- struct{}{}:
		return func() { <-p.tokens }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Run starts the workers; they stop when ctx ends. Wait waits for them.
func (p *Pool) Run(ctx context.Context) {
	for i := 0; i < p.workers; i++ {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.work(ctx, i)
		}()
	}
}

// Wait blocks until every worker returned.
func (p *Pool) Wait() { p.wg.Wait() }

// workerID names a worker: its node's name, its slot, and a nonce after the id of the node's cluster member
// when it is known (node/w<slot>/<member>.<nonce>): a job whose worker's member left the cluster ends the
// attempt without waiting for the lease (jobActor, JobTick).
func workerID(node, member string, i int) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	nonce := hex.EncodeToString(b)
	if member != "" {
		nonce = member + "." + nonce
	}
	return fmt.Sprintf("%s/w%d/%s", node, i, nonce)
}

// WorkerNode is the node name inside a worker id made by this package (node/w<slot>/<nonce>), or "" for an
// id of another shape. The job records it for each attempt (jobstate.Record.AttemptNodes).
func WorkerNode(id string) string {
	i := strings.LastIndexByte(id, '/')
	if i <= 0 {
		return ""
	}
	j := strings.LastIndexByte(id[:i], '/')
	if j <= 0 || !strings.HasPrefix(id[j+1:i], "w") {
		return ""
	}
	return id[:j]
}

// WorkerMember is the cluster member id inside a worker id made by this package, or "" when it names none
// (a worker of a pool started without one, or an id of another shape).
func WorkerMember(id string) string {
	if WorkerNode(id) == "" {
		return ""
	}
	member, _, ok := strings.Cut(id[strings.LastIndexByte(id, '/')+1:], ".")
	if !ok {
		return ""
	}
	return member
}

func (p *Pool) work(ctx context.Context, i int) {
	id := workerID(p.node, p.member, i)
	for ctx.Err() == nil {
		j, ok := p.next()
		if !ok {
			select {
			case <-ctx.Done():
			case <-p.wake:
			}
			continue
		}
		p.attempt(ctx, id, j.ID)
		p.attemptEnded()
		p.busy.Add(-1)
		p.changed()
	}
}

// next takes the queue's next job for a worker and counts it as running in the same step: a drain that began
// while the worker claims the job (a call through the cluster, sent again while unanswered) waits for it
// rather than logging "drained" and stopping under an attempt about to run. The worker ends the attempt with
// attemptEnded. When jobs still wait, next passes the wake-up on to another idle worker.
func (p *Pool) next() (workqueue.Job, bool) {
	p.mu.Lock()
	j, ok := p.queue.Pop()
	if ok {
		p.running++
		p.busy.Add(1) // from the queue to the end of the attempt, this worker is taken
		p.busyLocked()
		if p.queue.Len() > 0 {
			select {
			case p.wake <- struct{}{}:
			default:
			}
		}
	}
	p.mu.Unlock()
	if ok {
		p.Metrics.taken(j.Class, time.Since(j.Queued))
	}
	return j, ok
}

func (p *Pool) call(ctx context.Context, requestID string, msg any) (*JobReply, error) {
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	r, err := p.caller.Request(cctx, requestID, KindJob, msg)
	if err != nil {
		return nil, err
	}
	rep, ok := r.(*JobReply)
	if !ok {
		return nil, fmt.Errorf("job %s: unexpected reply %T", requestID, r)
	}
	return rep, nil
}

// attempt claims one job and runs it under a renewed lease.
func (p *Pool) attempt(ctx context.Context, worker, requestID string) {
	rep, ok := p.claim(ctx, worker, requestID)
	if !ok {
		return
	}
	lease := *rep.Lease
	if p.OnClaim != nil && !p.OnClaim(ctx, requestID) {
		return
	}
	p.runClaimed(ctx, rep.Record, lease, true)
}

// claim claims the job for worker. A claim the job could not record (notRecorded: its save failed, or its
// activation lost the record to another) or that got no answer may have been written all the same: a write
// that timed out while the object storage stalled lands once the storage runs again, leaving the job running
// under this worker's lease with nobody working on it until the lease expires (the chaos runs with S3 frozen
// saw jobs end on a second attempt 13-22 s after the storage came back). So the claim is sent again, as the
// outcome's report is, for up to one lease length: a repeated claim by the lease's holder returns the same
// lease, and a claim that was not written claims now. Any other answer is final (not claimable: running
// elsewhere, ended, waiting to retry).
func (p *Pool) claim(ctx context.Context, worker, requestID string) (*JobReply, bool) {
	rep, err := p.resend(ctx, nil, requestID, &JobClaim{RequestID: requestID, WorkerID: worker, Lease: p.lease}, "claim")
	return rep, err == nil && rep.Code == ReplyOK && rep.Lease != nil
}

// resend sends msg to the job and sends it again while the job answers that it could not record it
// (notRecorded) or does not answer, for up to one lease length, until ctx ends or stop closes (nil: never).
// It returns the last answer; what names the command in the log.
func (p *Pool) resend(ctx context.Context, stop <-chan struct{}, requestID string, msg any, what string) (*JobReply, error) {
	return Resend(ctx, stop, p.lease, p.logger.With().Str("job", requestID).Logger(), what,
		func() (*JobReply, error) { return p.call(ctx, requestID, msg) },
		func(rep *JobReply, err error) bool { return err != nil || notRecorded(rep.Code) })
}

// Resend calls send, and calls it again while unrecorded says that its answer (or the lack of one: err) leaves
// open whether the command was recorded, for up to within (waits from 250 ms doubling to 2 s), until ctx ends
// or stop closes (nil: never). It returns the last answer; logger and what name the command in the log. A
// store write that timed out while the object storage stalled can land afterwards, so a worker's claim and
// outcome, and an edge's claimed submission, are sent again rather than taken as refused.
func Resend(ctx context.Context, stop <-chan struct{}, within time.Duration, logger zerolog.Logger, what string,
	send func() (*JobReply, error), unrecorded func(*JobReply, error) bool) (*JobReply, error) {
	until := time.Now().Add(within)
	wait := 250 * time.Millisecond
	for {
		rep, err := send()
		if !unrecorded(rep, err) {
			return rep, err
		}
		if time.Now().Add(wait).After(until) {
			return rep, err
		}
		logger.Warn().Err(err).Interface("reply", rep).Msgf("%s not recorded; sending it again", what)
		select {
		case <-ctx.Done():
			return rep, err
		case <-stop:
			return rep, err
		case <-time.After(wait):
		}
		wait = min(2*wait, 2*time.Second)
	}
}

// EdgeWorkerID names a worker for one request that the edge runs itself (ClaimAs of JobSubmit); the name
// is unique, so a claim by it is never mistaken for a duplicate of another worker's.
func (p *Pool) EdgeWorkerID() string { return workerID(p.node, p.member, -1) }

// Lease is how long the pool's claims last; a worker renews at a third of it.
func (p *Pool) Lease() time.Duration { return p.lease }

// RunClaimed runs an attempt the caller already claimed under lease: it takes a CPU token, renews the lease
// while it works, and reports the outcome. It returns the job's answer to the report (whose Record is the
// job after it), or nil when the attempt did not report: ctx ended, or the lease was lost and another
// worker owns the attempt now.
func (p *Pool) RunClaimed(ctx context.Context, rec *jobstate.Record, lease jobstate.Lease) *JobReply {
	return p.runClaimed(ctx, rec, lease, false)
}

// runClaimed is RunClaimed; counted says that the caller counts the attempt as running already (a worker,
// from the moment it took the job from the queue).
func (p *Pool) runClaimed(ctx context.Context, rec *jobstate.Record, lease jobstate.Lease, counted bool) *JobReply {
	requestID := rec.RequestID
	release, err := p.Acquire(ctx)
	if err != nil {
		return nil
	}
	defer release()
	if !counted {
		p.attemptStarted()
		defer p.attemptEnded()
	}
	class, began, reported, ok := classOf(rec.Media, rec.AcceleratorRequested), time.Now(), false, false
	if p.class != "" {
		class = p.class
	}
	p.Metrics.start(class)
	defer func() { p.Metrics.end(class, reported, ok, time.Since(began)) }()
	workCtx, stop := context.WithCancel(ctx)
	defer stop()
	defer context.AfterFunc(p.abandon, stop)()
	go p.renew(workCtx, stop, requestID, lease)

	out, perr := p.processor.Process(workCtx, rec)
	if perr != nil && p.abandon.Err() != nil && ctx.Err() == nil {
		p.handBack(ctx, requestID, lease) // the drain ran out of time: another node runs the job
		return nil
	}
	if workCtx.Err() != nil && ctx.Err() == nil {
		return nil // the lease was lost: another worker owns the job now and this result would be refused
	}
	var msg any
	if perr != nil {
		if perr.Cause != nil {
			p.logger.Warn().Err(perr.Cause).Str("job", requestID).Str("code", perr.Code).Msg("attempt failed")
		}
		msg = &JobFail{RequestID: requestID, Token: lease.Token, Code: perr.Code, Detail: perr.Detail, Retryable: perr.Retryable,
			LowDisk: perr.LowDisk()}
	} else {
		// Written before the report, so that the job can succeed from the result should the report never be
		// recorded (OutcomeFiles); without it the report goes as before. The job's actor deletes it once the job
		// is settled, also when this report comes too late (a stale attempt's, answered after the job ended).
		if err := p.outcomes.Keep(ctx, rec, out); err != nil {
			p.logger.Warn().Err(err).Str("job", requestID).Msg("keep the outcome file")
		}
		msg = &JobSucceed{RequestID: requestID, Token: lease.Token, Output: out}
	}
	if p.OnReport != nil {
		p.OnReport(ctx, requestID)
	}
	rep, err := p.report(ctx, workCtx, requestID, msg)
	if err != nil || rep.Code != ReplyOK {
		p.logger.Warn().Err(err).Str("job", requestID).Interface("reply", rep).Msg("report outcome")
	}
	if err != nil {
		return nil
	}
	reported, ok = true, perr == nil
	return rep
}

// report sends an attempt's outcome to its job, and sends it again while the job could not record it
// (ReplyInternal: its save failed; ReplyRetry: its activation found the record changed, as when a write that
// timed out during a storage stall lands afterwards) or did not answer, for up to one lease length and as
// long as the lease is held (leaseCtx: renew cancels it when the job refuses a renewal). The lease goes on
// being renewed meanwhile. A resent outcome that was recorded after all is refused as stale, which changes
// nothing. Before, such an answer threw the finished work away and the job waited for its lease to expire.
func (p *Pool) report(ctx, leaseCtx context.Context, requestID string, msg any) (*JobReply, error) {
	return p.resend(ctx, leaseCtx.Done(), requestID, msg, "outcome")
}

// notRecorded reports whether a job's answer says it could not record a command (ReplyInternal: its save
// failed; ReplyRetry: its activation lost the record to another), which says nothing about the lease.
func notRecorded(code string) bool { return code == ReplyInternal || code == ReplyRetry }

// leaseRefused reports whether a job's answer to a renewal says the worker's lease is gone: another worker
// holds the job, or it ended. See renew for the answers that do not.
func leaseRefused(code string) bool { return code != ReplyOK && !notRecorded(code) }

// handBack returns an attempt that the node's drain cut short to the job actor, so that another node runs it
// without counting an attempt. Should the message be lost, the lease expires and the job retries as after a
// lost worker.
func (p *Pool) handBack(ctx context.Context, requestID string, lease jobstate.Lease) {
	rep, err := p.call(ctx, requestID, &JobHandBack{RequestID: requestID, Token: lease.Token})
	if err != nil || rep.Code != ReplyOK {
		p.logger.Warn().Err(err).Str("job", requestID).Interface("reply", rep).Msg("hand back a job cut short by the drain")
		return
	}
	p.logger.Info().Str("job", requestID).Msg("handed back a job cut short by the drain")
}

// renew extends the lease at a third of its length until ctx ends; when the job refuses (lease lost) it
// cancels the work.
//
// The job may also fail to renew without refusing: its record could not be saved (ReplyInternal: the object
// storage is down or frozen) or its activation lost the record to another (ReplyRetry). Neither says the lease
// is gone, so the attempt goes on and renews at the next tick; if the lease did expire meanwhile, that renewal
// (or the outcome's report) is refused. Abandoning on them threw away every running job's work when the storage
// stalled for longer than a store call's timeout, and each job then waited for its lease to expire.
func (p *Pool) renew(ctx context.Context, cancel context.CancelFunc, requestID string, lease jobstate.Lease) {
	t := time.NewTicker(p.lease / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			rep, err := p.call(ctx, requestID, &JobRenew{RequestID: requestID, Token: lease.Token})
			if err == nil && leaseRefused(rep.Code) {
				p.logger.Warn().Str("job", requestID).Str("code", rep.Code).Msg("lease lost; abandoning the attempt")
				cancel()
				return
			}
			if err == nil && rep.Code != ReplyOK {
				p.logger.Warn().Str("job", requestID).Str("code", rep.Code).Str("detail", rep.Detail).Msg("lease not renewed; the attempt goes on")
			}
		}
	}
}
