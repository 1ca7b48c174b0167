package batchstate

import (
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"filigrane/actors/jobstate"
	"filigrane/persistence"
)

var t0 = time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)

func wm(i int) string { return strings.Repeat(string(rune('a'+i%6)), 64) }

func spec(n int) Spec {
	s := Spec{BatchID: BatchIDFor("org_1", "key-12345678"), OrgID: "org_1", Source: SourceUploads,
		IdempotencyKey: "key-12345678"}
	for i := 0; i < n; i++ {
		s.Items = append(s.Items, ItemSpec{Filename: "photo" + string(rune('0'+i%10)) + ".jpg", Size: 1000 + int64(i),
			Media: jobstate.MediaImage, WatermarkID: wm(i)})
	}
	return s
}

func mustNew(t *testing.T, s Spec) *Record {
	t.Helper()
	r, err := New(s, t0)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Validate(); err != nil {
		t.Fatal(err)
	}
	return r
}

func started(t *testing.T, n int) *Record {
	t.Helper()
	r := mustNew(t, spec(n))
	if ok, err := r.Start(t0.Add(time.Hour)); !ok || err != nil {
		t.Fatalf("Start = %v, %v", ok, err)
	}
	return r
}

func res(i int) Result {
	return Result{AssetID: "ast_w" + string(rune('0'+i)), SourceAssetID: "ast_s" + string(rune('0'+i)),
		BlobKey: "outputs/x/" + string(rune('0'+i)), Size: 10, ContentType: "image/png", Ext: "png",
		ExpiresAt: t0.Add(24 * time.Hour)}
}

func TestIDsAreDerivedAndWellFormed(t *testing.T) {
	id := BatchIDFor("org_1", "key-12345678")
	if !ValidBatchID(id) || id != BatchIDFor("org_1", "key-12345678") || id == BatchIDFor("org_2", "key-12345678") {
		t.Fatalf("batch id %q not derived per organization and key", id)
	}
	if !jobstate.ValidRequestID(ItemRequestID(id, 3)) || ItemRequestID(id, 3) == ItemRequestID(id, 4) {
		t.Fatal("item request ids")
	}
	if !jobstate.ValidIdempotencyKey(ItemIdempotencyKey(id, 99)) {
		t.Fatalf("item key %q is not a valid Idempotency-Key", ItemIdempotencyKey(id, 99))
	}
	u := ItemUploadID(id, 0)
	if len(u) != 36 || !strings.HasPrefix(u, "upl_") {
		t.Fatalf("upload id %q", u)
	}
	for _, bad := range []string{"", "bat_", "bat_" + strings.Repeat("A", 32), "req_" + strings.Repeat("a", 32), id + "0"} {
		if ValidBatchID(bad) {
			t.Errorf("ValidBatchID(%q) = true", bad)
		}
	}
}

func TestNewValidatesTheWholeRequest(t *testing.T) {
	cases := map[string]func(*Spec){
		"no items":          func(s *Spec) { s.Items = nil },
		"101 items":         func(s *Spec) { *s = spec(101) },
		"empty filename":    func(s *Spec) { s.Items[1].Filename = "" },
		"long filename":     func(s *Spec) { s.Items[1].Filename = strings.Repeat("é", 256) },
		"zero size":         func(s *Spec) { s.Items[1].Size = 0 },
		"bad media":         func(s *Spec) { s.Items[1].Media = "audio" },
		"bad watermark":     func(s *Spec) { s.Items[1].WatermarkID = "xyz" },
		"archive + storage": func(s *Spec) { s.Archive, s.StorageDestinationID = true, "dst_1" },
		"accelerator":       func(s *Spec) { s.Accelerator = "tpu" },
		"bad id":            func(s *Spec) { s.BatchID = "bat_1" },
		"zip without blob":  func(s *Spec) { s.Source = SourceZip },
		"zip duplicate": func(s *Spec) {
			s.Source, s.ZipBlobKey, s.ZipSHA256 = SourceZip, "zips/x", strings.Repeat("0", 64)
			s.Items[2].Filename = s.Items[1].Filename
		},
	}
	for name, mutate := range cases {
		s := spec(3)
		mutate(&s)
		if _, err := New(s, t0); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: New = %v, want ErrInvalid", name, err)
		}
	}
	s := spec(100)
	r := mustNew(t, s)
	if r.Status != StatusDraft || len(r.Items) != 100 || r.Items[99].UploadID != ItemUploadID(s.BatchID, 99) ||
		r.Accelerator != jobstate.AcceleratorCPU {
		t.Fatalf("draft: %+v", r.Status)
	}
	if c := r.Counts(); c.Pending != 100 || c.Accepted != 0 {
		t.Fatalf("counts %+v", c)
	}
	if r.Items[0].Credits() != nil {
		t.Fatal("a pending item's credits must be null")
	}
}

