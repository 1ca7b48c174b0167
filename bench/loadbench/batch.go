package loadbench

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"path"
	"slices"
	"sort"
	"strings"
	"time"
)

// BatchItems is the item count of a batch operation, and BatchImageSide the side of each item's image: a few
// small photos (the smallest class a mark fits), so that a batch costs about as much codec work as one
// default embed and the mix measures the batch machinery, not the codec.
const (
	BatchItems     = 3
	BatchImageSide = 256
)

// batchView is the part of the batch resource (spec 2.4) the operation reads.
type batchView struct {
	BatchID       string  `json:"batch_id"`
	Status        string  `json:"status"`
	ItemCount     int     `json:"item_count"`
	ArchiveStatus *string `json:"archive_status"`
	ArchiveURL    string  `json:"archive_url"`
	Credits       struct {
		Reserved int64 `json:"reserved"`
		Charged  int64 `json:"charged"`
	} `json:"credits"`
	Items []batchItemView `json:"items"`
}

type batchItemView struct {
	Index     int     `json:"index"`
	Filename  string  `json:"filename"`
	Status    string  `json:"status"`
	RequestID *string `json:"request_id"`
	ErrorCode *string `json:"error_code"`
	Credits   *int64  `json:"credits"`
	Upload    *struct {
		Method string `json:"method"`
		URL    string `json:"url"`
	} `json:"upload"`
}

// finalBatch says whether a batch status is an end state (spec 3.2).
func finalBatch(status string) bool {
	switch status {
	case "completed", "failed", "cancelled", "expired":
		return true
	}
	return false
}

// batchOutcome is how a batch operation ended, for the final check's verdict.
type batchOutcome int

const (
	batchDone  batchOutcome = iota // ended (well or not: the outcome says which)
	batchLost                      // the service no longer knows a batch it created
	batchStuck                     // the batch did not end within the retry budget
	batchOther                     // gave up before learning (no answer) or a refusal
)

// batchItemFile is one item's file.
type batchItemFile struct {
	name, contentType string
	data              []byte
}

// batchFiles are the items of a batch operation: BatchItems small photos, or for batch_media a photo, the
// embed_pdf document and the embed_video clip (the item's extension selects its kind): BatchItems files
// either way, which the checks of a batch's items count on.
func (r *runner) batchFiles(op Op) []batchItemFile {
	if op == OpBatchMedia || op == OpBatchMediaCancel {
		return []batchItemFile{{"photo0.jpg", "image/jpeg", r.batchFile}, {"doc1.pdf", "application/pdf", r.pdfFile},
			{"clip2.mp4", "video/mp4", r.clipFile}}
	}
	out := make([]batchItemFile, BatchItems)
	for i := range out {
		out[i] = batchItemFile{fmt.Sprintf("photo%d.jpg", i), "image/jpeg", r.batchFile}
	}
	return out
}

// batchCreateBody is the create request of the batch with Idempotency-Key idem: the same bytes for the same
// key, so that a retry or a resume is the same request (a different one is refused with 409).
func (r *runner) batchCreateBody(op Op, idem string) []byte {
	type item struct {
		Filename string         `json:"filename"`
		Size     int            `json:"size"`
		Data     map[string]any `json:"data"`
	}
	req := struct {
		Items   []item `json:"items"`
		Archive bool   `json:"archive"`
	}{Archive: true}
	for i, f := range r.batchFiles(op) {
		req.Items = append(req.Items, item{Filename: f.name, Size: len(f.data),
			Data: map[string]any{"benchmark": "load", "batch": idem, "item": i}})
	}
	b, _ := json.Marshal(req) // plain values: cannot fail
	return b
}

