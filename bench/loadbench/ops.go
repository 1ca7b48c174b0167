package loadbench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"mime/multipart"
	"net/url"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Op is one kind of user operation.
type Op string

// The operations of the mix. Every one but OpStatus costs credits; those carry an Idempotency-Key, so that a
// retry after a lost answer (a killed node, a timeout) is the same operation and is charged once.
const (
	// OpEmbed is a synchronous image embed (POST /watermarks/images with the file): the marked PNG, or a
	// receipt when the server's sync wait ran out, which is then polled to the end.
	OpEmbed Op = "embed"
	// OpEmbedAsync is POST /watermarks/images/async, then GET /watermarks/jobs/{id} until the job ends.
	OpEmbedAsync Op = "embed_async"
	// OpDetect is a synchronous detection (POST /watermarks/images/detect) of a marked copy.
	OpDetect Op = "detect"
	// OpDetectNoKey is OpDetect without an Idempotency-Key, as a client that sends none does: the service runs
	// it in the request without a job record (actors.SyncDetector), charges it if and only if it answers the
	// detection, and a retry after a lost answer is another operation. Its credit hold must not outlive the
	// request, even when the node that took it dies (the credits check: nothing held after the run).
	OpDetectNoKey Op = "detect_nokey"
	// OpStatus is GET /watermarks/jobs/{id} of a job this run created.
	OpStatus Op = "status"
	// OpUploadEmbed is a signed upload (POST /uploads, PUT the file to the signed URL) and a synchronous embed
	// naming its upload_id.
	OpUploadEmbed Op = "upload_embed"
	// OpBatch is a batch of BatchItems small images with an archive, as the CLI runs one: create it, PUT each
	// file to its signed URL, start it, poll it to its end and download the archive (batch.go). Its items are
	// charged, each by its own request id.
	OpBatch Op = "batch"
	// OpEmbedWebhook is OpEmbedAsync naming the run's webhook endpoint (webhook_id): the harness's receiver
	// must get the job's final event (webhook.go). A retry with the same Idempotency-Key is the same job.
	OpEmbedWebhook Op = "embed_webhook"
	// OpEmbedStorage is OpEmbedAsync naming the run's storage destination (storage_destination_id): the
	// result must end up stored in that bucket (storage.go).
	OpEmbedStorage Op = "embed_storage"
	// OpBatchCancel is OpBatch cancelled right after its start (POST .../cancel): it must end cancelled, each
	// item succeeded (charged) or rejected/failed with error_code cancelled (not charged), nothing left
	// reserved; or completed, when the cancel came after the files were done (it then has no effect).
	OpBatchCancel Op = "batch_cancel"
	// OpEmbedGPU is OpEmbedAsync with accelerator=gpu: three times the price is held while it runs, and a job
	// that ran on a CPU (no GPU ready: a local cluster has none) must be charged the plain price, its hold
	// released (the credits check).
	OpEmbedGPU Op = "embed_gpu"
	// OpEmbedPDF is an asynchronous embed of a small multi-page PDF (POST /watermarks/documents/async), followed
	// to its end, then its result downloaded and checked (media.go). It is charged the document price per file.
	OpEmbedPDF Op = "embed_pdf"
	// OpEmbedVideo is an asynchronous embed of a short small clip made with ffmpeg at set-up (POST
	// /watermarks/videos/async: the service runs ffmpeg), followed to its end, then its result downloaded and
	// checked (media.go). It is charged the video price per started minute.
	OpEmbedVideo Op = "embed_video"
	// OpBatchMedia is OpBatch with three items of three kinds: a photo, embed_pdf's document and embed_video's
	// clip (the filename's extension selects the kind; a video item is charged per started minute).
	OpBatchMedia Op = "batch_media"
	// OpDetectPDF is a synchronous detection (POST /watermarks/documents/detect, with an Idempotency-Key) of
	// the PDF marked at set-up: it must find the mark. Charged the detect price.
	OpDetectPDF Op = "detect_pdf"
	// OpDetectVideo is an asynchronous detection (POST /watermarks/videos/detect/async: video detection always
	// runs as a job, with ffmpeg) of the clip marked at set-up, followed to its end; its result (JSON) must
	// find the mark. Charged the detect price.
	OpDetectVideo Op = "detect_video"
	// OpUploadVideo is OpUploadEmbed for embed_video's clip: a signed upload of kind video, then an
	// asynchronous embed naming its upload_id (/watermarks/videos/async), the result checked as embed_video's.
	OpUploadVideo Op = "upload_video"
	// OpBatchMediaCancel is OpBatchMedia cancelled right after its start, checked as OpBatchCancel: a video
	// item may be running (ffmpeg) when the cancel arrives.
	OpBatchMediaCancel Op = "batch_media_cancel"
	// OpVideoStorage is embed_video naming the run's storage destination: the marked clip must end up stored
	// in that bucket (checked as embed_storage's results are).
	OpVideoStorage Op = "video_storage"
)