func TestZipBatchStartsAtOnce(t *testing.T) {
	s := spec(2)
	s.Source, s.ZipBlobKey, s.ZipSHA256 = SourceZip, "zips/x", strings.Repeat("0", 64)
	r := mustNew(t, s)
	if r.Status != StatusStarting || !r.StartedAt.Equal(t0) || r.Items[0].UploadID != "" {
		t.Fatalf("zip batch: %s started %v upload %q", r.Status, r.StartedAt, r.Items[0].UploadID)
	}
	if ok, err := r.Start(t0.Add(48 * time.Hour)); ok || err != nil {
		t.Fatalf("Start of a started zip batch = %v, %v; want already started", ok, err)
	}
}

func TestReplayFingerprint(t *testing.T) {
	s := spec(3)
	r := mustNew(t, s)
	fp, _ := s.Fingerprint()
	if err := r.CheckReplay(fp); err != nil {
		t.Fatalf("same request: %v", err)
	}
	for name, mutate := range map[string]func(*Spec){
		"item data":   func(s *Spec) { s.Items[2].WatermarkID = wm(5) },
		"item size":   func(s *Spec) { s.Items[2].Size++ },
		"item name":   func(s *Spec) { s.Items[2].Filename = "other.jpg" },
		"item order":  func(s *Spec) { s.Items[0], s.Items[1] = s.Items[1], s.Items[0] },
		"fewer items": func(s *Spec) { s.Items = s.Items[:2] },
		"archive":     func(s *Spec) { s.Archive = true },
		"accelerator": func(s *Spec) { s.Accelerator = jobstate.AcceleratorGPU },
		"webhook":     func(s *Spec) { s.WebhookID = "wh_" + strings.Repeat("1", 32) },
	} {
		o := spec(3)
		mutate(&o)
		ofp, err := o.Fingerprint()
		if err != nil {
			t.Fatal(err)
		}
		if err := r.CheckReplay(ofp); !errors.Is(err, ErrIdempotencyConflict) {
			t.Errorf("%s: CheckReplay = %v, want conflict", name, err)
		}
	}
	// An empty accelerator is the default cpu: the same request.
	o := spec(3)
	o.Accelerator = jobstate.AcceleratorCPU
	if ofp, _ := o.Fingerprint(); r.CheckReplay(ofp) != nil {
		t.Error("accelerator cpu spelled out is the same request")
	}
}

func TestStartAndDraftExpiry(t *testing.T) {
	r := mustNew(t, spec(2))
	ok, err := r.Start(t0.Add(DraftLifetime - time.Second))
	if !ok || err != nil || r.Status != StatusStarting {
		t.Fatalf("Start within 24 h = %v, %v, %s", ok, err, r.Status)
	}
	rev := r.Revision
	if ok, err := r.Start(t0.Add(DraftLifetime + time.Hour)); ok || err != nil || r.Revision != rev {
		t.Fatalf("second Start = %v, %v (revision %d→%d); want 200 and no change", ok, err, rev, r.Revision)
	}

	late := mustNew(t, spec(2))
	if got := late.StatusAt(t0.Add(DraftLifetime)); got != StatusExpired {
		t.Fatalf("StatusAt(24 h) = %s, want expired before any tick", got)
	}
	if _, err := late.Start(t0.Add(DraftLifetime)); !errors.Is(err, ErrExpired) || late.Status != StatusExpired {
		t.Fatalf("Start after 24 h = %v, status %s; want ErrExpired", err, late.Status)
	}
	if late.CompletedAt != t0.Add(DraftLifetime) || len(late.Events) != 0 {
		t.Fatalf("expired at %v with events %v", late.CompletedAt, late.Events)
	}
	if err := late.Validate(); err != nil {
		t.Fatal(err)
	}

	ticked := mustNew(t, spec(1))
	if ticked.Tick(t0.Add(DraftLifetime-time.Nanosecond)) || !ticked.Tick(t0.Add(DraftLifetime)) || ticked.Status != StatusExpired {
		t.Fatalf("Tick: %s", ticked.Status)
	}
}

