package actors_test

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"filigrane/actors"
	"filigrane/actors/batchstate"
	"filigrane/actors/jobstate"
	"filigrane/internal/admin"
	"filigrane/internal/clock"
	"filigrane/persistence"
	"filigrane/persistence/fsblobs"
)

// A result an attempt stored without its success being recorded goes with the job's input 24 hours after the
// job ended failed: the attempt's worker lost its lease before it reported (its report is refused as stale and
// the next attempt fails), or its node died between storing and reporting and the job was then cancelled (a
// file of a cancelled batch). No record names such a file; before, the purge pass deleted only the input, and
// the file stayed in the blob store for ever. A succeeded embed's result, the watermarked asset, stays.
func TestFailedJobsStoredOutputIsPurged(t *testing.T) {
	ctx := context.Background()
	store := tempStore(t)
	blobs, clk, org := purgeFixture(t, store)
	sys, c := startSystem(t, store, store, clk)
	t.Cleanup(sys.Shutdown)
	sweeper := actors.Sweeper{Store: store, Blobs: blobs, Caller: c, Clock: clk, Logger: zerolog.Nop()}
	put := func(key string) {
		t.Helper()
		if _, err := blobs.Put(ctx, key, strings.NewReader("stored bytes")); err != nil {
			t.Fatal(err)
		}
	}
	type job struct {
		name, reqID, output string // output: the key the worker stores under (media.go, media_image.go)
		spec                jobstate.Spec
		wantKept            bool
	}
	spec := func(reqID string, op jobstate.Operation, media jobstate.Media, format string, of jobstate.OutputFormat) jobstate.Spec {
		s := jobstate.Spec{RequestID: reqID, OrgID: org.ID, Operation: op, Media: media, Format: format, FrameCount: 1,
			AcceleratorRequested: jobstate.AcceleratorCPU, OutputFormat: of,
			Input: jobstate.Input{BlobKey: "inputs/" + org.ID + "/" + reqID + "/file", SHA256: strings.Repeat("b", 64), Size: 12,
				Filename: "in." + strings.ToLower(format), ContentType: "application/octet-stream"}}
		if op == jobstate.OperationEmbed {
			s.WatermarkID = strings.Repeat("c", 64)
		}
		return s
	}
	outKey := func(reqID, name string) string { return "outputs/" + org.ID + "/" + reqID + "/" + name }
	req := func(hex string) string { return "req_" + strings.Repeat(hex, 64) }
	jobs := []job{
		{name: "webp embed, stale success then a failed attempt", reqID: req("1"), output: outKey(req("1"), "watermarked.webp"),
			spec: spec(req("1"), jobstate.OperationEmbed, jobstate.MediaImage, "PNG", jobstate.OutputWebP)},
		{name: "detection, report lost then cancelled", reqID: req("2"), output: outKey(req("2"), "detection.json"),
			spec: spec(req("2"), jobstate.OperationDetect, jobstate.MediaImage, "PNG", "")},
		{name: "MOV embed, report lost then cancelled", reqID: req("3"), output: outKey(req("3"), "watermarked.mov"),
			spec: spec(req("3"), jobstate.OperationEmbed, jobstate.MediaVideo, "MOV", "")},
		{name: "PDF embed, report lost then cancelled", reqID: req("4"), output: outKey(req("4"), "watermarked.pdf"),
			spec: spec(req("4"), jobstate.OperationEmbed, jobstate.MediaDocument, "PDF", "")},
		{name: "PNG embed that succeeded", reqID: req("5"), output: outKey(req("5"), "watermarked.png"), wantKept: true,
			spec: spec(req("5"), jobstate.OperationEmbed, jobstate.MediaImage, "PNG", "")},
	}
	for _, j := range jobs {
		put(j.spec.Input.BlobKey)
		lease := c.job(t, j.reqID, &actors.JobSubmit{Spec: j.spec, Hold: 3, ClaimAs: "n1/w0/" + j.reqID[4:8], Lease: 30 * time.Second}).Lease
		put(j.output) // the attempt stored its result
		switch {
		case j.wantKept:
			out := jobstate.Output{BlobKey: j.output, Size: 12, SHA256: strings.Repeat("d", 64), ContentType: "image/png",
				Filename: "in-watermarked.png", AssetID: actors.AssetIDFor(j.reqID, actors.AssetWatermarked),
				SourceAssetID: actors.AssetIDFor(j.reqID, actors.AssetSource), WatermarkID: j.spec.WatermarkID,
				Charge: 1, Accelerator: jobstate.AcceleratorCPU}
			c.job(t, j.reqID, &actors.JobSucceed{RequestID: j.reqID, Token: lease.Token, Output: out})
		case j.spec.Media == jobstate.MediaImage && j.spec.Operation == jobstate.OperationEmbed:
			// The worker's lease lapsed while it stored; its success comes too late, and the next attempt fails.
			clk.Advance(time.Minute)
			c.job(t, j.reqID, &actors.JobTick{RequestID: j.reqID})
			out := jobstate.Output{BlobKey: j.output, Size: 12, SHA256: strings.Repeat("d", 64), ContentType: "image/webp",
				Filename: "in-watermarked.webp", WatermarkID: j.spec.WatermarkID, Charge: 1, Accelerator: jobstate.AcceleratorCPU}
			if v, err := c.Request(ctx, j.reqID, actors.KindJob, &actors.JobSucceed{RequestID: j.reqID, Token: lease.Token, Output: out}); err != nil ||
				v.(*actors.JobReply).Code == actors.ReplyOK {
				t.Fatalf("%s: the stale worker's success: %v %+v; want refused", j.name, err, v)
			}
			clk.Advance(time.Minute) // past the retry wait (2 s)
			c.job(t, j.reqID, &actors.JobTick{RequestID: j.reqID})
			next := c.job(t, j.reqID, &actors.JobClaim{RequestID: j.reqID, WorkerID: "n2/w0/x", Lease: 30 * time.Second}).Lease
			if next == nil {
				t.Fatalf("%s: no second attempt to claim", j.name)
			}
			c.job(t, j.reqID, &actors.JobFail{RequestID: j.reqID, Token: next.Token, Code: actors.CodeInvalidImage, Detail: "no"})
		default:
			c.job(t, j.reqID, &actors.JobCancel{RequestID: j.reqID})
		}
		rec := c.job(t, j.reqID, &actors.JobGet{RequestID: j.reqID, OrgID: org.ID}).Record
		if want := map[bool]jobstate.Status{true: jobstate.StatusSucceeded, false: jobstate.StatusFailed}[j.wantKept]; rec.Status != want || !rec.Committed() {
			t.Fatalf("%s: status %s committed %v; want %s", j.name, rec.Status, rec.Committed(), want)
		}
	}

	clk.Advance(jobstate.ResultRetention + 2*time.Hour)
	if _, err := sweeper.PurgeResults(ctx); err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		for _, key := range []string{j.spec.Input.BlobKey, j.output} {
			_, err := blobs.Stat(ctx, key)
			switch {
			case j.wantKept && err != nil:
				t.Errorf("%s: %s after the purge: %v; want kept (the client's asset)", j.name, key, err)
			case !j.wantKept && !errors.Is(err, persistence.ErrNotFound):
				t.Errorf("%s: %s after the purge: %v; want deleted", j.name, key, err)
			}
		}
	}
}

