package actors_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"filigrane/actors"
	"filigrane/actors/durable"
	"filigrane/actors/jobstate"
	"filigrane/internal/admin"
	"filigrane/internal/clock"
	"filigrane/persistence"
)

// submitFixture creates an organization with 100 credits in store and returns a manual clock and the spec of
// an image embed whose request id repeats letter.
func submitFixture(t *testing.T, store persistence.Store, letter string) (*clock.Manual, *actors.OrgState, jobstate.Spec) {
	t.Helper()
	clk := clock.NewManual(time.Date(2026, 6, 1, 10, 0, 0, 0, time.UTC))
	org, err := admin.Admin{Store: store, Clock: clk, Catalog: actors.DefaultCatalog()}.CreateOrg(context.Background(), "Acme", "launch", 100)
	if err != nil {
		t.Fatal(err)
	}
	reqID := "req_" + strings.Repeat(letter, 64)
	return clk, org, jobstate.Spec{RequestID: reqID, OrgID: org.ID, Operation: jobstate.OperationEmbed, Media: jobstate.MediaImage,
		Format: "PNG", FrameCount: 1, WatermarkID: strings.Repeat("f", 64),
		Input: jobstate.Input{BlobKey: "in/" + reqID, SHA256: strings.Repeat("b", 64), Size: 1234, Filename: "cat.png", ContentType: "image/png"}}
}

// TestKeylessSubmitRedelivered: a request without an Idempotency-Key is accepted by a job actor whose node
// then stops before the reply reaches the caller, so the cluster delivers the same submission to the job's
// new activation. That is the same request, not a reused key: it answers the job (Replayed), holds the
// credits once, and only a submission with other inputs under that request id is a conflict.
func TestKeylessSubmitRedelivered(t *testing.T) {
	ctx := context.Background()
	store := tempStore(t)
	clk, org, spec := submitFixture(t, store, "c")
	reqID := spec.RequestID

	sys1, c1 := startSystem(t, store, store, clk)
	first := c1.job(t, reqID, &actors.JobSubmit{Spec: spec, Hold: 3, Slot: true})
	if first.Replayed || first.Record == nil {
		t.Fatalf("first submission: %+v", first)
	}
	sys1.Shutdown() // the node stops; its reply is lost
	// ... and it stopped after the record's commit and before the job's entry in the active index.
	it, err := store.Get(ctx, []byte("jobs/active/"+reqID))
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Delete(ctx, it.Key, it.Version); err != nil {
		t.Fatal(err)
	}

	sys2, c2 := startSystem(t, store, store, clk)
	t.Cleanup(sys2.Shutdown)
	again := c2.job(t, reqID, &actors.JobSubmit{Spec: spec, Hold: 3, Slot: true})
	if !again.Replayed || again.Record == nil || again.Record.RequestID != reqID || again.Record.Revision != first.Record.Revision {
		t.Fatalf("redelivered submission: %+v (want the job, replayed)", again)
	}
	if _, err := store.Get(ctx, []byte("jobs/active/"+reqID)); err != nil {
		t.Fatalf("the redelivered submission left the queued job out of the active index (no sweeper tick would reach it): %v", err)
	}
	v, err := c2.Request(ctx, org.ID, actors.KindOrg, &actors.OrgGet{OrgID: org.ID})
	if err != nil {
		t.Fatal(err)
	}
	if rep := v.(*actors.OrgReply); rep.Held != 3 {
		t.Fatalf("held %d credits after a redelivered submission, want 3 (one hold)", rep.Held)
	}

	other := spec
	other.Input.SHA256 = strings.Repeat("e", 64)
	v, err = c2.Request(ctx, reqID, actors.KindJob, &actors.JobSubmit{Spec: other, Hold: 3, Slot: true})
	if err != nil {
		t.Fatal(err)
	}
	if rep := v.(*actors.JobReply); rep.Code != actors.ReplyIdempotencyConflict {
		t.Fatalf("another file under the same request id: %+v, want %s", rep, actors.ReplyIdempotencyConflict)
	}
}

// indexFailingStore is a real store whose writes to the active job index fail, as an object store's do when
// it is unreachable for a moment.
type indexFailingStore struct {
	persistence.Store
	fail bool
}

func (s *indexFailingStore) CompareAndSet(ctx context.Context, key []byte, expect persistence.Version, value []byte) (persistence.Version, error) {
	if s.fail && strings.HasPrefix(string(key), "jobs/active/") {
		return persistence.NoVersion, errors.New("storage unavailable")
	}
	return s.Store.CompareAndSet(ctx, key, expect, value)
}