// AllOps lists the standard operations, in report order: every kind a full mix runs.
var AllOps = []Op{OpEmbed, OpEmbedAsync, OpDetect, OpStatus, OpUploadEmbed, OpBatch, OpBatchCancel, OpEmbedWebhook,
	OpEmbedStorage, OpEmbedGPU}

// ExtraOps are operations a run has only when its mix names them (a client's variant of a standard one).
// The document and video embeds are extra: the video needs ffmpeg where the harness runs.
var ExtraOps = []Op{OpDetectNoKey, OpEmbedPDF, OpEmbedVideo, OpBatchMedia, OpDetectPDF, OpDetectVideo, OpUploadVideo, OpBatchMediaCancel, OpVideoStorage}

// orderedOps is every operation, standard and extra, in report order (each extra after its kin).
var orderedOps = []Op{OpEmbed, OpEmbedAsync, OpDetect, OpDetectNoKey, OpStatus, OpUploadEmbed, OpBatch, OpBatchCancel,
	OpEmbedWebhook, OpEmbedStorage, OpEmbedGPU, OpEmbedPDF, OpEmbedVideo, OpBatchMedia, OpDetectPDF, OpDetectVideo, OpUploadVideo, OpBatchMediaCancel, OpVideoStorage}

// isBatch says whether the operation is a batch, which books its items' successes and keeps its own replay.
func (o Op) isBatch() bool {
	return o == OpBatch || o == OpBatchCancel || o == OpBatchMedia || o == OpBatchMediaCancel
}

// Charged says whether the operation costs credits when it succeeds.
func (o Op) Charged() bool { return o != OpStatus }

// Mix is the relative weight of each operation.
type Mix map[Op]int

// DefaultMix is the mix of a run that names none: mostly status reads, as for a service whose clients poll,
// and every charged kind.
const DefaultMix = "embed=2,embed_async=2,detect=2,status=10,upload_embed=1"

// ParseMix reads "embed=2,status=10" (an operation without a weight weighs 1).
func ParseMix(s string) (Mix, error) {
	m := Mix{}
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		name, w, hasW := strings.Cut(f, "=")
		op := Op(strings.TrimSpace(name))
		known := false
		for _, o := range orderedOps {
			known = known || o == op
		}
		if !known {
			return nil, fmt.Errorf("unknown operation %q (want embed, embed_async, detect, detect_nokey, status, upload_embed, batch, batch_cancel, embed_webhook, embed_storage, embed_gpu, embed_pdf, embed_video, batch_media, detect_pdf, detect_video, upload_video, batch_media_cancel, video_storage)", op)
		}
		n := 1
		if hasW {
			var err error
			if n, err = strconv.Atoi(strings.TrimSpace(w)); err != nil || n < 0 {
				return nil, fmt.Errorf("weight of %s: %q is not a non-negative integer", op, w)
			}
		}
		m[op] += n
	}
	total := 0
	for _, n := range m {
		total += n
	}
	if total == 0 {
		return nil, fmt.Errorf("mix %q has no operation with a weight", s)
	}
	return m, nil
}

// String writes the mix in ParseMix's form, in report order.
func (m Mix) String() string {
	var parts []string
	for _, o := range orderedOps {
		if m[o] > 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", o, m[o]))
		}
	}
	return strings.Join(parts, ",")
}

// pick maps a uniform number in [0, total) to an operation.
func (m Mix) pick(u int) Op {
	for _, o := range orderedOps {
		if u < m[o] {
			return o
		}
		u -= m[o]
	}
	return OpStatus
}

func (m Mix) total() int {
	t := 0
	for _, n := range m {
		t += n
	}
	return t
}

// receipt is the part of a job receipt the harness reads.
type receipt struct {
	RequestID   string `json:"request_id"`
	Status      string `json:"status"`
	ErrorCode   string `json:"error_code"`
	Attempts    int    `json:"attempts"`
	Accelerator string `json:"accelerator"`
}