func TestItemsRunToCompletion(t *testing.T) {
	r := started(t, 3)
	i, ok := r.NextPending()
	if !ok || i != 0 {
		t.Fatalf("NextPending = %d, %v", i, ok)
	}
	now := t0.Add(2 * time.Hour)
	if err := r.Accept(0, 3, now); err != nil {
		t.Fatal(err)
	}
	if r.Status != StatusProcessing {
		t.Fatalf("after the first accept: %s, want processing", r.Status)
	}
	rev := r.Revision
	if err := r.Accept(0, 3, now); err != nil || r.Revision != rev {
		t.Fatalf("repeated Accept = %v (revision moved: %v)", err, r.Revision != rev)
	}
	if err := r.Reject(1, CodeUploadNotReceived, "no file", now); err != nil {
		t.Fatal(err)
	}
	if err := r.Accept(2, 1, now); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.NextPending(); ok {
		t.Fatal("no item should be pending")
	}
	if err := r.Observe(0, ItemRunning); err != nil || r.Items[0].Status != ItemRunning {
		t.Fatalf("Observe: %v %s", err, r.Items[0].Status)
	}
	if c := r.Credits(); c != (Credits{Reserved: 4}) {
		t.Fatalf("credits while running: %+v", c)
	}
	if err := r.Succeed(0, 1, res(0), now); err != nil { // a GPU hold of 3 charged 1 (it ran on CPU)
		t.Fatal(err)
	}
	if err := r.Fail(2, "invalid_image", "broken", now); err != nil {
		t.Fatal(err)
	}
	if r.Status != StatusCompleted || !r.CompletedAt.Equal(now) {
		t.Fatalf("batch %s at %v, want completed", r.Status, r.CompletedAt)
	}
	if c := r.Counts(); c != (Counts{Accepted: 2, Rejected: 1, Succeeded: 1, Failed: 1}) {
		t.Fatalf("counts %+v", c)
	}
	if c := r.Credits(); c != (Credits{Charged: 1, Refunded: 1}) {
		t.Fatalf("credits %+v", c)
	}
	if *r.Items[0].Credits() != 1 || *r.Items[1].Credits() != 0 || *r.Items[2].Credits() != 0 {
		t.Fatal("item credits: charge on success, 0 on rejection and failure")
	}
	if ev := r.PendingEvents(); len(ev) != 1 || ev[0].Type != EventCompleted || ev[0].ID != EventID(r.BatchID, EventCompleted) {
		t.Fatalf("events %+v", ev)
	}
	// Late and repeated reports change nothing; a contradicting one is refused.
	rev = r.Revision
	again := res(0)
	again.ExpiresAt = again.ExpiresAt.In(time.FixedZone("elsewhere", 3600)) // the same instant, read back elsewhere
	if err := r.Succeed(0, 1, again, now); err != nil || r.Revision != rev {
		t.Fatalf("repeated Succeed = %v", err)
	}
	if err := r.Fail(0, "worker_lost", "", now); !errors.Is(err, ErrTerminal) {
		t.Fatalf("Fail after success = %v, want ErrTerminal", err)
	}
	if err := r.Observe(0, ItemRunning); err != nil || r.Items[0].Status != ItemSucceeded {
		t.Fatalf("late Observe moved an ended item: %v %s", err, r.Items[0].Status)
	}
	r.MarkDelivered(ev0(r))
	if len(r.PendingEvents()) != 0 {
		t.Fatal("event still pending after MarkDelivered")
	}
	if err := r.Validate(); err != nil {
		t.Fatal(err)
	}
}

func ev0(r *Record) string { return r.Events[0].ID }

