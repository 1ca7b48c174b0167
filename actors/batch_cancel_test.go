package actors_test

import (
	"bytes"
	"context"
	"errors"
	"image"
	"image/png"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"filigrane/actors"
	"filigrane/actors/batchstate"
	"filigrane/actors/jobstate"
	"filigrane/internal/admin"
	"filigrane/internal/clock"
	"filigrane/persistence"
	"filigrane/persistence/fsblobs"
	"filigrane/persistence/pebblestore"
)

// TestBatchCancelAdoptsAnItemWhoseJobWasSubmitted: a batch activation submitted its first item's job and
// stopped before it saved the acceptance (its node was shut down: bench chaos with SIGTERM), so the record
// shows the item pending while the job exists, credits held. A cancel then reaches the batch on another node.
// The item must be taken as accepted and its job cancelled with the batch: before, the cancel rejected the
// pending item as cancelled (charged nothing) and left its job to run, so the organization was charged for an
// item its batch reports cancelled (the chaos run's ledger charged a batch item the client never saw succeed).
func TestBatchCancelAdoptsAnItemWhoseJobWasSubmitted(t *testing.T) {
	ctx := context.Background()
	store := tempStore(t)
	clk := clock.NewManual(time.Date(2026, 6, 1, 10, 0, 0, 0, time.UTC))
	adm := admin.Admin{Store: store, Clock: clk, Catalog: actors.DefaultCatalog()}
	org, err := adm.CreateOrg(ctx, "Acme", "scale", 100)
	if err != nil {
		t.Fatal(err)
	}

	// Node 1 creates the batch, starts it and submits item 0's job; it dies before recording the acceptance.
	sys1, lc1 := startSystem(t, store, store, clk)
	c1 := batchCaller{localCaller: lc1}
	lc1.deps.Caller.Set(c1)
	id := batchstate.BatchIDFor(org.ID, "cancel-key")
	item := batchstate.ItemSpec{Filename: "a.png", Size: 100, Media: jobstate.MediaImage, WatermarkID: strings.Repeat("c", 64)}
	item2 := item
	item2.Filename = "b.png"
	c1.batch(t, id, &actors.BatchCreate{Spec: batchstate.Spec{BatchID: id, OrgID: org.ID, Source: batchstate.SourceUploads,
		Accelerator: jobstate.AcceleratorCPU, IdempotencyKey: "cancel-key", Items: []batchstate.ItemSpec{item, item2}}})
	sys1.Shutdown()
	rec, version, err := actors.Batches{Store: store}.Load(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rec.Start(clk.Now()); err != nil {
		t.Fatal(err)
	}
	b, err := persistence.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.CompareAndSet(ctx, []byte("batch/"+id), version, b); err != nil {
		t.Fatal(err)
	}
	sys2, lc2 := startSystem(t, store, store, clk)
	t.Cleanup(sys2.Shutdown)
	c2 := batchCaller{localCaller: lc2}
	lc2.deps.Caller.Set(c2)
	job := rec.Items[0].RequestID
	lc2.job(t, job, &actors.JobSubmit{Spec: jobstate.Spec{RequestID: job, OrgID: org.ID, Operation: jobstate.OperationEmbed,
		Media: jobstate.MediaImage, Format: "PNG", FrameCount: 1, AcceleratorRequested: jobstate.AcceleratorCPU, BatchID: id,
		IdempotencyKey: batchstate.ItemIdempotencyKey(id, 0), WatermarkID: item.WatermarkID,
		Input: jobstate.Input{BlobKey: "inputs/" + org.ID + "/a", SHA256: strings.Repeat("a", 64), Size: 100, Filename: "a.png",
			ContentType: "image/png"}},
		Hold: 1, Slot: true, Batch: true})

	// The cancel reaches the batch on node 2.
	c2.batch(t, id, &actors.BatchCancel{BatchID: id, OrgID: org.ID})
	got := c2.batch(t, id, &actors.BatchGet{BatchID: id, OrgID: org.ID}).Record
	j := lc2.job(t, job, &actors.JobGet{RequestID: job, OrgID: org.ID}).Record
	st, _, err := adm.Balance(ctx, org.ID, 1)
	if err != nil {
		t.Fatal(err)
	}
	if !j.Status.Terminal() || st.Held() != 0 {
		t.Fatalf("item 0's job is %s with %d credits held after the batch was cancelled (item %s %q): it would run and be charged",
			j.Status, st.Held(), got.Items[0].Status, got.Items[0].ErrorCode)
	}
	if got.Status != batchstate.StatusCancelled || got.Items[0].Status != batchstate.ItemFailed || got.Items[0].ErrorCode != "cancelled" ||
		got.Items[1].Status != batchstate.ItemRejected {
		t.Fatalf("batch %s, items %+v", got.Status, got.Items)
	}
}

// envBatchCaller is batchCaller with the batch actors' blobs (they probe the items' files).
type envBatchCaller struct {
	*localCaller
	env *actors.BatchEnv
}

func (c envBatchCaller) Request(ctx context.Context, identity, kind string, msg any) (any, error) {
	if kind != actors.KindBatch {
		return c.localCaller.Request(ctx, identity, kind, msg)
	}
	pid, err := c.system.Root.SpawnNamed(actors.BatchProps(c.deps, c.env), kind+"_"+identity)
	if err != nil && !errors.Is(err, actor.ErrNameExists) {
		return nil, err
	}
	return c.system.Root.RequestFuture(pid, msg, 5*time.Second).Result()
}

// TestStaleBatchActivationUndoesItsSubmit: an activation still running on a node that is shutting down (the
// cluster already gave the batch to another node, which cancelled it and rejected the pending item, seeing no
// job) submits that item's job from its stale record. Its acceptance is refused (the record moved on); it
// then reads the record, finds the item rejected, and cancels the job, which would otherwise run and be
// charged for an item the batch reports cancelled (bench chaos: SIGTERM of a node during batch cancels).
func TestStaleBatchActivationUndoesItsSubmit(t *testing.T) {
	ctx := context.Background()
	f := startPendingBatch(t)
	store, clk, c, adm, org, id, rec, lc := f.store, f.clk, f.c, f.adm, f.org, f.id, f.rec, f.lc
	ask := f.ask
	// Another activation cancels the batch: the pending item is rejected, no job to cancel.
	cur, version, err := actors.Batches{Store: store}.Load(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	cur.Cancel(clk.Now())
	b, err := persistence.Marshal(cur)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.CompareAndSet(ctx, []byte("batch/"+id), version, b); err != nil {
		t.Fatal(err)
	}
	// The slot frees; this (stale) activation's next drive submits the item from its old record.
	if r, err := (actors.OrgClient{Caller: c}).Release(ctx, actors.OrgRelease{OrgID: org.ID, Op: "req_other"}); err != nil || r.Code != actors.ReplyOK {
		t.Fatalf("release: %+v %v", r, err)
	}
	ask(&actors.BatchTick{BatchID: id})
	// The tick is answered before its drive; the activation stops after it (its save was refused), and
	// waiting for that stop waits for the drive.
	lc.gone(t, id, actors.KindBatch)
	job := rec.Items[0].RequestID
	j := lc.job(t, job, &actors.JobGet{RequestID: job, OrgID: org.ID}).Record
	if !j.Status.Terminal() {
		st, _, _ := adm.Balance(ctx, org.ID, 1)
		t.Fatalf("the stale activation's job is %s with %d credits held, for an item the batch rejected", j.Status, st.Held())
	}
	st, _, err := adm.Balance(ctx, org.ID, 1)
	if err != nil {
		t.Fatal(err)
	}
	if st.Held() != 0 {
		t.Fatalf("%d credits held after the job was cancelled", st.Held())
	}
}

// TestBatchCancelReleasesTheHoldOfAFailedSubmit: the submission of a started batch's pending item reserved
// the item's credits and then could not create the job (its active-index write timed out while the storage
// stalled: the job actor keeps the hold for a retry under the same request id), and the batch's submit saw
// only the error. A cancel then rejects the item, which has no job, so nothing would ever retry or settle the
// hold: the organization kept the credit held for hours, until the stale-hold reaper (bench chaos: storage
// frozen while nodes shut down, "1 credit still held after the run"). The cancel must release it.
func TestBatchCancelReleasesTheHoldOfAFailedSubmit(t *testing.T) {
	ctx := context.Background()
	f := startPendingBatch(t)
	op := f.rec.Items[0].RequestID
	if r, err := (actors.OrgClient{Caller: f.c}).Reserve(ctx, actors.OrgReserve{OrgID: f.org.ID, Op: op, Credits: 1}); err != nil || r.Code != actors.ReplyOK {
		t.Fatalf("reserve: %+v %v", r, err)
	}
	got := f.ask(&actors.BatchCancel{BatchID: f.id, OrgID: f.org.ID}).Record
	if got.Status != batchstate.StatusCancelled || got.Items[0].Status != batchstate.ItemRejected {
		t.Fatalf("batch %s, item %s after the cancel", got.Status, got.Items[0].Status)
	}
	// The cancel's settling runs after its answer; a read of the batch queues behind it.
	f.ask(&actors.BatchGet{BatchID: f.id, OrgID: f.org.ID})
	st, _, err := f.adm.Balance(ctx, f.org.ID, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, held := st.Holds[op]; held || st.Held() != 1 {
		t.Fatalf("holds after the cancel: %+v (only req_other's credit should be held)", st.Holds)
	}
	// The request id is settled: a stale activation's late submission of the item holds nothing again.
	if r, err := (actors.OrgClient{Caller: f.c}).Reserve(ctx, actors.OrgReserve{OrgID: f.org.ID, Op: op, Credits: 1}); err != nil || r.Code != actors.ReplyOK {
		t.Fatalf("late reserve: %+v %v", r, err)
	}
	if st, _, err = f.adm.Balance(ctx, f.org.ID, 1); err != nil || st.Held() != 1 {
		t.Fatalf("held after a late reserve: %d %v", st.Held(), err)
	}
}

// pendingBatch is a started batch of one uploaded file whose item waits, pending, for the organization's only
// slot, which another operation ("req_other", 1 credit) holds.
type pendingBatch struct {
	store *pebblestore.Store
	clk   *clock.Manual
	c     envBatchCaller
	lc    *localCaller
	adm   admin.Admin
	org   *actors.OrgState
	id    string
	rec   *batchstate.Record
	ask   func(msg any) *actors.BatchReply
}

func startPendingBatch(t *testing.T) pendingBatch {
	t.Helper()
	ctx := context.Background()
	store := tempStore(t)
	blobs, err := fsblobs.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.NewManual(time.Date(2026, 6, 1, 10, 0, 0, 0, time.UTC))
	adm := admin.Admin{Store: store, Clock: clk, Catalog: actors.DefaultCatalog()}
	org, err := adm.CreateOrg(ctx, "Acme", "launch", 100) // one slot, which batch files may use
	if err != nil {
		t.Fatal(err)
	}
	var png bytes.Buffer
	if err := pngEncode(&png); err != nil {
		t.Fatal(err)
	}
	size := int64(png.Len())
	key := "inputs/" + org.ID + "/item0"
	info, err := blobs.Put(ctx, key, bytes.NewReader(png.Bytes()))
	if err != nil {
		t.Fatal(err)
	}

	sys, lc := startSystem(t, store, store, clk)
	t.Cleanup(sys.Shutdown)
	c := envBatchCaller{localCaller: lc, env: &actors.BatchEnv{Blobs: blobs, Pulse: time.Hour}}
	lc.deps.Caller.Set(c)
	ask := func(msg any) *actors.BatchReply {
		t.Helper()
		return askBatch(t, c, batchstate.BatchIDFor(org.ID, "stale-key"), msg)
	}
	id := batchstate.BatchIDFor(org.ID, "stale-key")
	ask(&actors.BatchCreate{Spec: batchstate.Spec{BatchID: id, OrgID: org.ID, Source: batchstate.SourceUploads,
		Accelerator: jobstate.AcceleratorCPU, IdempotencyKey: "stale-key",
		Items: []batchstate.ItemSpec{{Filename: "a.png", Size: size, Media: jobstate.MediaImage, WatermarkID: strings.Repeat("c", 64)}}}})
	rec := ask(&actors.BatchGet{BatchID: id, OrgID: org.ID}).Record
	if _, err := (actors.Uploads{Store: store, Clock: clk}).Update(ctx, rec.Items[0].UploadID, func(u *actors.Upload, now time.Time) error {
		return u.Receive(key, info.SHA256, size, now)
	}); err != nil {
		t.Fatal(err)
	}
	// The organization's only slot is taken: the start leaves the item pending (waiting for a slot).
	if r, err := (actors.OrgClient{Caller: c}).Reserve(ctx, actors.OrgReserve{OrgID: org.ID, Op: "req_other", Credits: 1, Slot: true}); err != nil || r.Code != actors.ReplyOK {
		t.Fatalf("reserve: %+v %v", r, err)
	}
	if got := ask(&actors.BatchStart{BatchID: id, OrgID: org.ID}).Record; got.Items[0].Status != batchstate.ItemPending {
		t.Fatalf("item after the start: %s", got.Items[0].Status)
	}
	return pendingBatch{store: store, clk: clk, c: c, lc: lc, adm: adm, org: org, id: id, rec: rec, ask: ask}
}

func pngEncode(w *bytes.Buffer) error { return png.Encode(w, image.NewGray(image.Rect(0, 0, 64, 64))) }