// batch runs a batch as the CLI's `batches create DIR --archive --wait` does: create it (Idempotency-Key),
// PUT each file to its item's signed URL, start it, poll it to its end, download the archive and check it.
// Every item the service accepted goes into the job book (so that the final check reads it like any job) and
// every item that succeeded counts as a charged success (the ledger charges items by their request id).
// The operation succeeds when every item succeeded, the archive holds each and the batch's credits add up.
// A retry of the create after a lost answer, or after a signed URL's node died, is the same batch (same key):
// the service answers it with fresh upload URLs for the files it has not received.
func (a *attempt) batch(ctx context.Context) batchOutcome { return a.runBatch(ctx, false) }

// batchCancel is batch with a cancel right after the start. Its replay after the run (a batch given up) is a
// plain batch: the cancel may never have arrived, and the batch then ends completed, which is also an end
// this operation accepts.
func (a *attempt) batchCancel(ctx context.Context) batchOutcome { return a.runBatch(ctx, true) }

func (a *attempt) runBatch(ctx context.Context, cancel bool) batchOutcome {
	// The replay after the run is a plain batch of the same files (a cancel may never have arrived).
	replayOp := OpBatch
	if a.op == OpBatchMedia || a.op == OpBatchMediaCancel {
		replayOp = OpBatchMedia
	}
	a.charged = &replay{op: replayOp, idem: a.idem}
	body := a.r.batchCreateBody(a.op, a.idem)
	var b batchView
	created := false
	for {
		res, ok := a.send(ctx, "POST", "/watermarks/batches", "application/json", body, true)
		if !ok {
			return batchOther
		}
		if res.status != 200 && res.status != 201 {
			a.fail(res)
			if created && res.status == 409 {
				// The key named a batch a moment ago: its records are gone.
				return batchLost
			}
			return batchOther
		}
		if err := json.Unmarshal(res.body, &b); err != nil || b.BatchID == "" || len(b.Items) != BatchItems {
			a.out.failure, a.out.sample = fmt.Sprintf("%d without batch_id or %d items", res.status, BatchItems), snippet(res.body)
			return batchOther
		}
		created, a.batchID, a.out.batchID = true, b.BatchID, b.BatchID
		a.r.jobs.batchCreated(b.BatchID, a.idem)
		if a.uploadItems(ctx, &b) {
			break
		}
		if a.out.failure != "" {
			return batchOther
		}
		// A signed URL's node did not take the file: ask again for the batch (fresh URLs) on another node.
	}
	if b.Status == "draft" {
		// 200: started already (a repeated start, or a resume).
		if out, ok := a.batchAction(ctx, b.BatchID, "start", 200, 202); !ok {
			return out
		}
	}
	if cancel {
		if out, ok := a.batchAction(ctx, b.BatchID, "cancel", 200); !ok {
			return out
		}
	}
	out := a.followBatch(ctx, &b)
	if out != batchDone || a.out.failure != "" {
		return out
	}
	if cancel && b.Status == "cancelled" {
		a.checkCancelled(&b)
		return batchDone
	}
	a.checkBatch(ctx, &b)
	return batchDone
}

// batchAction POSTs the batch's action (start, cancel) and reports whether it answered one of the statuses
// wanted; when not, how the operation ends (a 404 is a lost batch).
func (a *attempt) batchAction(ctx context.Context, batchID, action string, want ...int) (batchOutcome, bool) {
	res, ok := a.send(ctx, "POST", "/watermarks/batches/"+url.PathEscape(batchID)+"/"+action, "", nil, true)
	if !ok {
		return batchOther, false
	}
	if slices.Contains(want, res.status) {
		return batchDone, true
	}
	a.fail(res)
	if res.status == 404 {
		return batchLost, false
	}
	return batchOther, false
}