func TestNoSuccessFailsTheBatch(t *testing.T) {
	r := started(t, 2)
	now := t0.Add(2 * time.Hour)
	_ = r.Accept(0, 1, now)
	if err := r.RejectFrom(1, CodeInsufficientCredits, "out of credits", now); err != nil {
		t.Fatal(err)
	}
	if r.Status != StatusProcessing {
		t.Fatalf("item 0 still runs; batch %s", r.Status)
	}
	_ = r.Fail(0, "invalid_image", "x", now)
	if r.Status != StatusFailed || r.Events[0].Type != EventFailed {
		t.Fatalf("batch %s events %+v; want failed with watermark.batch.failed", r.Status, r.Events)
	}
}

// TestItemErrorsAreChecked: an item's error code has the API's spelling (else ErrInvalid, the item unchanged),
// and its detail is stored as valid UTF-8 of at most 1024 bytes, like a job's.
func TestItemErrorsAreChecked(t *testing.T) {
	r := started(t, 3)
	now := t0.Add(2 * time.Hour)
	for _, code := range []string{"", "Bad-Code", strings.Repeat("x", 65)} {
		if err := r.Reject(0, code, "", now); !errors.Is(err, ErrInvalid) || r.Items[0].Status != ItemPending {
			t.Fatalf("reject with code %q: %v, item %s", code, err, r.Items[0].Status)
		}
	}
	if err := r.RejectFrom(0, "not ok", "", now); !errors.Is(err, ErrInvalid) {
		t.Fatalf("reject from with a bad code: %v", err)
	}
	long := strings.Repeat("é", 700) + "\xff" // 1401 bytes, one invalid
	if err := r.Reject(0, CodeUploadNotReceived, long, now); err != nil {
		t.Fatal(err)
	}
	_ = r.Accept(1, 1, now)
	if err := r.Fail(1, "Bad", "x", now); !errors.Is(err, ErrInvalid) {
		t.Fatalf("fail with a bad code: %v", err)
	}
	if err := r.Fail(1, "invalid_image", long, now); err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{0, 1} {
		d := r.Items[i].ErrorDetail
		if len(d) > 1024 || len(d) < 1022 || !utf8.ValidString(d) || !strings.HasPrefix(long, d) {
			t.Errorf("item %d detail: %d bytes, valid %v", i, len(d), utf8.ValidString(d))
		}
	}
}

func TestCreditsRunOutRejectsTheRest(t *testing.T) {
	r := started(t, 5)
	now := t0.Add(2 * time.Hour)
	_ = r.Accept(0, 1, now)
	_ = r.Reject(1, CodeUploadNotReceived, "", now)
	if err := r.RejectFrom(2, CodeInsufficientCredits, "too few credits", now); err != nil {
		t.Fatal(err)
	}
	for i, want := range []ItemStatus{ItemQueued, ItemRejected, ItemRejected, ItemRejected, ItemRejected} {
		if r.Items[i].Status != want {
			t.Errorf("item %d: %s, want %s", i, r.Items[i].Status, want)
		}
	}
	if r.Items[1].ErrorCode != CodeUploadNotReceived || r.Items[4].ErrorCode != CodeInsufficientCredits {
		t.Fatalf("codes %q %q", r.Items[1].ErrorCode, r.Items[4].ErrorCode)
	}
	_ = r.Succeed(0, 1, res(0), now)
	if r.Status != StatusCompleted {
		t.Fatalf("the batch still ends: %s", r.Status)
	}
}