// A purge entry written before failed jobs' entries listed their output keys names the input alone. The purge
// pass reads such a job's record and deletes what an attempt could have stored as well (OutputKeys), so entries
// already stored need no migration: here a cancelled video embed whose attempt stored a MOV, its entry rewritten
// in the old form. Before, the pass deleted the input only and the watermarked file stayed for ever.
func TestOldPurgeEntryPurgesTheStoredOutput(t *testing.T) {
	ctx := context.Background()
	store := tempStore(t)
	blobs, clk, org := purgeFixture(t, store)
	sys, c := startSystem(t, store, store, clk)
	t.Cleanup(sys.Shutdown)
	reqID := "req_" + strings.Repeat("7", 64)
	input := "inputs/" + org.ID + "/" + reqID + "/file"
	output := "outputs/" + org.ID + "/" + reqID + "/watermarked.mov" // where the attempt stored it (media.go)
	for _, key := range []string{input, output} {
		if _, err := blobs.Put(ctx, key, strings.NewReader("stored bytes")); err != nil {
			t.Fatal(err)
		}
	}
	c.job(t, reqID, &actors.JobSubmit{Hold: 3, ClaimAs: "n1/w0/7777", Lease: 30 * time.Second, Spec: jobstate.Spec{RequestID: reqID,
		OrgID: org.ID, Operation: jobstate.OperationEmbed, Media: jobstate.MediaVideo, Format: "MOV", FrameCount: 1,
		AcceleratorRequested: jobstate.AcceleratorCPU, WatermarkID: strings.Repeat("c", 64),
		Input: jobstate.Input{BlobKey: input, SHA256: strings.Repeat("b", 64), Size: 12, Filename: "in.mov", ContentType: "video/quicktime"}}})
	if rec := c.job(t, reqID, &actors.JobCancel{RequestID: reqID}).Record; rec.Status != jobstate.StatusFailed || !rec.Committed() {
		t.Fatalf("after the cancel: %s, committed %v", rec.Status, rec.Committed())
	}
	entries, err := store.Scan(ctx, []byte("jobs/purge/"), []byte("jobs/purge/"), 10)
	if err != nil || len(entries) != 1 {
		t.Fatalf("purge entries: %v %d; want the job's one", err, len(entries))
	}
	if _, err := store.CompareAndSet(ctx, entries[0].Key, entries[0].Version, []byte(input)); err != nil { // the old form
		t.Fatal(err)
	}

	clk.Advance(jobstate.ResultRetention + 2*time.Hour)
	if _, err := (actors.Sweeper{Store: store, Blobs: blobs, Caller: c, Clock: clk, Logger: zerolog.Nop()}).PurgeResults(ctx); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{input, output} {
		if _, err := blobs.Stat(ctx, key); !errors.Is(err, persistence.ErrNotFound) {
			t.Errorf("%s after the purge: %v; want deleted", key, err)
		}
	}
}

