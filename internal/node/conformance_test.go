package node_test

import (
	"bytes"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"
	"time"
)

// Tests of the deviations from the spec that a black-box audit found (issue 10, item 7), each through the
// HTTP API of a real node. They use the development organization (business plan: GPU, 1000 requests per
// minute), since the manual clock never refills a trial plan's 20 requests per minute.

// postFields sends a multipart embed or detect request with a file (when not nil) and the given form
// fields, in order.
func postFields(t *testing.T, url, key, idem string, file []byte, fields ...string) response {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for i := 0; i+1 < len(fields); i += 2 {
		if err := mw.WriteField(fields[i], fields[i+1]); err != nil {
			t.Fatal(err)
		}
	}
	if file != nil {
		fw, err := mw.CreateFormFile("file", "photo.png")
		if err != nil {
			t.Fatal(err)
		}
		fw.Write(file)
	}
	mw.Close()
	return sendRaw(t, url, key, idem, mw.FormDataContentType(), buf.Bytes())
}

func sendRaw(t *testing.T, url, key, idem, contentType string, body []byte) response {
	t.Helper()
	req, _ := http.NewRequest("POST", url, bytes.NewReader(body))
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("X-API-Key", key)
	if idem != "" {
		req.Header.Set("Idempotency-Key", idem)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return response{status: res.StatusCode, header: res.Header, body: b}
}

// failureBody decodes a failed job's problem body, whose status member is the string "failed".
func failureBody(t *testing.T, r response) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("failure body %s: %v", r.body, err)
	}
	return m
}

// (a) A synchronous detection sent with an Idempotency-Key is recorded: the key replays the same answer and
// bills once, and the same key with another file or on another operation is 409.
func TestSyncDetectIdempotencyKey(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	marked := post(t, f.base+"/watermarks/images", f.dev.Secret, "", photo(t, 640, 480, 21), `{"order":1}`)
	if marked.status != 200 {
		t.Fatalf("embed: %d %s", marked.status, marked.body)
	}
	before, _ := balance(t, f, f.dev.OrgID)
	first := post(t, f.base+"/watermarks/images/detect", f.dev.Secret, "detect-once-0001", marked.body, "")
	var det detection
	if first.status != 200 || json.Unmarshal(first.body, &det) != nil || !det.Watermarked ||
		det.WatermarkID == nil || *det.WatermarkID != marked.header.Get("X-Watermark-ID") {
		t.Fatalf("keyed sync detect: %d %s", first.status, first.body)
	}
	if first.header.Get("X-Service-Accelerator") != "cpu" || !strings.HasPrefix(first.header.Get("Content-Type"), "application/json") {
		t.Fatalf("keyed sync detect headers %v", first.header)
	}
	replay := post(t, f.base+"/watermarks/images/detect", f.dev.Secret, "detect-once-0001", marked.body, "")
	if replay.status != 200 || !bytes.Equal(replay.body, first.body) {
		t.Fatalf("replay: %d %s, want the first answer %s", replay.status, replay.body, first.body)
	}
	if after, held := balance(t, f, f.dev.OrgID); before-after != 1 || held != 0 {
		t.Fatalf("detect and its replay charged %d (held %d), want 1", before-after, held)
	}
	other := post(t, f.base+"/watermarks/images/detect", f.dev.Secret, "detect-once-0001", photo(t, 640, 480, 22), "")
	wantProblem(t, "same key, other file", other, 409, "idempotency_conflict")
	embed := post(t, f.base+"/watermarks/images", f.dev.Secret, "detect-once-0001", marked.body, `{"order":1}`)
	wantProblem(t, "same key on embed", embed, 409, "idempotency_conflict")
	if after, _ := balance(t, f, f.dev.OrgID); before-after != 1 {
		t.Fatalf("conflicts charged: %d in all, want 1", before-after)
	}
	// The async form of the same request names the same recorded detection.
	async := post(t, f.base+"/watermarks/images/detect/async", f.dev.Secret, "detect-once-0001", marked.body, "")
	rc := decodeReceipt(t, async)
	if async.status != 202 || rc.Status != "succeeded" || rc.Operation != "detect" || rc.Credits != 1 {
		t.Fatalf("async replay: %d %s", async.status, async.body)
	}
	if res := call(t, "GET", f.base+rc.ResultURL, f.dev.Secret, nil); res.status != 200 || !bytes.Equal(res.body, first.body) {
		t.Fatalf("result of the recorded detection: %d %s", res.status, res.body)
	}

	// A key first used on an embed cannot buy a free detection.
	before, _ = balance(t, f, f.dev.OrgID)
	if r := post(t, f.base+"/watermarks/images", f.dev.Secret, "embed-first-0002", photo(t, 512, 512, 23), `{"x":1}`); r.status != 200 {
		t.Fatalf("embed: %d %s", r.status, r.body)
	}
	again := post(t, f.base+"/watermarks/images/detect", f.dev.Secret, "embed-first-0002", marked.body, "")
	wantProblem(t, "detect with an embed's key", again, 409, "idempotency_conflict")
	if after, held := balance(t, f, f.dev.OrgID); before-after != 1 || held != 0 {
		t.Fatalf("embed + conflicting detect charged %d (held %d), want 1", before-after, held)
	}
}