func TestCancelDraft(t *testing.T) {
	s := spec(2)
	s.Archive = true
	r := mustNew(t, s)
	r.Cancel(t0.Add(time.Minute))
	if r.Status != StatusCancelled || !r.CancelRequested || len(r.Events) != 0 {
		t.Fatalf("cancelled draft: %s events %v; want cancelled, no event", r.Status, r.Events)
	}
	// Spec 3.3: no item stays pending in a cancelled batch; a cancelled item is rejected `cancelled`, never
	// charged. Spec 3.5: the archive of a cancelled batch ends `empty`.
	for i, it := range r.Items {
		if it.Status != ItemRejected || it.ErrorCode != CodeCancelled || it.Credits() == nil || *it.Credits() != 0 {
			t.Fatalf("item %d of a cancelled draft: %s %q credits %v; want rejected cancelled, 0", i, it.Status, it.ErrorCode, it.Credits())
		}
	}
	if c := r.Counts(); c.Rejected != 2 || c.Pending != 0 || r.Credits() != (Credits{}) {
		t.Fatalf("counts %+v credits %+v; want 2 rejected, nothing charged", c, r.Credits())
	}
	if r.ArchiveStatus != ArchiveEmpty {
		t.Fatalf("archive status %q, want empty", r.ArchiveStatus)
	}
	if ok, err := r.Start(t0.Add(2 * time.Minute)); ok || err != nil || r.Status != StatusCancelled {
		t.Fatalf("Start of a cancelled draft = %v, %v, %s", ok, err, r.Status)
	}
	if err := r.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestCancelStartedBatch(t *testing.T) {
	r := started(t, 4)
	now := t0.Add(2 * time.Hour)
	_ = r.Accept(0, 1, now)
	_ = r.Accept(1, 1, now)
	_ = r.Observe(1, ItemRunning)
	r.Cancel(now)
	if r.Status != StatusProcessing || !r.CancelRequested {
		t.Fatalf("batch %s; it ends after its running files", r.Status)
	}
	for _, i := range []int{2, 3} {
		if it := r.Items[i]; it.Status != ItemRejected || it.ErrorCode != CodeCancelled {
			t.Fatalf("pending item %d: %s %q, want rejected cancelled", i, it.Status, it.ErrorCode)
		}
	}
	if got := r.CancelJobs(); len(got) != 2 || got[0] != 0 || got[1] != 1 {
		t.Fatalf("CancelJobs = %v", got)
	}
	if _, ok := r.NextPending(); ok {
		t.Fatal("a cancelled batch submits nothing more")
	}
	_ = r.Fail(0, CodeCancelled, "cancelled", now)
	_ = r.Succeed(1, 1, res(1), now) // it finished before the cancel reached it
	if r.Status != StatusCancelled || r.Events[0].Type != EventCancelled {
		t.Fatalf("batch %s events %+v", r.Status, r.Events)
	}
	if c := r.Credits(); c.Charged != 1 || c.Refunded != 1 {
		t.Fatalf("credits %+v", c)
	}
	rev := r.Revision
	r.Cancel(now.Add(time.Hour))
	if r.Revision != rev {
		t.Fatal("cancelling an ended batch changed it")
	}
}

func TestArchive(t *testing.T) {
	s := spec(2)
	s.Archive = true
	r := mustNew(t, s)
	_, _ = r.Start(t0)
	now := t0.Add(time.Hour)
	_ = r.Accept(0, 1, now)
	_ = r.Accept(1, 1, now)
	_ = r.Succeed(0, 1, res(0), now)
	_ = r.Fail(1, "invalid_image", "", now)
	if r.Status != StatusAssembling || r.ArchiveStatus != ArchiveQueued || len(r.Events) != 0 {
		t.Fatalf("batch %s archive %q events %d; want assembling, queued, no event yet", r.Status, r.ArchiveStatus, len(r.Events))
	}
	if !r.ArchiveStarted(t0) || r.ArchiveStatus != ArchiveAssembling || r.ArchiveStarted(t0) {
		t.Fatalf("archive started: %q; want assembling, once", r.ArchiveStatus)
	}
	r.Cancel(now) // no effect while assembling
	if r.Status != StatusAssembling || !r.CancelRequested {
		t.Fatalf("cancel while assembling: %s", r.Status)
	}
	if err := r.ArchiveDone(ArchiveReady, "", 0, now); !errors.Is(err, ErrInvalid) {
		t.Fatalf("ready without a zip = %v", err)
	}
	if err := r.ArchiveDone(ArchiveReady, "archives/x", 123, now); err != nil {
		t.Fatal(err)
	}
	if r.Status != StatusCompleted || r.Events[0].Type != EventCompleted || !r.ArchiveExpiresAt.Equal(now.Add(24*time.Hour)) {
		t.Fatalf("after the archive: %s %v %v", r.Status, r.Events, r.ArchiveExpiresAt)
	}
	if !r.ArchiveAvailable(now.Add(24*time.Hour-time.Second)) || r.ArchiveAvailable(now.Add(24*time.Hour)) {
		t.Fatal("archive kept 24 h")
	}
	if err := r.ArchiveDone(ArchiveReady, "archives/x", 123, now); err != nil {
		t.Fatalf("repeat: %v", err)
	}

	// No success: no assembling, archive empty.
	s2 := spec(1)
	s2.Archive = true
	r2 := mustNew(t, s2)
	_, _ = r2.Start(t0)
	_ = r2.Reject(0, CodeUploadNotReceived, "", now)
	if r2.Status != StatusFailed || r2.ArchiveStatus != ArchiveEmpty {
		t.Fatalf("%s %q", r2.Status, r2.ArchiveStatus)
	}
	// Too large.
	r3 := mustNew(t, s)
	_, _ = r3.Start(t0)
	_ = r3.Accept(0, 1, now)
	_ = r3.Reject(1, CodeUploadNotReceived, "", now)
	_ = r3.Succeed(0, 1, res(0), now)
	if err := r3.ArchiveDone(ArchiveTooLarge, "", 0, now); err != nil || r3.Status != StatusCompleted || r3.ArchiveStatus != ArchiveTooLarge {
		t.Fatalf("too large: %v %s %s", err, r3.Status, r3.ArchiveStatus)
	}
}

func TestRemoveAfterRetention(t *testing.T) {
	r := started(t, 1)
	now := t0.Add(time.Hour)
	_ = r.Accept(0, 1, now)
	_ = r.Succeed(0, 1, res(0), now)
	if r.Remove(t0.Add(RecordRetention - time.Second)) {
		t.Fatal("removed before 30 days")
	}
	if !r.Remove(t0.Add(RecordRetention)) || !r.Removed || r.Items != nil {
		t.Fatal("not removed after 30 days")
	}
	fp, _ := spec(1).Fingerprint()
	if err := r.CheckReplay(fp); !errors.Is(err, ErrIdempotencyConflict) {
		t.Fatalf("the key after removal: %v, want conflict", err)
	}
	running := started(t, 1)
	_ = running.Accept(0, 1, now)
	if running.Remove(t0.Add(RecordRetention + time.Hour)) {
		t.Fatal("a running batch is never removed")
	}
}

func TestArchiveName(t *testing.T) {
	it := &Item{Index: 7, Filename: "shots/summer.photo.JPG", Result: &Result{Ext: "png"}}
	if got := ArchiveName(it); got != "007-summer.photo-watermarked.png" {
		t.Fatalf("ArchiveName = %q", got)
	}
	// A right-to-left override, isolates, marks and control characters from the client's name are dropped:
	// shown by a file manager, "report\u202Egnp.exe" would read "reportexe.png..." reversed.
	it = &Item{Index: 8, Filename: "report\u202Egnp\u2066x\u2069\u200F\n\t\x00.exe.pdf", Result: &Result{Ext: "pdf"}}
	if got := ArchiveName(it); got != "008-reportgnpx.exe-watermarked.pdf" {
		t.Fatalf("ArchiveName = %q", got)
	}
	// So is every other character a name may not hold (internal/hiddenchar): zero-width space, byte order mark,
	// line separator, soft hyphen, private use; the joiners written words need are kept.
	it = &Item{Index: 9, Filename: "a\u200bb\ufeffc\u2028d\u00ade\ue000f\u200cg\u200dh.png", Result: &Result{Ext: "png"}}
	if got := ArchiveName(it); got != "009-abcdef\u200cg\u200dh-watermarked.png" {
		t.Fatalf("ArchiveName = %+q", got)
	}
}

func TestRecordSurvivesStorage(t *testing.T) {
	r := started(t, 2)
	_ = r.Accept(0, 1, t0)
	_ = r.Succeed(0, 1, res(0), t0)
	b, err := persistence.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var back Record
	if err := persistence.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if err := back.Validate(); err != nil {
		t.Fatal(err)
	}
	if back.Items[0].Result == nil || !sameResult(*back.Items[0].Result, res(0)) || back.Counts() != r.Counts() || !back.CreatedAt.Equal(r.CreatedAt) {
		t.Fatalf("round trip lost state: %+v", back.Items[0])
	}
	c := r.Clone()
	c.Items[0].Result.BlobKey = "changed"
	if r.Items[0].Result.BlobKey == "changed" {
		t.Fatal("Clone shares results")
	}
}

// TestCancelLetsRunningFilesFinish: a started batch with an archive, item 0 running (2 credits held), item 1
// queued, items 2 and 3 pending, is cancelled (spec 3.2: "cancelled (after running files finish)"). Step by
// step, the batch stays processing with cancel_requested while the running file runs, its counts and credits
// add up at every moment, and it ends cancelled (archive empty, one event) only once the running file ended,
// whatever it ended as.
func TestCancelLetsRunningFilesFinish(t *testing.T) {
	for _, tc := range []struct {
		name              string
		end               func(r *Record, now time.Time) error
		succeeded, failed int
		charged, refunded int64
	}{
		{"the running file succeeds", func(r *Record, now time.Time) error { return r.Succeed(0, 2, res(0), now) }, 1, 1, 2, 1},
		{"the running file fails as a single job would",
			func(r *Record, now time.Time) error { return r.Fail(0, "invalid_image", "bad pixels", now) }, 0, 2, 0, 3},
		{"the running file's attempt ends retryably (its job cancels it then)",
			func(r *Record, now time.Time) error {
				return r.Fail(0, CodeCancelled, "cancelled after its attempt", now)
			}, 0, 2, 0, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := spec(4)
			s.Archive = true
			r := mustNew(t, s)
			if ok, err := r.Start(t0.Add(time.Hour)); !ok || err != nil {
				t.Fatalf("Start = %v, %v", ok, err)
			}
			now := t0.Add(2 * time.Hour)
			if err := r.Accept(0, 2, now); err != nil {
				t.Fatal(err)
			}
			if err := r.Observe(0, ItemRunning); err != nil {
				t.Fatal(err)
			}
			if err := r.Accept(1, 1, now); err != nil {
				t.Fatal(err)
			}
			check := func(when string, status Status, c Counts, cr Credits) {
				t.Helper()
				if err := r.Validate(); err != nil {
					t.Fatalf("%s: %v", when, err)
				}
				if r.Status != status || !r.CancelRequested || r.Counts() != c || r.Credits() != cr {
					t.Fatalf("%s: %s cancel_requested %v counts %+v credits %+v; want %s %+v %+v", when, r.Status,
						r.CancelRequested, r.Counts(), r.Credits(), status, c, cr)
				}
			}
			r.Cancel(now)
			check("cancelled", StatusProcessing, Counts{Accepted: 2, Rejected: 2, InProgress: 2}, Credits{Reserved: 3})
			if got := r.CancelJobs(); len(got) != 2 {
				t.Fatalf("CancelJobs = %v: both jobs are asked, each decides", got)
			}
			// The queued file's job was waiting for a worker: failed, cancelled, refunded.
			if err := r.Fail(1, CodeCancelled, "the job was cancelled before it finished", now); err != nil {
				t.Fatal(err)
			}
			check("queued file cancelled", StatusProcessing, Counts{Accepted: 2, Rejected: 2, Failed: 1, InProgress: 1},
				Credits{Reserved: 2, Refunded: 1})
			if len(r.Events) != 0 || r.ArchiveStatus == ArchiveEmpty {
				t.Fatalf("ended early: events %+v archive %s", r.Events, r.ArchiveStatus)
			}
			r.Cancel(now.Add(time.Second)) // a second cancel while the file runs changes nothing
			if err := tc.end(r, now.Add(time.Minute)); err != nil {
				t.Fatal(err)
			}
			check("running file ended", StatusCancelled,
				Counts{Accepted: 2, Rejected: 2, Succeeded: tc.succeeded, Failed: tc.failed},
				Credits{Charged: tc.charged, Refunded: tc.refunded})
			if r.ArchiveStatus != ArchiveEmpty || len(r.Events) != 1 || r.Events[0].Type != EventCancelled {
				t.Fatalf("archive %s events %+v", r.ArchiveStatus, r.Events)
			}
		})
	}
}