// checkCancelled checks a batch that ended cancelled: every item succeeded (with its credits) or was rejected
// or failed with error_code cancelled and charged nothing, nothing is still reserved, the batch's charge is
// the succeeded items', and there is no archive. It sets a.out.ok, or the failure.
func (a *attempt) checkCancelled(b *batchView) {
	var charged int64
	for _, it := range b.Items {
		switch {
		case it.Status == "succeeded" && it.RequestID != nil && it.Credits != nil && *it.Credits > 0:
			charged += *it.Credits
		case (it.Status == "failed" || it.Status == "rejected") && it.ErrorCode != nil && *it.ErrorCode == "cancelled" &&
			(it.Credits == nil || *it.Credits == 0):
		default:
			a.out.failure, a.out.sample = "cancelled batch with an item "+it.Status, fmt.Sprintf("%+v", it)
			return
		}
	}
	if len(b.Items) != BatchItems || b.Credits.Reserved != 0 || b.Credits.Charged != charged {
		a.out.failure, a.out.sample = "cancelled batch's credits do not add up", fmt.Sprintf("%d items, reserved %d, charged %d, items' charges %d",
			len(b.Items), b.Credits.Reserved, b.Credits.Charged, charged)
		return
	}
	if b.ArchiveStatus != nil && *b.ArchiveStatus != "empty" {
		a.out.failure = "cancelled batch with archive_status " + *b.ArchiveStatus
		return
	}
	a.out.ok = true
}

// uploadItems PUTs the file of every item that has an upload URL. It returns false after a failure that may
// pass (the URL's node gone), with a.out.failure empty when the operation should ask for fresh URLs.
func (a *attempt) uploadItems(ctx context.Context, b *batchView) bool {
	files := a.r.batchFiles(a.op)
	for _, it := range b.Items {
		if it.Upload == nil {
			continue // received already (a repeated create)
		}
		method := it.Upload.Method
		if method == "" {
			method = "PUT"
		}
		if it.Index < 0 || it.Index >= len(files) {
			a.out.failure, a.out.sample = fmt.Sprintf("batch item index %d of %d", it.Index, len(files)), fmt.Sprintf("%+v", it)
			return false
		}
		f := files[it.Index]
		put, err := a.r.http.do(method, it.Upload.URL, "", f.contentType, f.data, nil, false)
		if err != nil || retryablePut(put) {
			key := putKey(put, err)
			if !a.again(ctx, key) && err != nil {
				a.out.sample = err.Error()
			}
			return false
		}
		if put.status == 409 && put.problemCode() == "upload_already_received" {
			// An earlier PUT of this file, whose answer was lost (or came after the batch listed the item
			// without it), was received: the file is there.
			continue
		}
		if put.status/100 != 2 {
			a.out.failure, a.out.sample = "PUT "+put.failureKey(), snippet(put.body)
			return false
		}
	}
	return true
}

// followBatch polls the batch (on any node) until it ends, booking its items as the service accepts and
// ends them.
func (a *attempt) followBatch(ctx context.Context, b *batchView) batchOutcome {
	path := "/watermarks/batches/" + url.PathEscape(b.BatchID)
	for {
		a.bookItems(b)
		if b.Status == "assembling" && b.ArchiveStatus != nil {
			// Counted among the retried answers (each is a poll repeated), so that a run shows whether its
			// archives waited for an assembly slot (queued) and how long they were built (assembling).
			a.countPoll("poll: archive_status " + *b.ArchiveStatus)
		}
		if finalBatch(b.Status) {
			a.r.jobs.batchEnded(b.BatchID, b.Status)
			return batchDone
		}
		select {
		case <-ctx.Done():
			a.out.failure = "gave up: batch not finished"
			return batchStuck
		case <-time.After(a.r.cfg.PollInterval):
		}
		if time.Now().After(a.giveUp) {
			a.out.failure = "gave up: batch " + b.Status
			return batchStuck
		}
		res, ok := a.send(ctx, "GET", path, "", nil, true)
		if !ok {
			return batchOther
		}
		if res.status != 200 {
			// A batch the service created must stay known: a 404 is a lost batch, retried until the budget
			// ends.
			if a.again(ctx, "poll "+res.failureKey()) {
				continue
			}
			a.out.sample = snippet(res.body)
			if res.status == 404 {
				return batchLost
			}
			return batchOther
		}
		var next batchView
		if err := json.Unmarshal(res.body, &next); err != nil || next.BatchID != b.BatchID {
			a.out.failure, a.out.sample = "200 batch not JSON", snippet(res.body)
			return batchOther
		}
		*b = next
	}
}