// (b) An async replay of a request whose output asset was deleted, or whose result expired, is 410, like
// the result URL; not 202 "succeeded" pointing at a result that is gone.
func TestAsyncReplayAfterResultGone(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	img := photo(t, 512, 384, 24)
	r := post(t, f.base+"/watermarks/images/async", f.dev.Secret, "deleted-asset-01", img, `{"a":1}`)
	rc := decodeReceipt(t, r)
	if res := waitResult(t, f, f.dev.Secret, rc.ResultURL); res.status != 200 {
		t.Fatalf("result: %d", res.status)
	}
	st := decodeReceipt(t, call(t, "GET", f.base+rc.StatusURL, f.dev.Secret, nil))
	if st.AssetID == nil {
		t.Fatalf("no asset id on %+v", st)
	}
	if d := call(t, "DELETE", f.base+"/assets/"+*st.AssetID, f.dev.Secret, nil); d.status != 204 {
		t.Fatalf("delete asset: %d %s", d.status, d.body)
	}
	for _, path := range []string{"/watermarks/images/async", "/watermarks/images"} {
		again := post(t, f.base+path, f.dev.Secret, "deleted-asset-01", img, `{"a":1}`)
		wantProblem(t, "replay on "+path+" after the asset was deleted", again, 410, "result_gone")
		// The 410 is about the job: it names the job's request id, as the failure of a replay does.
		if p := decodeProblem(t, again); p.RequestID != rc.RequestID {
			t.Fatalf("replay on %s after the asset was deleted names %s, want the job's %s", path, p.RequestID, rc.RequestID)
		}
	}

	r = post(t, f.base+"/watermarks/images/async", f.dev.Secret, "expired-result-1", img, `{"a":2}`)
	rc = decodeReceipt(t, r)
	waitResult(t, f, f.dev.Secret, rc.ResultURL)
	f.clk.Advance(24 * time.Hour)
	again := post(t, f.base+"/watermarks/images/async", f.dev.Secret, "expired-result-1", img, `{"a":2}`)
	wantProblem(t, "async replay after 24 hours", again, 410, "result_gone")
	if p := decodeProblem(t, again); p.RequestID != rc.RequestID {
		t.Fatalf("async replay after 24 hours names %s, want the job's %s", p.RequestID, rc.RequestID)
	}
}

// (c) An async replay of a request that failed for good answers the failure's status and problem body,
// exactly as the sync replay does.
func TestAsyncReplayOfFailedRequest(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	img := photo(t, 600, 400, 25)
	broken := append([]byte(nil), img[:len(img)/3]...) // the header survives; the scan data is cut
	first := post(t, f.base+"/watermarks/images", f.dev.Secret, "broken-async-01", broken, `{"x":1}`)
	if first.status != 422 || failureBody(t, first)["status"] != "failed" {
		t.Fatalf("broken image: %d %s", first.status, first.body)
	}
	async := post(t, f.base+"/watermarks/images/async", f.dev.Secret, "broken-async-01", broken, `{"x":1}`)
	if async.status != 422 || !bytes.Equal(async.body, first.body) {
		t.Fatalf("async replay of a failure: %d %s, want 422 %s", async.status, async.body, first.body)
	}
	if ct := async.header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("async replay content type %q", ct)
	}
}