// TestSubmitRefusedWhenTheActiveIndexFails: a job whose active-index entry cannot be written would never be
// ticked after its activation ended (a lost worker's lease never expiring, its deadline never passing), so the
// submission is refused with no job created (its hold kept for the retry); the client's retry then succeeds
// on the same hold. An entry left by a submission that failed before its record was committed is dropped by the sweeper's tick.
func TestSubmitRefusedWhenTheActiveIndexFails(t *testing.T) {
	ctx := context.Background()
	pebble := tempStore(t)
	store := &indexFailingStore{Store: pebble, fail: true}
	clk, org, spec := submitFixture(t, store, "d")
	reqID := spec.RequestID
	sys, c := startSystem(t, store, store, clk)
	t.Cleanup(sys.Shutdown)
	held := func() int64 {
		v, err := c.Request(ctx, org.ID, actors.KindOrg, &actors.OrgGet{OrgID: org.ID})
		if err != nil {
			t.Fatal(err)
		}
		return v.(*actors.OrgReply).Held
	}

	v, err := c.Request(ctx, reqID, actors.KindJob, &actors.JobSubmit{Spec: spec, Hold: 3, Slot: true})
	if err != nil {
		t.Fatal(err)
	}
	if rep := v.(*actors.JobReply); rep.Code != actors.ReplyInternal || rep.Record != nil {
		t.Fatalf("submission with the active index failing: %+v, want %s and no job", rep, actors.ReplyInternal)
	}
	if _, err := pebble.Get(ctx, []byte("job/"+reqID)); !errors.Is(err, persistence.ErrNotFound) {
		t.Fatalf("a refused submission left a job record: %v", err)
	}
	// The hold stays for the retry (a released operation would be settled, and a retry would run unheld);
	// without a retry the stale-hold reaper frees it.
	if h := held(); h != 3 {
		t.Fatalf("a refused submission holds %d credits, want its 3 kept for the retry", h)
	}

	store.fail = false
	again := c.job(t, reqID, &actors.JobSubmit{Spec: spec, Hold: 3, Slot: true})
	if again.Record == nil || again.Replayed {
		t.Fatalf("the retried submission: %+v", again)
	}
	if _, err := pebble.Get(ctx, []byte("jobs/active/"+reqID)); err != nil {
		t.Fatalf("the accepted job is not in the active index: %v", err)
	}
	if h := held(); h != 3 {
		t.Fatalf("held %d credits after the retry, want 3 (one hold)", h)
	}

	// An entry whose submission never committed its record (its node died between the two writes).
	orphan := "req_" + strings.Repeat("e", 64)
	if _, err := pebble.CompareAndSet(ctx, []byte("jobs/active/"+orphan), persistence.NoVersion, []byte(org.ID)); err != nil {
		t.Fatal(err)
	}
	v, err = c.Request(ctx, orphan, actors.KindJob, &actors.JobTick{RequestID: orphan})
	if err != nil {
		t.Fatal(err)
	}
	if rep := v.(*actors.JobReply); rep.Code != actors.ReplyNotFound {
		t.Fatalf("tick of a job without a record: %+v", rep)
	}
	if _, err := pebble.Get(ctx, []byte("jobs/active/"+orphan)); !errors.Is(err, persistence.ErrNotFound) {
		t.Fatalf("the tick left the entry of a job without a record: %v", err)
	}
}