// bookItems puts the batch's accepted items into the job book, ended ones with their outcome, and the
// succeeded ones among the charged successes the client saw.
func (a *attempt) bookItems(b *batchView) {
	now := time.Now()
	a.out.items = a.out.items[:0]
	for _, it := range b.Items {
		if it.RequestID == nil || *it.RequestID == "" {
			continue
		}
		id := *it.RequestID
		a.out.items = append(a.out.items, id)
		a.r.jobs.accepted(id, a.op, now)
		if terminal(it.Status) {
			a.r.jobs.ended(id, it.Status, now)
			if it.Status == "succeeded" {
				a.r.jobs.success(id, OpBatch)
			}
		}
	}
}

// checkBatch checks an ended batch as its user would: every item accounted for (succeeded, or failed or
// rejected with an error_code), its credits (nothing still reserved, the charge the sum of the items'), and
// the archive: downloaded (waiting while it is assembled) and holding each succeeded item's file under its
// documented name, with a manifest naming the same request ids. It sets a.out.ok, or the failure.
func (a *attempt) checkBatch(ctx context.Context, b *batchView) {
	var succeeded, failed []string
	var charged int64
	byIndex := map[int]string{}
	for _, it := range b.Items {
		switch it.Status {
		case "succeeded":
			if it.RequestID == nil || it.Credits == nil || *it.Credits <= 0 {
				a.out.failure, a.out.sample = "batch item succeeded without request_id or credits", fmt.Sprintf("%+v", it)
				return
			}
			succeeded = append(succeeded, *it.RequestID)
			byIndex[it.Index] = *it.RequestID
			charged += *it.Credits
		case "failed", "rejected":
			if it.ErrorCode == nil || *it.ErrorCode == "" {
				a.out.failure, a.out.sample = "batch item "+it.Status+" without error_code", fmt.Sprintf("%+v", it)
				return
			}
			failed = append(failed, it.Status+" "+*it.ErrorCode)
		default:
			a.out.failure, a.out.sample = "batch "+b.Status+" with an item "+it.Status, fmt.Sprintf("%+v", it)
			return
		}
	}
	if len(b.Items) != BatchItems || b.ItemCount != BatchItems {
		a.out.failure, a.out.sample = "batch items not all listed", fmt.Sprintf("item_count %d, %d listed", b.ItemCount, len(b.Items))
		return
	}
	if b.Credits.Reserved != 0 || b.Credits.Charged != charged {
		a.out.failure, a.out.sample = "batch credits do not add up", fmt.Sprintf("reserved %d, charged %d, items' charges %d", b.Credits.Reserved, b.Credits.Charged, charged)
		return
	}
	if len(failed) > 0 {
		sort.Strings(failed)
		a.out.failure, a.out.sample = "batch "+b.Status+": item "+failed[0], strings.Join(failed, ", ")
		return
	}
	if b.Status != "completed" {
		a.out.failure = "batch " + b.Status
		return
	}
	zipBody, ok := a.archive(ctx, b)
	if !ok {
		return
	}
	if err := checkArchive(zipBody, b.BatchID, byIndex, b.Items); err != nil {
		a.out.failure, a.out.sample = "archive wrong", err.Error()
		return
	}
	a.out.ok = true
}

