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
	"filigrane/persistence"
)

// jobWriteAnswerLost applies the next job record write once armed and then fails it, as a write to an object
// storage server that was frozen does: the request was taken, the client's timeout ended the call, and the
// server wrote it when it ran again.
type jobWriteAnswerLost struct {
	persistence.Store
	armed atomic.Bool
	lost  chan struct{}
}

func (s *jobWriteAnswerLost) CompareAndSet(ctx context.Context, k []byte, expect persistence.Version, v []byte) (persistence.Version, error) {
	ver, err := s.Store.CompareAndSet(ctx, k, expect, v)
	if err == nil && strings.HasPrefix(string(k), "job/") && s.armed.CompareAndSwap(true, false) {
		close(s.lost)
		return "", errors.New("injected: s3store: compare-and-set: context deadline exceeded")
	}
	return ver, err
}

// TestClaimWhoseAnswerWasLostStillRuns: a worker's claim is written but the job actor's save reports a
// timeout, so the job answers internal. The claim may have been recorded (here it was): the job is running
// under this worker's lease. The worker claims again, gets the same lease (a repeated claim by the lease's
// holder) and runs the attempt. Before, it took the answer for "not claimable" and dropped the job, which
// then waited, running under a lease nobody held, until the lease expired and the sweeper handed it out again:
// `bench chaos` with S3 stopped 20 s saw jobs (batch items and embeds) end 13-22 s after the storage came back,
// on their second attempt.
func TestClaimWhoseAnswerWasLostStillRuns(t *testing.T) {
	pebble := tempStore(t)
	store := &jobWriteAnswerLost{Store: pebble, lost: make(chan struct{})}
	clk, _, spec := submitFixture(t, store, "7")
	spec.Operation, spec.AcceleratorRequested, spec.WatermarkID = jobstate.OperationDetect, jobstate.AcceleratorCPU, ""
	reqID := spec.RequestID
	sys, c := startSystem(t, store, store, clk)
	t.Cleanup(sys.Shutdown)
	c.job(t, reqID, &actors.JobSubmit{Spec: spec, Hold: 3})

	const lease = time.Hour // no renewal and no expiry during the test: only a claim can start the attempt
	proc := &gatedProcessor{started: make(chan struct{}), finish: make(chan struct{}), cancelled: make(chan struct{}),
		out: jobstate.Output{BlobKey: "out/" + reqID, Size: 20, SHA256: strings.Repeat("d", 64), ContentType: "application/json",
			Filename: "detection.json", Charge: 1, Accelerator: jobstate.AcceleratorCPU}}
	pool := actors.NewPool(c, proc, zerolog.Nop(), "n1", 1, lease)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go pool.Run(ctx)

	store.armed.Store(true)
	pool.Dispatch(reqID)
	select {
	case <-store.lost:
	case <-time.After(30 * time.Second):
		t.Fatal("the claim was never written")
	}
	select {
	case <-proc.started:
	case <-time.After(30 * time.Second):
		rep := c.job(t, reqID, &actors.JobGet{RequestID: reqID})
		t.Fatalf("no attempt ran after the claim's answer was lost; the job is %s after %d attempt(s)",
			rep.Record.Status, rep.Record.Attempts)
	}
	close(proc.finish)
	deadline := time.Now().Add(30 * time.Second)
	for {
		rep := c.job(t, reqID, &actors.JobGet{RequestID: reqID})
		if rep.Record.Status == jobstate.StatusSucceeded {
			if rep.Record.Attempts != 1 {
				t.Fatalf("succeeded after %d attempts, want 1", rep.Record.Attempts)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the job is %s after the attempt ended", rep.Record.Status)
		}
		time.Sleep(20 * time.Millisecond) // polls the job's state; the deadline bounds a broken actor
	}
}

// TestEdgeClaimWhoseAnswerWasLostIsReturned: a synchronous detection with an Idempotency-Key is submitted with
// ClaimAs (the edge runs it itself), and the job's record, claimed by the edge's worker, is written but its save
// reports a timeout (a frozen object storage that wrote it later), so the edge got internal and ran nothing:
// the job is running under the edge's lease with nobody working on it. The edge's submission again with the
// same ClaimAs must hand the lease back to that worker, so it can run the attempt now; another claimant (a
// client's retry is another request) gets none. Before, the repeat answered the replayed record without a lease and
// the request waited on a job that nobody ran until the lease (30 s) ran out.
func TestEdgeClaimWhoseAnswerWasLostIsReturned(t *testing.T) {
	pebble := tempStore(t)
	store := &jobWriteAnswerLost{Store: pebble, lost: make(chan struct{})}
	clk, _, spec := submitFixture(t, store, "8")
	spec.Operation, spec.AcceleratorRequested, spec.WatermarkID = jobstate.OperationDetect, jobstate.AcceleratorCPU, ""
	spec.IdempotencyKey = "edge-claim-1"
	reqID := spec.RequestID
	sys, c := startSystem(t, store, store, clk)
	t.Cleanup(sys.Shutdown)

	const edge, lease = "n1/m1/edge", time.Hour
	submit := &actors.JobSubmit{Spec: spec, Hold: 3, Slot: true, ClaimAs: edge, Lease: lease}
	store.armed.Store(true)
	v, err := c.Request(context.Background(), reqID, actors.KindJob, submit)
	if err != nil {
		t.Fatal(err)
	}
	if rep := v.(*actors.JobReply); rep.Code != actors.ReplyInternal {
		t.Fatalf("first submission: %+v, want internal (its save reported a timeout)", rep)
	}
	c.gone(t, reqID, actors.KindJob) // the activation whose save failed stops itself
	got := c.job(t, reqID, &actors.JobGet{RequestID: reqID})
	if got.Record.Status != jobstate.StatusRunning || got.Record.Lease == nil || got.Record.Lease.WorkerID != edge {
		t.Fatalf("the claimed record did not land: %+v", got.Record)
	}
	again := c.job(t, reqID, submit)
	if again.Lease == nil || again.Lease.WorkerID != edge || again.Lease.Token != got.Record.Lease.Token {
		t.Fatalf("the edge's repeated submission got no lease (%+v): nobody runs the job until its lease expires", again.Lease)
	}
	if again.Record.Attempts != 1 {
		t.Errorf("attempts %d, want 1 (the same claim)", again.Record.Attempts)
	}
	// Another request (another claimant) gets the record without a lease: it waits for the outcome.
	other := *submit
	other.ClaimAs = "n2/m2/edge"
	if rep := c.job(t, reqID, &other); rep.Lease != nil {
		t.Errorf("another edge got the lease %+v", rep.Lease)
	}
}