func terminal(status string) bool { return status == "succeeded" || status == "failed" }

// outcome is one finished operation.
type outcome struct {
	op        Op
	ok        bool
	failure   string // status and problem code, "transport: ...", or "gave up: ..."
	sample    string
	requestID string
	batchID   string         // a batch operation's batch
	items     []string       // a batch's items' request ids
	retries   map[string]int // retried answers by failure key
	start     time.Time
	end       time.Time
	latency   time.Duration
}

// attempt is an operation in progress: the shared pieces and the retry policy.
type attempt struct {
	r       *runner
	op      Op
	idem    string
	out     outcome
	giveUp  time.Time
	attempt int
	// charged is the last charged request sent (path and body), for a replay of its Idempotency-Key.
	charged *replay
	// batchID is the batch a batch operation created.
	batchID string
	// result is the marked file an embed_pdf or embed_video downloaded.
	result []byte
}

// replay is a charged request whose outcome the client did not learn within its retry budget.
type replay struct {
	op   Op
	idem string
	path string
	body *bodyParts
}

// retryable says whether a failure may be retried on another node: no answer, an overloaded or unavailable
// node or store (429, 5xx). Every other answer is final.
func retryable(status int) bool { return status == 429 || status >= 500 }

// retryablePut says whether a PUT to a signed URL may be tried again: retryable, or 409 upload_in_use (an
// earlier PUT of the same file, cut off by a failure, holds the upload until its lease lapses; the answer
// says to wait for it).
func retryablePut(put *response) bool {
	return retryable(put.status) || put.status == 409 && put.problemCode() == "upload_in_use"
}

// next returns the node for the next try, round-robin over the targets from a per-operation start.
func (a *attempt) next() string {
	t := a.r.cfg.Targets[(a.r.rr.Add(1)-1)%uint64(len(a.r.cfg.Targets))]
	a.attempt++
	return t
}

// countPoll counts a repeated read under key among the retried answers, without the pause or budget check.
func (a *attempt) countPoll(key string) {
	if a.out.retries == nil {
		a.out.retries = map[string]int{}
	}
	a.out.retries[key]++
}

// again records a retryable failure and says whether to try again (after a short pause, so that a dead node
// does not turn the operation into a busy loop).

func (a *attempt) again(ctx context.Context, key string) bool {
	if a.out.retries == nil {
		a.out.retries = map[string]int{}
	}
	a.out.retries[key]++
	if ctx.Err() != nil || time.Now().After(a.giveUp) {
		a.out.failure = "gave up: " + key
		return false
	}
	pause := time.Duration(min(a.attempt, 10)) * 20 * time.Millisecond
	select {
	case <-ctx.Done():
		a.out.failure = "gave up: " + key
		return false
	case <-time.After(pause):
		return true
	}
}

// send tries a request on node after node until an answer that is not retryable, the retry budget or ctx ends.
func (a *attempt) send(ctx context.Context, method, path, ctype string, body []byte, keepBody bool) (*response, bool) {
	var hdr map[string]string
	// Charged requests carry the key: embeds, detections, batch creation. A batch's start and reads need none
	// (a repeated start answers 200); a batch operation keeps its own replay (the whole batch, resumed).
	if a.idem != "" && method == "POST" && strings.HasPrefix(path, "/watermarks/") && !strings.HasPrefix(path, "/watermarks/batches/") {
		hdr = map[string]string{"Idempotency-Key": a.idem}
		if !a.op.isBatch() {
			a.charged = &replay{op: a.op, idem: a.idem, path: path, body: &bodyParts{ContentType: ctype, Data: body}}
		}
	}
	for {
		res, err := a.r.http.do(method, a.next()+path, a.r.cfg.Key, ctype, body, hdr, keepBody)
		if err != nil {
			if a.idem == "" && a.op.Charged() {
				// A charged request without a key whose answer was lost may have been charged, and cannot be
				// replayed: the credits check allows that many charges the client did not see.
				a.r.unkeyedLost.Add(1)
			}
			if a.again(ctx, transportKey(err)) {
				continue
			}
			a.out.sample = err.Error()
			return nil, false
		}
		if retryable(res.status) {
			if a.again(ctx, res.failureKey()) {
				continue
			}
			a.out.sample = snippet(res.body)
			return res, false
		}
		return res, true
	}
}

