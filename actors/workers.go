package actors

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"filigrane/actors/jobstate"
	"filigrane/actors/mediakind"
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

// Processor does the work of one attempt and returns its output.
type Processor interface {
	Process(ctx context.Context, rec *jobstate.Record) (jobstate.Output, *ProcessError)
}

// Pool is a node's workers. Jobs are dispatched to it by request id; a worker claims the job from its actor
// under a lease, renews the lease while it works, and reports the outcome. The same CPU tokens bound
// synchronous detection at the edge (Acquire), so that a node never runs more codec work than it has cores
// for.
type Pool struct {
	caller    Caller
	processor Processor
	logger    zerolog.Logger
	lease     time.Duration
	queue     chan queued
	// Metrics, when set, counts the pool's work per work class.
	Metrics *WorkMetrics
	// OnChange, when set before the pool is used, is called whenever Free may have changed (a job queued,
	// taken, started or ended); the node gossips the new value. It must not block.
	OnChange func()
	busy     atomic.Int64
	tokens   chan struct{}
	node     string
	workers  int
	wg       sync.WaitGroup
	// OnClaim, when set, is called after a worker claimed a job and before it processes it (tests use it to
	// simulate a worker that dies mid-job).
	OnClaim func(ctx context.Context, requestID string) bool
}

// NewPool returns a pool of n workers.
func NewPool(caller Caller, p Processor, logger zerolog.Logger, node string, n int, lease time.Duration) *Pool {
	if n < 1 {
		n = 1
	}
	return &Pool{caller: caller, processor: p, logger: logger, lease: lease, node: node, workers: n,
		queue: make(chan queued, 4096), tokens: make(chan struct{}, n)}
}

// queued is a job waiting for a worker, with the work class it counts under.
type queued struct {
	id, class string
}

// Dispatch queues a job; it never blocks. A job dropped from a full queue stays claimable and the sweeper
// dispatches it again.
func (p *Pool) Dispatch(requestID string) { p.dispatch(requestID, string(mediakind.ClassCPU)) }

// DispatchJob queues a claimable job like Dispatch, counted under its work class.
func (p *Pool) DispatchJob(rec *jobstate.Record) {
	p.dispatch(rec.RequestID, classOf(rec.Media, rec.AcceleratorRequested))
}

// Free is the pool's free worker slots: workers less the attempts running and the jobs waiting in its queue.
func (p *Pool) Free() int {
	return max(0, p.workers-int(p.busy.Load())-len(p.queue))
}

// Workers is the pool's number of workers.
func (p *Pool) Workers() int { return p.workers }

func (p *Pool) changed() {
	if p.OnChange != nil {
		p.OnChange()
	}
}

func (p *Pool) dispatch(requestID, class string) {
	defer p.changed()
	select {
	case p.queue <- queued{id: requestID, class: class}:
		p.Metrics.queue(class, 1)
	default:
		p.logger.Warn().Str("job", requestID).Msg("worker queue full; the sweeper will dispatch the job again")
	}
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

func workerID(node string, i int) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%s/w%d/%s", node, i, hex.EncodeToString(b))
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

func (p *Pool) work(ctx context.Context, i int) {
	id := workerID(p.node, i)
	for {
		select {
		case <-ctx.Done():
			return
		case q := <-p.queue:
			p.Metrics.queue(q.class, -1)
			p.busy.Add(1) // from the queue to the end of the attempt, this worker is taken
			p.attempt(ctx, id, q.id)
			p.busy.Add(-1)
			p.changed()
		}
	}
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
	rep, err := p.call(ctx, requestID, &JobClaim{RequestID: requestID, WorkerID: worker, Lease: p.lease})
	if err != nil || rep.Code != ReplyOK || rep.Lease == nil {
		if err != nil {
			p.logger.Warn().Err(err).Str("job", requestID).Msg("claim")
		}
		return // not claimable (running elsewhere, ended, waiting to retry): nothing to do
	}
	lease := *rep.Lease
	if p.OnClaim != nil && !p.OnClaim(ctx, requestID) {
		return
	}
	p.RunClaimed(ctx, rep.Record, lease)
}

// EdgeWorkerID names a worker for one request that the edge runs itself (ClaimAs of JobSubmit); the name
// is unique, so a claim by it is never mistaken for a duplicate of another worker's.
func (p *Pool) EdgeWorkerID() string { return workerID(p.node, -1) }

// Lease is how long the pool's claims last; a worker renews at a third of it.
func (p *Pool) Lease() time.Duration { return p.lease }

// RunClaimed runs an attempt the caller already claimed under lease: it takes a CPU token, renews the lease
// while it works, and reports the outcome. It returns the job's answer to the report (whose Record is the
// job after it), or nil when the attempt did not report: ctx ended, or the lease was lost and another
// worker owns the attempt now.
func (p *Pool) RunClaimed(ctx context.Context, rec *jobstate.Record, lease jobstate.Lease) *JobReply {
	requestID := rec.RequestID
	release, err := p.Acquire(ctx)
	if err != nil {
		return nil
	}
	defer release()
	class, began, reported, ok := classOf(rec.Media, rec.AcceleratorRequested), time.Now(), false, false
	p.Metrics.start(class)
	defer func() { p.Metrics.end(class, reported, ok, time.Since(began)) }()
	workCtx, stop := context.WithCancel(ctx)
	defer stop()
	go p.renew(workCtx, stop, requestID, lease)

	out, perr := p.processor.Process(workCtx, rec)
	if workCtx.Err() != nil && ctx.Err() == nil {
		return nil // the lease was lost: another worker owns the job now and this result would be refused
	}
	var msg any
	if perr != nil {
		if perr.Cause != nil {
			p.logger.Warn().Err(perr.Cause).Str("job", requestID).Str("code", perr.Code).Msg("attempt failed")
		}
		msg = &JobFail{RequestID: requestID, Token: lease.Token, Code: perr.Code, Detail: perr.Detail, Retryable: perr.Retryable}
	} else {
		msg = &JobSucceed{RequestID: requestID, Token: lease.Token, Output: out}
	}
	rep, err := p.call(ctx, requestID, msg)
	if err != nil || rep.Code != ReplyOK {
		p.logger.Warn().Err(err).Str("job", requestID).Interface("reply", rep).Msg("report outcome")
	}
	if err != nil {
		return nil
	}
	reported, ok = true, perr == nil
	return rep
}

// renew extends the lease at a third of its length until ctx ends; when the job refuses (lease lost) it
// cancels the work.
func (p *Pool) renew(ctx context.Context, cancel context.CancelFunc, requestID string, lease jobstate.Lease) {
	t := time.NewTicker(p.lease / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			rep, err := p.call(ctx, requestID, &JobRenew{RequestID: requestID, Token: lease.Token})
			if err == nil && rep.Code != ReplyOK {
				p.logger.Warn().Str("job", requestID).Str("code", rep.Code).Msg("lease lost; abandoning the attempt")
				cancel()
				return
			}
		}
	}
}
