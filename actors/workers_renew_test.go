package actors_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"filigrane/actors"
	"filigrane/actors/jobstate"
	"filigrane/internal/clock"
	"filigrane/persistence"
)

// jobWritesFrozen refuses writes of job records while frozen, as a stopped object storage server does (the
// store's timeout ends each write), and reports each refusal on refused and each write it takes on saved.
type jobWritesFrozen struct {
	persistence.Store
	frozen         atomic.Bool
	refused, saved chan struct{}
}

func (s *jobWritesFrozen) CompareAndSet(ctx context.Context, k []byte, expect persistence.Version, v []byte) (persistence.Version, error) {
	if !strings.HasPrefix(string(k), "job/") {
		return s.Store.CompareAndSet(ctx, k, expect, v)
	}
	if s.frozen.Load() {
		notify(s.refused)
		return "", errors.New("injected: s3store: compare-and-set: context deadline exceeded")
	}
	ver, err := s.Store.CompareAndSet(ctx, k, expect, v)
	if err == nil {
		notify(s.saved)
	}
	return ver, err
}

func notify(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// gatedProcessor starts an attempt, reports it on started and returns out once finish is closed, or a
// failure when its context ends first (the worker abandoned the attempt), reported on cancelled.
type gatedProcessor struct {
	started, finish, cancelled chan struct{}
	out                        jobstate.Output
}

func (p *gatedProcessor) Process(ctx context.Context, _ *jobstate.Record) (jobstate.Output, *actors.ProcessError) {
	close(p.started)
	select {
	case <-p.finish:
		return p.out, nil
	case <-ctx.Done():
		close(p.cancelled)
		return jobstate.Output{}, &actors.ProcessError{Code: actors.CodeProcessingError, Detail: "abandoned"}
	}
}

// frozenAttempt is an attempt started by startFrozenAttempt.
type frozenAttempt struct {
	reqID  string
	clk    *clock.Manual
	c      *localCaller
	frozen *jobWritesFrozen
	proc   *gatedProcessor
	done   chan *actors.JobReply // RunClaimed's answer
}

// startFrozenAttempt submits a detection whose request id repeats letter to a job actor on a store whose job
// writes can be frozen, claimed by worker w1 under lease, and starts its attempt on a pool with a gated
// processor: it returns once the processor runs.
func startFrozenAttempt(t *testing.T, letter string, lease time.Duration) frozenAttempt {
	t.Helper()
	store := tempStore(t)
	clk, _, spec := submitFixture(t, store, letter)
	spec.Operation, spec.AcceleratorRequested, spec.WatermarkID = jobstate.OperationDetect, jobstate.AcceleratorCPU, ""
	reqID := spec.RequestID
	frozen := &jobWritesFrozen{Store: store, refused: make(chan struct{}, 1), saved: make(chan struct{}, 1)}
	sys, c := startSystem(t, frozen, store, clk)
	t.Cleanup(sys.Shutdown)
	sub := c.job(t, reqID, &actors.JobSubmit{Spec: spec, Hold: 3, ClaimAs: "w1", Lease: lease})
	proc := &gatedProcessor{started: make(chan struct{}), finish: make(chan struct{}), cancelled: make(chan struct{}),
		out: jobstate.Output{BlobKey: "out/" + reqID, Size: 20, SHA256: strings.Repeat("d", 64), ContentType: "application/json",
			Filename: "detection.json", Charge: 1, Accelerator: jobstate.AcceleratorCPU}}
	pool := actors.NewPool(c, proc, zerolog.Nop(), "n1", 1, lease)
	done := make(chan *actors.JobReply, 1)
	go func() { done <- pool.RunClaimed(context.Background(), sub.Record, *sub.Lease) }()
	<-proc.started
	return frozenAttempt{reqID: reqID, clk: clk, c: c, frozen: frozen, proc: proc, done: done}
}

// awaitSucceeded waits for the attempt's answer and fails unless the job succeeded.
func (a frozenAttempt) awaitSucceeded(t *testing.T) {
	t.Helper()
	select {
	case rep := <-a.done:
		if rep == nil || rep.Code != actors.ReplyOK || rep.Record.Status != jobstate.StatusSucceeded {
			t.Fatalf("outcome reported after the storage came back: %+v, want the job succeeded", rep)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the attempt did not end")
	}
}

// TestAttemptRidesThroughARefusedRenewal: the object storage freezes while a worker runs a job, so the job
// actor cannot save the lease's renewal and answers internal. That says nothing about the lease, which the
// worker still holds; the attempt goes on, renews once the storage is back and reports its outcome. Before, the
// worker took any answer but OK for a lost lease and abandoned the attempt: a chaos run with S3 stopped for 20 s
// threw away the work of every running job, which then waited for its lease to expire and ran again (ending
// 20 s after the storage came back).
func TestAttemptRidesThroughARefusedRenewal(t *testing.T) {
	const lease = 300 * time.Millisecond // renewed every 100 ms
	a := startFrozenAttempt(t, "9", lease)
	clk, frozen, proc := a.clk, a.frozen, a.proc

	frozen.frozen.Store(true)
	clk.Advance(50 * time.Millisecond) // a renewal now moves the lease's end: the actor must save it
	// Two refused renewals: the worker has had the first refusal's answer (renewals go one after another).
	for i := 0; i < 2; i++ {
		select {
		case <-frozen.refused:
		case <-proc.cancelled:
			t.Fatalf("the attempt was abandoned after %d refused renewal(s) while the worker still held the lease", i)
		case <-time.After(30 * time.Second):
			t.Fatal("no renewal reached the job actor")
		}
	}
	// The storage comes back; the attempt ends once a renewal was saved again. (A job actor whose save failed
	// stops, and a message that reaches it while it stops is dropped: the outcome's report is sent to a
	// fresh activation, as it is on a cluster once the stop has happened.)
	select { // forget the writes made before the storage froze
	case <-frozen.saved:
	default:
	}
	frozen.frozen.Store(false)
	select {
	case <-frozen.saved:
	case <-proc.cancelled:
		t.Fatal("the attempt was abandoned after the storage came back")
	case <-time.After(30 * time.Second):
		t.Fatal("no renewal was saved after the storage came back")
	}
	close(proc.finish)

	a.awaitSucceeded(t)
	select {
	case <-proc.cancelled:
		t.Fatal("the attempt was cancelled")
	default:
	}
}

// TestOutcomeReportedAgainAfterAStorageStall: the attempt ends while the object storage is frozen, so the job
// actor cannot save the outcome and answers internal. The worker still holds the lease: it reports the outcome
// again until the job records it. Before, it gave the finished work up and the job waited for its lease to
// expire and ran again (the same chaos run: jobs ended 20 s after the storage came back).
func TestOutcomeReportedAgainAfterAStorageStall(t *testing.T) {
	const lease = time.Minute // no renewal during the test: the only job writes are the outcome's
	a := startFrozenAttempt(t, "8", lease)
	c, frozen, proc, done, reqID := a.c, a.frozen, a.proc, a.done, a.reqID

	frozen.frozen.Store(true)
	close(proc.finish)
	select {
	case <-frozen.refused: // the outcome's save
	case rep := <-done:
		t.Fatalf("the attempt ended without the job saving its outcome: %+v", rep)
	case <-time.After(30 * time.Second):
		t.Fatal("the outcome never reached the job")
	}
	frozen.frozen.Store(false)

	a.awaitSucceeded(t)
	v, err := c.Request(context.Background(), reqID, actors.KindJob, &actors.JobGet{RequestID: reqID})
	if err != nil {
		t.Fatal(err)
	}
	if r := v.(*actors.JobReply).Record; r.Status != jobstate.StatusSucceeded || r.Attempts != 1 {
		t.Fatalf("job after the stall: %s after %d attempt(s), want succeeded after 1", r.Status, r.Attempts)
	}
}