// (e) The idempotency fingerprint includes the accelerator: the same key with accelerator=gpu is 409
// before strict GPU mode's refusal (503), whether the option comes in the query or in the form.
func TestGPUReplayConflictBeforeUnavailable(t *testing.T) {
	t.Parallel()
	f := newFixture(t, inMemory(t), gpuStrict)
	secret := f.dev.Secret // the development organization's business plan includes GPU processing
	img := photo(t, 512, 512, 26)
	if r := post(t, f.base+"/watermarks/images/async", secret, "gpu-conflict-01", img, `{"a":1}`); r.status != 202 {
		t.Fatalf("cpu request: %d %s", r.status, r.body)
	}
	wantProblem(t, "same key, gpu in the query",
		post(t, f.base+"/watermarks/images/async?accelerator=gpu", secret, "gpu-conflict-01", img, `{"a":1}`), 409, "idempotency_conflict")
	wantProblem(t, "same key, gpu in the form",
		postFields(t, f.base+"/watermarks/images/async", secret, "gpu-conflict-01", img, "data", `{"a":1}`, "accelerator", "gpu"),
		409, "idempotency_conflict")
	fresh := post(t, f.base+"/watermarks/images/async?accelerator=gpu", secret, "gpu-fresh-key-01", img, `{"a":1}`)
	wantProblem(t, "new key, gpu", fresh, 503, "gpu_unavailable")
	if fresh.header.Get("Retry-After") == "" {
		t.Fatalf("503 without Retry-After")
	}
	wantProblem(t, "gpu in the form, no key",
		postFields(t, f.base+"/watermarks/images/async", secret, "", img, "data", `{"a":1}`, "accelerator", "gpu"), 503, "gpu_unavailable")
}

// (f) Detection receipts name the spec's /watermarks/jobs/{id} in status_url, result_url and Location; the
// detection-jobs path keeps answering.
func TestDetectionReceiptURLs(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	r := post(t, f.base+"/watermarks/images/detect/async", f.dev.Secret, "", photo(t, 512, 512, 27), "")
	rc := decodeReceipt(t, r)
	if r.status != 202 || rc.StatusURL != "/watermarks/jobs/"+rc.RequestID || rc.ResultURL != rc.StatusURL+"/result" ||
		r.header.Get("Location") != rc.StatusURL {
		t.Fatalf("detection receipt %d %s Location %q", r.status, r.body, r.header.Get("Location"))
	}
	res := waitResult(t, f, f.dev.Secret, rc.ResultURL)
	if res.status != 200 {
		t.Fatalf("result: %d %s", res.status, res.body)
	}
	legacy := "/watermarks/detection-jobs/" + rc.RequestID
	if st := call(t, "GET", f.base+legacy, f.dev.Secret, nil); st.status != 200 || decodeReceipt(t, st).StatusURL != rc.StatusURL {
		t.Fatalf("detection-jobs status: %d %s", st.status, st.body)
	}
	if old := call(t, "GET", f.base+legacy+"/result", f.dev.Secret, nil); old.status != 200 || !bytes.Equal(old.body, res.body) {
		t.Fatalf("detection-jobs result: %d %s", old.status, old.body)
	}
}

// (g) The same key with other data on the upload that key's request consumed is another use of a used
// upload: 409 upload_consumed, on the sync and the async endpoint; the unchanged replay gets its job.
func TestUploadSameKeyOtherData(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	u := uploaded(t, f, f.dev.Secret, "image", "big.png", photo(t, 700, 500, 28))
	first := postUpload(t, f.base+"/watermarks/images/async", f.dev.Secret, "upload-key-0001", u.UploadID, `{"a":1}`)
	rc := decodeReceipt(t, first)
	if first.status != 202 {
		t.Fatalf("first use: %d %s", first.status, first.body)
	}
	for _, path := range []string{"/watermarks/images/async", "/watermarks/images"} {
		r := postUpload(t, f.base+path, f.dev.Secret, "upload-key-0001", u.UploadID, `{"a":2}`)
		wantProblem(t, "same key, other data on "+path, r, 409, "upload_consumed")
	}
	same := postUpload(t, f.base+"/watermarks/images/async", f.dev.Secret, "upload-key-0001", u.UploadID, `{"a":1}`)
	if same.status != 202 || decodeReceipt(t, same).RequestID != rc.RequestID {
		t.Fatalf("unchanged replay: %d %s", same.status, same.body)
	}
	if got := getUpload(t, f, f.dev.Secret, u.UploadID); got.Status != "consumed" || got.RequestID != rc.RequestID {
		t.Fatalf("upload after the refused reuse: %+v", got)
	}
}