func (a *attempt) fail(res *response) {
	a.out.failure, a.out.sample = res.failureKey(), snippet(res.body)
}

// run performs the operation.
func (a *attempt) run(ctx context.Context) {
	switch a.op {
	case OpEmbed:
		a.embed(ctx, a.r.embedBody)
	case OpEmbedAsync:
		a.submitAsync(ctx, "/watermarks/images/async")
	case OpEmbedGPU:
		a.submitAsync(ctx, "/watermarks/images/async?accelerator=gpu")
	case OpEmbedPDF, OpEmbedVideo:
		path, body, _, _, _ := a.r.mediaRoute(a.op)
		a.embedMedia(ctx, body, path)
	case OpVideoStorage:
		path, body, _, _, _ := a.r.mediaRoute(a.op)
		a.embedMedia(ctx, body, path+"?storage_destination_id="+url.QueryEscape(a.r.destID))
		if a.out.requestID != "" {
			a.r.storageJob(a.out.requestID)
		}
	case OpUploadVideo:
		if id, ok := a.upload(ctx, "video", "clip.mp4", a.r.clipFile); ok {
			a.embedMedia(ctx, a.r.uploadBody(id), "/watermarks/videos/async")
		}
	case OpDetectPDF, OpDetectVideo:
		a.detectMedia(ctx)
	case OpDetect, OpDetectNoKey:
		res, ok := a.send(ctx, "POST", "/watermarks/images/detect", a.r.detectBody.ContentType, a.r.detectBody.Data, true)
		if !ok {
			return
		}
		switch {
		case res.status == 200 && bytes.Contains(res.body, []byte(`"watermarked"`)):
			a.out.ok, a.out.requestID = true, res.requestID
		case res.status == 202:
			a.accepted(ctx, res)
		default:
			a.fail(res)
		}
	case OpStatus:
		id := a.r.jobs.sample(a.r.seq.Load())
		res, ok := a.send(ctx, "GET", "/watermarks/jobs/"+url.PathEscape(id), "", nil, true)
		if !ok {
			return
		}
		if res.status == 200 && bytes.Contains(res.body, []byte(`"status"`)) {
			a.out.ok = true
		} else {
			a.fail(res)
		}
	case OpUploadEmbed:
		a.uploadEmbed(ctx)
	case OpBatch, OpBatchMedia:
		a.batch(ctx)
	case OpBatchCancel, OpBatchMediaCancel:
		a.batchCancel(ctx)
	case OpEmbedStorage:
		if a.submitAsync(ctx, "/watermarks/images/async?storage_destination_id="+url.QueryEscape(a.r.destID)) &&
			a.out.requestID != "" {
			a.r.storageJob(a.out.requestID)
		}
	case OpEmbedWebhook:
		if a.submitAsync(ctx, "/watermarks/images/async?webhook_id="+url.QueryEscape(a.r.webhooks.id)) &&
			a.out.requestID != "" {
			var ended time.Time // zero: the client did not see the job end (the final check reads it)
			if a.out.ok || strings.HasPrefix(a.out.failure, "job failed") {
				ended = time.Now()
			}
			a.r.webhookJob(a.out.requestID, ended)
		}
	}
}

// embed posts a synchronous embed and follows a receipt to the end.
func (a *attempt) embed(ctx context.Context, body *bodyParts) {
	res, ok := a.send(ctx, "POST", "/watermarks/images", body.ContentType, body.Data, false)
	if !ok {
		return
	}
	switch {
	case res.status == 200 && strings.HasPrefix(res.contentType, "image/png"):
		a.out.ok, a.out.requestID = true, res.requestID
	case res.status == 202:
		a.accepted(ctx, res)
	default:
		a.fail(res)
	}
}

// uploadEmbed creates a signed upload, sends the file to it and embeds by upload_id. A retry after a lost
// answer creates a new upload (uploads cost nothing); the embed keeps its Idempotency-Key.
func (a *attempt) uploadEmbed(ctx context.Context) {
	// ImageName may be the --image path; an upload's filename is a name (a path is refused with 422).
	if id, ok := a.upload(ctx, "image", filepath.Base(a.r.cfg.ImageName), a.r.cfg.Image); ok {
		a.embed(ctx, a.r.uploadBody(id))
	}
}