// TestPausedSubmissionsLateCommit: during a partition (a frozen node) a second activation of a job can live
// beside the one that accepted it, whose commit of the record is still to come. The second activation must
// see the record once it is committed (not keep answering "no such job"), and the sweeper's tick of an entry
// without a record must fence the late commit instead of dropping the entry under it: otherwise the job would
// be created with nothing left to tick it, running for ever with its credits held.
func TestPausedSubmissionsLateCommit(t *testing.T) {
	ctx := context.Background()
	store := tempStore(t)
	clk, org, spec := submitFixture(t, store, "1")
	sys, c := startSystem(t, store, store, clk)
	t.Cleanup(sys.Shutdown)
	ask := func(reqID string, msg any) *actors.JobReply {
		t.Helper()
		v, err := c.Request(ctx, reqID, actors.KindJob, msg)
		if err != nil {
			t.Fatal(err)
		}
		return v.(*actors.JobReply)
	}
	entry := func(reqID string) bool {
		t.Helper()
		_, err := store.Get(ctx, []byte("jobs/active/"+reqID))
		if err != nil && !errors.Is(err, persistence.ErrNotFound) {
			t.Fatal(err)
		}
		return err == nil
	}
	// lateCommit is the paused activation's create-only write of the record, landing now.
	lateCommit := func(s jobstate.Spec) error {
		rec, err := jobstate.Accept(s, clk.Now())
		if err != nil {
			t.Fatal(err)
		}
		_, err = durable.Write(ctx, store, []byte("job/"+s.RequestID), persistence.NoVersion, rec)
		return err
	}

	// 1. A status read reaches the new activation before the commit, another one after it.
	if _, err := store.CompareAndSet(ctx, []byte("jobs/active/"+spec.RequestID), persistence.NoVersion, []byte(org.ID)); err != nil {
		t.Fatal(err)
	}
	if rep := ask(spec.RequestID, &actors.JobGet{RequestID: spec.RequestID, OrgID: org.ID}); rep.Code != actors.ReplyNotFound {
		t.Fatalf("status read before the commit: %+v, want %s", rep, actors.ReplyNotFound)
	}
	if err := lateCommit(spec); err != nil {
		t.Fatalf("the late commit with no void record in the way: %v", err)
	}
	if rep := ask(spec.RequestID, &actors.JobGet{RequestID: spec.RequestID, OrgID: org.ID}); rep.Record == nil || rep.Record.Status != jobstate.StatusQueued {
		t.Fatalf("status read after the commit: %+v, want the queued job", rep)
	}
	if rep := ask(spec.RequestID, &actors.JobTick{RequestID: spec.RequestID}); rep.Record == nil {
		t.Fatalf("tick after the commit: %+v, want the job", rep)
	}
	if !entry(spec.RequestID) {
		t.Fatal("the tick dropped the active-index entry of a committed job")
	}

	// 2. The sweeper's tick comes first: the late commit is refused, and the client's retry creates the job.
	_, _, other := submitFixture(t, store, "2")
	other.OrgID = org.ID
	if _, err := store.CompareAndSet(ctx, []byte("jobs/active/"+other.RequestID), persistence.NoVersion, []byte(org.ID)); err != nil {
		t.Fatal(err)
	}
	if rep := ask(other.RequestID, &actors.JobGet{RequestID: other.RequestID, OrgID: org.ID}); rep.Code != actors.ReplyNotFound {
		t.Fatalf("status read before the tick: %+v", rep)
	}
	if rep := ask(other.RequestID, &actors.JobTick{RequestID: other.RequestID}); rep.Code != actors.ReplyNotFound {
		t.Fatalf("tick of an entry without a record: %+v, want %s", rep, actors.ReplyNotFound)
	}
	if entry(other.RequestID) {
		t.Fatal("the tick kept the entry of a job without a record")
	}
	if err := lateCommit(other); !errors.Is(err, persistence.ErrVersionMismatch) {
		t.Fatalf("the late commit after the tick: %v, want a version mismatch (fenced)", err)
	}
	if rep := ask(other.RequestID, &actors.JobGet{RequestID: other.RequestID, OrgID: org.ID}); rep.Code != actors.ReplyNotFound {
		t.Fatalf("status read of a voided job: %+v, want %s", rep, actors.ReplyNotFound)
	}
	if _, err := actors.ReadJob(ctx, store, other.RequestID); !errors.Is(err, persistence.ErrNotFound) {
		t.Fatalf("ReadJob of a voided job: %v, want not found", err)
	}
	if rep := ask(other.RequestID, &actors.JobTick{RequestID: other.RequestID}); rep.Code != actors.ReplyNotFound {
		t.Fatalf("a second tick of the voided job: %+v", rep)
	}
	again := c.job(t, other.RequestID, &actors.JobSubmit{Spec: other, Hold: 3, Slot: true})
	if again.Record == nil || again.Replayed || again.Record.Status != jobstate.StatusQueued {
		t.Fatalf("the retried submission: %+v, want a new queued job", again)
	}
	if !entry(other.RequestID) {
		t.Fatal("the retried submission is not in the active index")
	}
	if rep := ask(other.RequestID, &actors.JobGet{RequestID: other.RequestID, OrgID: org.ID}); rep.Record == nil || rep.Record.RequestID != other.RequestID {
		t.Fatalf("status read of the retried job: %+v", rep)
	}
}