// (h) Problem details are readable sentences: no blob keys, file paths or Go error chains; the webhook and
// storage options are honoured as form fields, never ignored.
func TestProblemDetailsAndFormOptions(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	img := photo(t, 512, 512, 29)
	leaks := func(what string, r response) {
		t.Helper()
		for _, bad := range []string{"inputs/", "outputs/", "uploads/", f.dataDir, "imageio", "fsblobs", "codec:", "multipart:", "EOF"} {
			if bytes.Contains(r.body, []byte(bad)) {
				t.Fatalf("%s: the answer leaks %q: %d %s", what, bad, r.status, r.body)
			}
		}
	}

	// A body cut inside the file part (Content-Length matches what is sent).
	ct, body := form(t, img, "a.png", `{"a":1}`)
	cut := sendRaw(t, f.base+"/watermarks/images", f.dev.Secret, "", ct, body[:len(body)/2])
	wantProblem(t, "truncated multipart", cut, 400, "bad_request")
	leaks("truncated multipart", cut)

	notImage := post(t, f.base+"/watermarks/images", f.dev.Secret, "", []byte("this is not an image at all"), `{"a":1}`)
	wantProblem(t, "not an image", notImage, 422, "invalid_image")
	leaks("not an image", notImage)

	broken := append([]byte(nil), img[:len(img)/3]...)
	failed := post(t, f.base+"/watermarks/images", f.dev.Secret, "", broken, `{"a":1}`)
	if failed.status != 422 || failureBody(t, failed)["detail"] != "the image is corrupt or truncated" {
		t.Fatalf("broken image: %d %s", failed.status, failed.body)
	}
	leaks("broken image", failed)

	dup := post(t, f.base+"/watermarks/images", f.dev.Secret, "", img, `{"a":1,"a":2}`)
	wantProblem(t, "duplicate member", dup, 422, "invalid_data")
	leaks("duplicate member", dup)

	// upload_kind_mismatch says what the upload is for and what the endpoint needs.
	d := uploaded(t, f, f.dev.Secret, "detect", "scan.png", img)
	mismatch := postUpload(t, f.base+"/watermarks/images", f.dev.Secret, "", d.UploadID, `{"a":1}`)
	wantProblem(t, "detect upload on embed", mismatch, 422, "upload_kind_mismatch")
	if p := decodeProblem(t, mismatch); p.Detail != "upload "+d.UploadID+" was created for detecting in an image; this endpoint needs an image upload" {
		t.Fatalf("kind mismatch detail %q", p.Detail)
	}

	// Options sent as form fields are honoured like query parameters.
	wh := "wh_" + strings.Repeat("ab", 16)
	wantProblem(t, "webhook_id form field",
		postFields(t, f.base+"/watermarks/images/async", f.dev.Secret, "", img, "data", `{"a":1}`, "webhook_id", wh), 404, "webhook_not_found")
	wantProblem(t, "webhook_id query",
		post(t, f.base+"/watermarks/images/async?webhook_id="+wh, f.dev.Secret, "", img, `{"a":1}`), 404, "webhook_not_found")
	wantProblem(t, "storage_destination_id form field",
		postFields(t, f.base+"/watermarks/images/async", f.dev.Secret, "", img, "data", `{"a":1}`, "storage_destination_id", "dst_x"),
		422, "storage_destination_unusable")
	wantProblem(t, "storage_key form field alone",
		postFields(t, f.base+"/watermarks/images", f.dev.Secret, "", img, "data", `{"a":1}`, "storage_key", "out/a.png"), 422, "invalid_request")
	wantProblem(t, "storage on detection",
		postFields(t, f.base+"/watermarks/images/detect", f.dev.Secret, "", img, "storage_destination_id", "dst_x"), 422, "invalid_request")
	wantProblem(t, "bad accelerator form field",
		postFields(t, f.base+"/watermarks/images/detect", f.dev.Secret, "", img, "accelerator", "tpu"), 422, "invalid_accelerator")
	wantProblem(t, "query and form disagree",
		postFields(t, f.base+"/watermarks/images/detect?accelerator=cpu", f.dev.Secret, "", img, "accelerator", "gpu"), 422, "invalid_request")
	// The same value in both places is one option, not a conflict.
	if r := postFields(t, f.base+"/watermarks/images/detect?accelerator=cpu", f.dev.Secret, "", img, "accelerator", "cpu"); r.status != 200 {
		t.Fatalf("same accelerator twice: %d %s", r.status, r.body)
	}
}