// upload creates a signed upload of kind for data (POST /uploads) and PUTs the file to its URL, starting over
// with a new upload when the URL's node is gone. It returns the upload id, or false with the failure set.
func (a *attempt) upload(ctx context.Context, kind, filename string, data []byte) (string, bool) {
	req, _ := json.Marshal(map[string]any{"kind": kind, "filename": filename, "size": len(data)})
	for {
		res, ok := a.send(ctx, "POST", "/uploads", "application/json", req, true)
		if !ok {
			return "", false
		}
		if res.status != 201 {
			a.fail(res)
			return "", false
		}
		var up struct {
			UploadID string `json:"upload_id"`
			Upload   struct {
				Method string `json:"method"`
				URL    string `json:"url"`
			} `json:"upload"`
		}
		if err := json.Unmarshal(res.body, &up); err != nil || up.UploadID == "" || up.Upload.URL == "" {
			a.out.failure, a.out.sample = "201 without upload_id or url", snippet(res.body)
			return "", false
		}
		put, err := a.r.http.do(up.Upload.Method, up.Upload.URL, "", "application/octet-stream", data, nil, false)
		if err != nil || retryablePut(put) {
			// The signed URL names one node's upload listener: when that node is gone, start over elsewhere.
			key := putKey(put, err)
			if a.again(ctx, key) {
				continue
			}
			return "", false
		}
		if put.status/100 != 2 {
			a.out.failure, a.out.sample = "PUT "+put.failureKey(), snippet(put.body)
			return "", false
		}
		return up.UploadID, true
	}
}

// submitAsync sends the embed body to an asynchronous route (path, with its query) and books the job when it is
// accepted (202); it reports whether it was.
func (a *attempt) submitAsync(ctx context.Context, path string) bool {
	return a.submitAsyncBody(ctx, path, a.r.embedBody)
}

// submitAsyncBody is submitAsync with another file than the run's image.
func (a *attempt) submitAsyncBody(ctx context.Context, path string, body *bodyParts) bool {
	res, ok := a.send(ctx, "POST", path, body.ContentType, body.Data, true)
	if !ok {
		return false
	}
	if res.status != 202 {
		a.fail(res)
		return false
	}
	a.accepted(ctx, res)
	return true
}

// accepted follows a job receipt: GET the job until it ends, on any node.
func (a *attempt) accepted(ctx context.Context, res *response) {
	var rc receipt
	if err := json.Unmarshal(res.body, &rc); err != nil || rc.RequestID == "" {
		a.out.failure, a.out.sample = "202 without request_id", snippet(res.body)
		return
	}
	a.out.requestID = rc.RequestID
	a.r.jobs.accepted(rc.RequestID, a.op, time.Now())
	for !terminal(rc.Status) {
		select {
		case <-ctx.Done():
			a.out.failure = "gave up: job not finished"
			return
		case <-time.After(a.r.cfg.PollInterval):
		}
		if time.Now().After(a.giveUp) {
			a.out.failure = "gave up: job " + rc.Status
			return
		}
		res, ok := a.send(ctx, "GET", "/watermarks/jobs/"+url.PathEscape(rc.RequestID), "", nil, true)
		if !ok {
			return
		}
		if res.status != 200 {
			// A job the service accepted must stay known; a 404 here is a lost job, retried until the
			// budget ends and then counted by the final check.
			if a.again(ctx, "poll "+res.failureKey()) {
				continue
			}
			return
		}
		if err := json.Unmarshal(res.body, &rc); err != nil {
			a.out.failure, a.out.sample = "200 receipt not JSON", snippet(res.body)
			return
		}
	}
	a.r.jobs.ended(rc.RequestID, rc.Status, time.Now())
	if a.op == OpEmbedGPU {
		a.r.jobs.ranOn(rc.RequestID, rc.Accelerator)
	}
	if rc.Status == "succeeded" {
		a.out.ok = true
	} else {
		a.out.failure = "job failed " + rc.ErrorCode
	}
}

// bodyParts is a prepared multipart body.
type bodyParts struct {
	ContentType string
	Data        []byte
}

// uploadBody is the embed form naming an upload.
func (r *runner) uploadBody(uploadID string) *bodyParts {
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	_ = mw.WriteField("data", r.cfg.Data) // writes to a bytes.Buffer cannot fail
	_ = mw.WriteField("upload_id", uploadID)
	_ = mw.Close()
	return &bodyParts{ContentType: mw.FormDataContentType(), Data: buf.Bytes()}
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