// archive downloads the batch's archive on any node, waiting while the service answers 202 (assembling).
func (a *attempt) archive(ctx context.Context, b *batchView) ([]byte, bool) {
	if b.ArchiveURL == "" {
		a.out.failure = "completed batch without archive_url"
		return nil, false
	}
	for {
		res, ok := a.send(ctx, "GET", b.ArchiveURL, "", nil, true)
		if !ok {
			return nil, false
		}
		switch {
		case res.status == 200 && strings.HasPrefix(res.contentType, "application/zip"):
			return res.body, true
		case res.status == 202:
			if a.again(ctx, "archive 202") {
				continue
			}
			return nil, false
		default:
			a.out.failure, a.out.sample = "archive "+res.failureKey(), snippet(res.body)
			return nil, false
		}
	}
}

// checkArchive checks a completed batch's zip: one file per succeeded item, named
// `<index 3 digits>-<name>-watermarked.<ext>` and not empty, and manifest.json listing the same items with
// their request ids and nothing failed.
func checkArchive(body []byte, batchID string, succeeded map[int]string, items []batchItemView) error {
	zr, err := zip.NewReader(bytes.NewReader(body), int64(len(body)))
	if err != nil {
		return fmt.Errorf("not a zip: %w", err)
	}
	var manifest struct {
		BatchID string `json:"batch_id"`
		Files   []struct {
			Index     int    `json:"index"`
			Filename  string `json:"filename"`
			RequestID string `json:"request_id"`
		} `json:"files"`
		Failed []json.RawMessage `json:"failed"`
	}
	sizes := map[string]uint64{}
	for _, f := range zr.File {
		if f.Name != "manifest.json" {
			sizes[f.Name] = f.UncompressedSize64
			continue
		}
		rc, err := f.Open()
		if err != nil {
			return fmt.Errorf("open manifest.json: %w", err)
		}
		m, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			return fmt.Errorf("read manifest.json: %w", err)
		}
		if err := json.Unmarshal(m, &manifest); err != nil {
			return fmt.Errorf("manifest.json: %w", err)
		}
	}
	if manifest.BatchID != batchID || len(manifest.Failed) != 0 || len(manifest.Files) != len(succeeded) || len(sizes) != len(succeeded) {
		return fmt.Errorf("manifest of %q with %d files and %d failed, %d files in the zip; want %s with %d files",
			manifest.BatchID, len(manifest.Files), len(manifest.Failed), len(sizes), batchID, len(succeeded))
	}
	for _, f := range manifest.Files {
		name := ""
		if f.Index >= 0 && f.Index < len(items) {
			base := strings.TrimSuffix(items[f.Index].Filename, path.Ext(items[f.Index].Filename))
			name = fmt.Sprintf("%03d-%s-watermarked.", f.Index, base)
		}
		if succeeded[f.Index] != f.RequestID || name == "" || !strings.HasPrefix(f.Filename, name) || sizes[f.Filename] == 0 {
			return fmt.Errorf("manifest entry %d %q (%s): want request %s, a file named %s* in the zip (size %d)",
				f.Index, f.Filename, f.RequestID, succeeded[f.Index], name, sizes[f.Filename])
		}
	}
	return nil
}

// batchEntry is a batch the service created for the run.
type batchEntry struct {
	idem   string
	status string // final status once seen ended
}

func (b *jobBook) batchCreated(id, idem string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.batches[id]; !ok {
		b.batches[id] = &batchEntry{idem: idem}
	}
}

func (b *jobBook) batchEnded(id, status string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if e, ok := b.batches[id]; ok {
		e.status = status
	}
}

// batchCounts returns how many batches the service created, how many were seen ended, and how many of those
// ended cancelled.
func (b *jobBook) batchCounts() (created, ended, cancelled int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, e := range b.batches {
		created++
		if e.status != "" {
			ended++
		}
		if e.status == "cancelled" {
			cancelled++
		}
	}
	return created, ended, cancelled
}

// openBatches returns the keys of the batches created and not seen ended (by batch id).
func (b *jobBook) openBatches() map[string]string {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := map[string]string{}
	for id, e := range b.batches {
		if e.status == "" {
			out[id] = e.idem
		}
	}
	return out
}