// A zip batch's member unpacked for an item that never became a job goes 24 hours after the batch ended, with
// the request zip: here the member's check refuses it (not an image) after it was unpacked. No job names it
// as its input, so before, nothing deleted it.
func TestRejectedZipMemberIsPurged(t *testing.T) {
	store := tempStore(t)
	purgedWithTheZip(t, store, store, func() {})
}

// A batch whose purge entries the store refused when it ended (below a quarter of the disk reserve, or a store
// that failed at that moment) stays in the active index, so the sweeper's next tick writes them and its files
// go 24 hours later. Before, the batch left the active index as it ended, the refusal was only logged, and
// nothing wrote the entries again: the request zip and the unpacked member stayed for ever.
func TestBatchPurgeEntriesAreWrittenAgain(t *testing.T) {
	raw := tempStore(t)
	store := &prefixDown{Store: raw, prefix: "jobs/purge/", why: "the store did not take the purge entry", down: true}
	purgedWithTheZip(t, store, raw, func() { store.setDown(false) })
}

// purgedWithTheZip runs a zip batch of one member that its check rejects, with the actors on store (raw: the
// same store, unwrapped), calls recovered once the batch ended, lets the sweeper tick the batches, and wants
// the request zip and the unpacked member deleted 24 hours after the batch ended.
func purgedWithTheZip(t *testing.T, store, raw persistence.Store, recovered func()) {
	t.Helper()
	ctx := context.Background()
	blobs, clk, org := purgeFixture(t, raw)
	member := bytes.Repeat([]byte("not an image "), 8)
	var zbuf bytes.Buffer
	zw := zip.NewWriter(&zbuf)
	w, err := zw.CreateHeader(&zip.FileHeader{Name: "a.png", Method: zip.Store})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(member); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	zipKey := "inputs/" + org.ID + "/batch.zip"
	info, err := blobs.Put(ctx, zipKey, bytes.NewReader(zbuf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	sys, lc := startSystem(t, store, raw, clk)
	t.Cleanup(sys.Shutdown)
	c := envBatchCaller{localCaller: lc, env: &actors.BatchEnv{Blobs: blobs, Pulse: time.Hour}}
	lc.deps.Caller.Set(c)
	id := batchstate.BatchIDFor(org.ID, "zip-batch-key")
	askBatch(t, c, id, &actors.BatchCreate{Spec: batchstate.Spec{BatchID: id, OrgID: org.ID, Source: batchstate.SourceZip,
		Accelerator: jobstate.AcceleratorCPU, IdempotencyKey: "zip-batch-key", ZipBlobKey: zipKey, ZipSHA256: info.SHA256,
		Items: []batchstate.ItemSpec{{Filename: "a.png", Size: int64(len(member)), Media: jobstate.MediaImage, WatermarkID: strings.Repeat("c", 64)}}}})
	askBatch(t, c, id, &actors.BatchStart{BatchID: id, OrgID: org.ID})
	rec := askBatch(t, c, id, &actors.BatchGet{BatchID: id, OrgID: org.ID}).Record
	if !rec.Status.Ended() || rec.Items[0].Status != batchstate.ItemRejected {
		t.Fatalf("batch %s, item %s %q; want ended, the item rejected", rec.Status, rec.Items[0].Status, rec.Items[0].ErrorCode)
	}
	memberKey := "inputs/" + org.ID + "/" + rec.Items[0].RequestID + "/member" // where the batch unpacks it (batch_items.go)
	if _, err := blobs.Stat(ctx, memberKey); err != nil {
		t.Fatalf("the member was not unpacked before its check: %v", err)
	}

	recovered()
	sweeper := actors.Sweeper{Store: raw, Blobs: blobs, Caller: c, Clock: clk, Logger: zerolog.Nop()}
	if err := sweeper.TickBatches(ctx); err != nil {
		t.Fatal(err)
	}
	// The batch answers a tick before it acts on it: a read after it waits until it has.
	askBatch(t, c, id, &actors.BatchGet{BatchID: id, OrgID: org.ID})
	clk.Advance(batchstate.ArchiveRetention + 2*time.Hour)
	if _, err := sweeper.PurgeResults(ctx); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{zipKey, memberKey} {
		if _, err := blobs.Stat(ctx, key); !errors.Is(err, persistence.ErrNotFound) {
			t.Errorf("%s after the purge: %v; want deleted", key, err)
		}
	}
	if _, err := raw.Get(ctx, []byte("batches/active/"+id)); !errors.Is(err, persistence.ErrNotFound) {
		t.Errorf("the batch's active index entry once its purge entries were written: %v; want gone", err)
	}
}

// A failed job whose purge entry could not be written stays in the active index, so the sweeper's next tick
// writes it, and its files go 24 hours later. Before, the job left the active index in the same pass that
// failed to write the entry, and nothing wrote it again: its input stayed for ever.
func TestFailedJobsPurgeEntryIsWrittenAgain(t *testing.T) {
	ctx := context.Background()
	raw := tempStore(t)
	store := &prefixDown{Store: raw, prefix: "jobs/purge/", why: "the store did not take the purge entry", down: true}
	blobs, clk, org := purgeFixture(t, raw)
	sys, c := startSystem(t, store, raw, clk)
	t.Cleanup(sys.Shutdown)
	reqID := "req_" + strings.Repeat("6", 64)
	input := "inputs/" + org.ID + "/" + reqID + "/file"
	if _, err := blobs.Put(ctx, input, strings.NewReader("stored bytes")); err != nil {
		t.Fatal(err)
	}
	c.job(t, reqID, &actors.JobSubmit{Hold: 3, Spec: jobstate.Spec{RequestID: reqID, OrgID: org.ID, Operation: jobstate.OperationDetect,
		Media: jobstate.MediaImage, Format: "PNG", FrameCount: 1, AcceleratorRequested: jobstate.AcceleratorCPU,
		Input: jobstate.Input{BlobKey: input, SHA256: strings.Repeat("b", 64), Size: 12, Filename: "in.png", ContentType: "image/png"}}})
	if rec := c.job(t, reqID, &actors.JobCancel{RequestID: reqID}).Record; rec.Status != jobstate.StatusFailed || !rec.Committed() {
		t.Fatalf("after the cancel: %s, committed %v", rec.Status, rec.Committed())
	}
	store.setDown(false)

	sweeper := actors.Sweeper{Store: raw, Blobs: blobs, Caller: c, Clock: clk, Logger: zerolog.Nop()}
	if _, err := sweeper.TickJobs(ctx); err != nil {
		t.Fatal(err)
	}
	clk.Advance(jobstate.ResultRetention + 2*time.Hour)
	if _, err := sweeper.PurgeResults(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := blobs.Stat(ctx, input); !errors.Is(err, persistence.ErrNotFound) {
		t.Errorf("the failed job's input after the purge: %v; want deleted", err)
	}
	if _, err := raw.Get(ctx, []byte("jobs/active/"+reqID)); !errors.Is(err, persistence.ErrNotFound) {
		t.Errorf("the job's active index entry once its purge entry was written: %v; want gone", err)
	}
}

// purgeFixture is the purge tests' blob store (a real directory), manual clock and organization (100 credits)
// in store.
func purgeFixture(t *testing.T, store persistence.Store) (*fsblobs.Blobs, *clock.Manual, *actors.OrgState) {
	t.Helper()
	blobs, err := fsblobs.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.NewManual(time.Date(2026, 6, 1, 10, 0, 0, 0, time.UTC))
	org, err := admin.Admin{Store: store, Clock: clk, Catalog: actors.DefaultCatalog()}.CreateOrg(context.Background(),
		"Acme", "launch", 100)
	if err != nil {
		t.Fatal(err)
	}
	return blobs, clk, org
}
