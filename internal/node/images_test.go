package node_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/jpeg"
	"image/png"
	"io/fs"
	"math"
	"math/rand/v2"
	"mime/multipart"
	"net"
	"net/http"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"filigrane/actors"
	"filigrane/internal/node"
)

// photo returns a JPEG of w x h with photo-like content: smooth gradients, blobs and fine noise.
func photo(t *testing.T, w, h int, seed uint64) []byte {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 99))
	// Opaque RGBA, which image/jpeg converts row by row (any other type, NRGBA included, goes through At and
	// RGBA per pixel: about a third of this fixture's CPU; the pixels and the JPEG bytes are the same).
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	type blob struct{ x, y, rad, cr, cg, cb float64 }
	var blobs []blob
	for i := 0; i < 12; i++ {
		blobs = append(blobs, blob{r.Float64() * float64(w), r.Float64() * float64(h), 40 + r.Float64()*200, r.Float64() * 120, r.Float64() * 120, r.Float64() * 120})
	}
	// A blob's exp(-d²) is exp(-dx²)·exp(-dy²): one table of exp per blob and column, one exp per blob and
	// row, instead of an exp and a hypot per blob and pixel (which made this fixture half of the package's CPU).
	ex := make([][]float64, len(blobs))
	for i, b := range blobs {
		ex[i] = make([]float64, w)
		for x := range ex[i] {
			dx := (float64(x) - b.x) / b.rad
			ex[i][x] = math.Exp(-dx * dx)
		}
	}
	ey := make([]float64, len(blobs))
	for y := 0; y < h; y++ {
		for i, b := range blobs {
			dy := (float64(y) - b.y) / b.rad
			ey[i] = math.Exp(-dy * dy)
		}
		row := img.Pix[y*img.Stride : y*img.Stride+4*w]
		for x := 0; x < w; x++ {
			v := [3]float64{60 + 80*float64(x)/float64(w), 70 + 60*float64(y)/float64(h), 90}
			for i, b := range blobs {
				f := ex[i][x] * ey[i]
				v[0] += f * b.cr
				v[1] += f * b.cg
				v[2] += f * b.cb
			}
			n := r.NormFloat64() * 6
			row[4*x], row[4*x+1], row[4*x+2], row[4*x+3] = clamp(v[0]+n), clamp(v[1]+n), clamp(v[2]+n), 255
		}
	}
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, img, &jpeg.Options{Quality: 92}); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// clamp is v in [0, 255], truncated. Comparisons rather than math.Max and math.Min, whose NaN and signed-zero
// cases made them most of photo's per-pixel cost; v is never NaN here, so the bytes are the same.
func clamp(v float64) uint8 {
	switch {
	case v <= 0:
		return 0
	case v >= 255:
		return 255
	}
	return uint8(v)
}

// form builds a multipart body with a file and optional data.
func form(t *testing.T, file []byte, filename, data string) (string, []byte) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	if data != "" {
		if err := mw.WriteField("data", data); err != nil {
			t.Fatal(err)
		}
	}
	if file != nil {
		fw, err := mw.CreateFormFile("file", filename)
		if err != nil {
			t.Fatal(err)
		}
		fw.Write(file)
	}
	mw.Close()
	return mw.FormDataContentType(), buf.Bytes()
}

func post(t *testing.T, url, key, idem string, file []byte, data string) response {
	t.Helper()
	ct, body := form(t, file, "holiday photo.jpg", data)
	req, _ := http.NewRequest("POST", url, bytes.NewReader(body))
	req.Header.Set("Content-Type", ct)
	if key != "" {
		req.Header.Set("X-API-Key", key)
	}
	if idem != "" {
		req.Header.Set("Idempotency-Key", idem)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer res.Body.Close()
	var b bytes.Buffer
	b.ReadFrom(res.Body)
	return response{status: res.StatusCode, header: res.Header, body: b.Bytes()}
}

type receipt struct {
	RequestID            string   `json:"request_id"`
	Status               string   `json:"status"`
	Operation            string   `json:"operation"`
	Format               string   `json:"format"`
	Credits              int64    `json:"credits"`
	Attempts             int      `json:"attempts"`
	AssetID              *string  `json:"asset_id"`
	SourceAssetID        *string  `json:"source_asset_id"`
	StatusURL            string   `json:"status_url"`
	ResultURL            string   `json:"result_url"`
	ErrorCode            *string  `json:"error_code"`
	ResultExpiresAt      *string  `json:"result_expires_at"`
	AcceleratorRequested string   `json:"accelerator_requested"`
	Accelerator          *string  `json:"accelerator"`
	Node                 string   `json:"node"`
	AttemptNodes         []string `json:"attempt_nodes"`
	// raw is the receipt as the API sent it, for failure messages.
	raw []byte
}

func decodeReceipt(t *testing.T, r response) receipt {
	t.Helper()
	var rc receipt
	if err := json.Unmarshal(r.body, &rc); err != nil {
		t.Fatalf("receipt %s: %v", r.body, err)
	}
	rc.raw = r.body
	return rc
}

type detection struct {
	Watermarked bool     `json:"watermarked"`
	Confidence  float64  `json:"confidence"`
	WatermarkID *string  `json:"watermark_id"`
	Units       []any    `json:"units"`
	Extra       []string `json:"-"`
}

func balance(t *testing.T, f *fixture, org string) (int64, int64) {
	t.Helper()
	rep, err := actors.OrgClient{Caller: f.n.Cluster()}.Get(context.Background(), org)
	if err != nil || rep.Code != actors.ReplyOK {
		t.Fatalf("balance: %v %+v", err, rep)
	}
	return rep.Balance, rep.Held
}

// waitResult waits until the job behind resultURL has committed its outcome (the job actor answers an await
// once the outcome is settled), then reads the result once through the API. Waiting on the actor, not by
// polling the API, keeps the test off the plan's per-minute request limit.
func waitResult(t *testing.T, f *fixture, key, resultURL string) response {
	t.Helper()
	id := path.Base(path.Dir(resultURL)) // /watermarks/jobs/<id>/result or /watermarks/detection-jobs/<id>/result
	ak, err := actors.Keys{Store: f.n.Store(), Clock: f.clk}.Authenticate(context.Background(), key)
	if err != nil {
		t.Fatalf("key of %s: %v", resultURL, err)
	}
	// A bound for a job that never ends, not for a slow one: a 5 MP embed took over 60 s of wall time on a
	// machine running 17 times more work than it has cores (TestSDKDirectEmbedUpTo40MB).
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	for {
		rep, err := actors.JobClient{Caller: f.n.Cluster()}.Await(ctx, ak.OrgID, id)
		if err == nil && rep.Record != nil && rep.Record.Committed() {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("job %s still pending: %v %+v", resultURL, err, rep)
		}
	}
	return call(t, "GET", f.base+resultURL, key, nil)
}

func TestSyncEmbedThenDetect(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	img := photo(t, 1024, 768, 1)
	data := `{"customer": "c-42", "order": 7}`
	before, _ := balance(t, f, f.orgA)
	r := post(t, f.base+"/watermarks/images", f.keyA, "", img, data)
	if r.status != 200 {
		t.Fatalf("sync embed: %d %s", r.status, r.body)
	}
	wm := r.header.Get("X-Watermark-ID")
	// The id is the SHA-256 of the canonical data: key order and spacing do not matter.
	if len(wm) != 64 || r.header.Get("Content-Type") != "image/png" || r.header.Get("X-Service-Accelerator") != "cpu" {
		t.Fatalf("headers %v", r.header)
	}
	if !strings.HasPrefix(r.header.Get("X-Asset-ID"), "ast_") || !strings.HasPrefix(r.header.Get("X-Source-Asset-ID"), "ast_") {
		t.Fatalf("asset headers %v", r.header)
	}
	if cd := r.header.Get("Content-Disposition"); cd != `attachment; filename="holiday_photo-watermarked.png"` {
		t.Fatalf("Content-Disposition %q", cd)
	}
	if _, err := png.Decode(bytes.NewReader(r.body)); err != nil {
		t.Fatalf("output is not a PNG: %v", err)
	}
	after, held := balance(t, f, f.orgA)
	if before-after != 1 || held != 0 {
		t.Fatalf("embed charged %d (held %d), want 1", before-after, held)
	}
	same := post(t, f.base+"/watermarks/images", f.keyA, "", img, `{"order":7,"customer":"c-42"}`)
	if same.header.Get("X-Watermark-ID") != wm {
		t.Fatalf("semantically equal data gave another id")
	}

	d := post(t, f.base+"/watermarks/images/detect", f.keyA, "", r.body, "")
	if d.status != 200 {
		t.Fatalf("detect: %d %s", d.status, d.body)
	}
	var det detection
	if err := json.Unmarshal(d.body, &det); err != nil {
		t.Fatal(err)
	}
	if !det.Watermarked || det.WatermarkID == nil || *det.WatermarkID != wm || det.Confidence <= 0.5 || len(det.Units) != 1 {
		t.Fatalf("detection %s, want watermark %s", d.body, wm)
	}
	// The original, unmarked photo: no watermark, null id.
	d = post(t, f.base+"/watermarks/images/detect", f.keyA, "", img, "")
	if err := json.Unmarshal(d.body, &det); err != nil || d.status != 200 || det.Watermarked || det.WatermarkID != nil {
		t.Fatalf("unmarked detection: %d %s", d.status, d.body)
	}
}

func TestAsyncEmbedJobLifecycle(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	img := photo(t, 800, 600, 2)
	r := post(t, f.base+"/watermarks/images/async", f.keyA, "", img, `{"a":1}`)
	if r.status != 202 {
		t.Fatalf("async embed: %d %s", r.status, r.body)
	}
	rc := decodeReceipt(t, r)
	if r.header.Get("Location") != rc.StatusURL || rc.StatusURL != "/watermarks/jobs/"+rc.RequestID || rc.ResultURL != rc.StatusURL+"/result" {
		t.Fatalf("receipt urls %+v Location %q", rc, r.header.Get("Location"))
	}
	if rc.Operation != "embed" || rc.Format != "JPEG" || rc.AcceleratorRequested != "cpu" || rc.Credits != 1 {
		t.Fatalf("receipt %s", r.body)
	}
	if ra := r.header.Get("Retry-After"); ra != "6" { // trial plan
		t.Fatalf("Retry-After %q on a trial plan", ra)
	}
	res := waitResult(t, f, f.keyA, rc.ResultURL)
	if res.status != 200 || res.header.Get("X-Watermark-ID") == "" {
		t.Fatalf("result: %d %s", res.status, res.body)
	}
	st := call(t, "GET", f.base+rc.StatusURL, f.keyA, nil)
	done := decodeReceipt(t, st)
	if st.status != 200 || done.Status != "succeeded" || done.Attempts != 1 || done.AssetID == nil || done.Accelerator == nil || *done.Accelerator != "cpu" {
		t.Fatalf("status %d %s", st.status, st.body)
	}
	// The extension fields name the node that ran the attempt (the fixture's node is "test").
	if done.Node != "test" || len(done.AttemptNodes) != 1 || done.AttemptNodes[0] != "test" || rc.Node != "" {
		t.Fatalf("node fields: queued receipt %q, done %q %v", rc.Node, done.Node, done.AttemptNodes)
	}
	// The node's metrics count the attempt under its work class. The worker counts it once the job actor
	// has answered its report, which can be just after the result became visible to the client: the
	// metrics are read again until they show it (or a deadline passes).
	wantMetrics := []string{`filigrane_work_completed_total{class="cpu",node="test"} 1`,
		`filigrane_work_failed_total{class="cpu",node="test"} 0`, `filigrane_work_running{class="cpu",node="test"} 0`,
		`filigrane_work_queued{class="cpu",node="test"} 0`, `filigrane_work_seconds_count{class="cpu",node="test"} 1`,
		`filigrane_work_completed_total{class="cpu-long",node="test"} 0`,
		// The job waited in the queue once, however briefly.
		`filigrane_work_queue_wait_seconds_count{class="cpu",node="test"} 1`}
	var m response
	for deadline := time.Now().Add(10 * time.Second); ; {
		m = call(t, "GET", f.base+"/metrics", "", nil)
		missing := 0
		for _, want := range wantMetrics {
			if !strings.Contains(string(m.body), want+"\n") {
				missing++
				if time.Now().After(deadline) {
					t.Errorf("metrics lack %s", want)
				}
			}
		}
		if missing == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond) // poll interval of the bounded re-read above, not a synchronisation
	}
	// The job's records were written to the node's store (single-node mode: Pebble), and counted by kind.
	if !regexp.MustCompile(`filigrane_store_operations_total\{backend="pebble",op="compare_and_set",prefix="job",store="records"\} [1-9]`).Match(m.body) {
		t.Errorf("metrics count no write of a job record:\n%s", m.body)
	}
	// Another organization cannot see the job; a key without the embed scope cannot read it.
	if r := call(t, "GET", f.base+rc.StatusURL, f.keyB, nil); r.status != 404 {
		t.Fatalf("other organization reads job: %d", r.status)
	}
	// After 24 hours the result is gone.
	f.clk.Advance(24 * time.Hour)
	if r := call(t, "GET", f.base+rc.ResultURL, f.keyA, nil); r.status != 410 {
		t.Fatalf("expired result: %d %s", r.status, r.body)
	}
}

func TestIdempotentEmbed(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	img := photo(t, 640, 480, 3)
	before, _ := balance(t, f, f.orgA)
	first := post(t, f.base+"/watermarks/images", f.keyA, "order-7-attempt", img, `{"a":1}`)
	if first.status != 200 {
		t.Fatalf("first: %d %s", first.status, first.body)
	}
	replay := post(t, f.base+"/watermarks/images", f.keyA, "order-7-attempt", img, `{"a":1}`)
	if replay.status != 200 || !bytes.Equal(replay.body, first.body) || replay.header.Get("X-Asset-ID") != first.header.Get("X-Asset-ID") {
		t.Fatalf("replay differs: %d", replay.status)
	}
	// The async form of the same request names the same job.
	async := post(t, f.base+"/watermarks/images/async", f.keyA, "order-7-attempt", img, `{"a":1}`)
	if async.status != 202 || decodeReceipt(t, async).Status != "succeeded" {
		t.Fatalf("async replay: %d %s", async.status, async.body)
	}
	if after, _ := balance(t, f, f.orgA); before-after != 1 {
		t.Fatalf("replays charged %d credits, want 1", before-after)
	}
	conflict := post(t, f.base+"/watermarks/images", f.keyA, "order-7-attempt", img, `{"a":2}`)
	if p := decodeProblem(t, conflict); conflict.status != 409 || p.Code != "idempotency_conflict" {
		t.Fatalf("different data, same key: %d %+v", conflict.status, p)
	}
	bad := post(t, f.base+"/watermarks/images", f.keyA, "short", img, `{"a":1}`)
	if p := decodeProblem(t, bad); bad.status != 422 || p.Code != "invalid_idempotency_key" {
		t.Fatalf("short key: %d %+v", bad.status, p)
	}
}

func TestConcurrentDuplicatesRunOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	// The development organization is on the business plan: 1000 requests per minute fit 50 requests.
	secret, org := f.dev.Secret, f.dev.OrgID
	img := photo(t, 512, 512, 4)
	before, _ := balance(t, f, org)
	var wg sync.WaitGroup
	results := make([]response, 50)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = post(t, f.base+"/watermarks/images/async", secret, "same-key-for-all-50", img, `{"batch":"x"}`)
		}()
	}
	wg.Wait()
	ids := map[string]bool{}
	for i, r := range results {
		if r.status != 202 {
			t.Fatalf("request %d: %d %s", i, r.status, r.body)
		}
		ids[decodeReceipt(t, r).RequestID] = true
	}
	if len(ids) != 1 {
		t.Fatalf("50 duplicates made %d jobs", len(ids))
	}
	for id := range ids {
		waitResult(t, f, secret, "/watermarks/jobs/"+id+"/result")
	}
	if after, held := balance(t, f, org); before-after != 1 || held != 0 {
		t.Fatalf("50 duplicates charged %d (held %d), want 1", before-after, held)
	}
}

func TestImageRequestErrors(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	img := photo(t, 400, 300, 5)
	cases := []struct {
		name, url, key, data string
		file                 []byte
		status               int
		code                 string
	}{
		{"no file", "/watermarks/images", f.keyA, `{"a":1}`, nil, 422, "invalid_request"},
		{"no data", "/watermarks/images", f.keyA, "", img, 422, "invalid_data"},
		{"empty data", "/watermarks/images", f.keyA, `{}`, img, 422, "invalid_data"},
		{"array data", "/watermarks/images", f.keyA, `[1,2]`, img, 422, "invalid_data"},
		{"broken data", "/watermarks/images", f.keyA, `{"a":`, img, 422, "invalid_data"},
		{"huge data", "/watermarks/images", f.keyA, `{"a":"` + strings.Repeat("x", 9000) + `"}`, img, 422, "invalid_data"},
		{"not an image", "/watermarks/images", f.keyA, `{"a":1}`, []byte("hello, this is text"), 422, "invalid_image"},
		{"bad accelerator", "/watermarks/images?accelerator=tpu", f.keyA, `{"a":1}`, img, 422, "invalid_accelerator"},
		{"gpu without GPU plan", "/watermarks/images?accelerator=gpu", f.keyA, `{"a":1}`, img, 403, "plan_forbidden"},
		{"unknown webhook", "/watermarks/images/async?webhook_id=wh_00000000000000000000000000000000", f.keyA, `{"a":1}`, img, 404, "webhook_not_found"},
		{"storage key alone", "/watermarks/images?storage_key=x", f.keyA, `{"a":1}`, img, 422, "invalid_request"},
		{"detect scope only", "/watermarks/images", f.keyB, `{"a":1}`, img, 403, "insufficient_scope"},
		{"embed key detects", "/watermarks/images/detect", f.keyNoScopes, "", img, 403, "insufficient_scope"},
	}
	for _, c := range cases {
		r := post(t, f.base+c.url, c.key, "", c.file, c.data)
		if r.status != c.status {
			t.Fatalf("%s: status %d, want %d: %s", c.name, r.status, c.status, r.body)
		}
		if p := decodeProblem(t, r); p.Code != c.code {
			t.Fatalf("%s: code %q, want %q", c.name, p.Code, c.code)
		}
	}
	// Nothing was charged or kept for refused requests.
	if bal, held := balance(t, f, f.orgA); bal != 150 || held != 0 { // trial: 100 included + 50 granted
		t.Fatalf("refused requests moved credits: balance %d held %d", bal, held)
	}
	if n := countBlobs(t, f); n != 0 {
		t.Fatalf("refused requests left %d files", n)
	}
}

// countBlobs counts stored input and output files.
func countBlobs(t *testing.T, f *fixture) int {
	t.Helper()
	n := 0
	for _, dir := range []string{"inputs", "outputs"} {
		n += countFiles(t, f.dataDir+"/blobs", dir)
	}
	return n
}

func TestInsufficientCreditsAndConcurrency(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	img := photo(t, 320, 320, 6)
	// orgB (growth: 2 slots, one kept for direct requests) has 50 credits; a worker that never finishes
	// holds the slots.
	release := make(chan struct{})
	f.n.Pool().OnClaim = func(ctx context.Context, id string) bool {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return true
	}
	defer close(release)
	keyB := f.keyExpiring // orgB, all scopes
	r1 := post(t, f.base+"/watermarks/images/async", keyB, "", img, `{"n":1}`)
	r2 := post(t, f.base+"/watermarks/images/async", keyB, "", img, `{"n":2}`)
	if r1.status != 202 || r2.status != 202 {
		t.Fatalf("two jobs on a 2-slot plan: %d %d", r1.status, r2.status)
	}
	r3 := post(t, f.base+"/watermarks/images/async", keyB, "", img, `{"n":3}`)
	if p := decodeProblem(t, r3); r3.status != 429 || p.Code != "concurrency_limited" || r3.header.Get("Retry-After") != "2" {
		t.Fatalf("third job: %d %+v Retry-After %q", r3.status, p, r3.header.Get("Retry-After"))
	}
	if p := decodeProblem(t, r3); p.Detail != "the growth plan runs 2 jobs at once" {
		t.Fatalf("third job's detail %q", p.Detail)
	}
	// A plan of one slot (orgA, trial) says so in the singular.
	if r := post(t, f.base+"/watermarks/images/async", f.keyA, "trial-job-0005", img, `{"n":5}`); r.status != 202 {
		t.Fatalf("trial job: %d %s", r.status, r.body)
	}
	r6 := post(t, f.base+"/watermarks/images/async", f.keyA, "", img, `{"n":6}`)
	if p := decodeProblem(t, r6); r6.status != 429 || p.Detail != "the trial plan runs 1 job at once" || r6.header.Get("Retry-After") != "6" {
		t.Fatalf("second trial job: %d %+v Retry-After %q", r6.status, p, r6.header.Get("Retry-After"))
	}
	// At the limit, a large upload is refused before its body is sent: the client sends the headers and the
	// first 16 KB of an 8 MB form and gets its answer without sending the rest, and nothing is stored.
	blobs := countBlobs(t, f)
	big := postHeadOnly(t, f, "/watermarks/images/detect/async", f.keyA, make([]byte, 8<<20), 16<<10)
	if p := decodeProblem(t, big); big.status != 429 || p.Code != "concurrency_limited" || big.header.Get("Retry-After") != "6" {
		t.Fatalf("large upload at the limit: %d %+v Retry-After %q", big.status, p, big.header.Get("Retry-After"))
	}
	if n := countBlobs(t, f); n != blobs {
		t.Fatalf("the refused upload left files: %d, was %d", n, blobs)
	}
	// The job's own Idempotency-Key still replays at the limit.
	if r := post(t, f.base+"/watermarks/images/async", f.keyA, "trial-job-0005", img, `{"n":5}`); r.status != 202 {
		t.Fatalf("replay at the limit: %d %s", r.status, r.body)
	}
	_, held := balance(t, f, f.orgB)
	if held != 2 {
		t.Fatalf("held %d, want 2", held)
	}
	// An organization with no credits gets 402 and nothing is held or kept.
	r4 := post(t, f.base+"/watermarks/images/async", f.keyPoor, "", img, `{"n":4}`)
	if p := decodeProblem(t, r4); r4.status != 402 || p.Code != "insufficient_credits" {
		t.Fatalf("no credits: %d %+v", r4.status, p)
	}
	if bal, held := balance(t, f, f.orgPoor); bal != 0 || held != 0 {
		t.Fatalf("poor organization: balance %d held %d", bal, held)
	}
}

// postHeadOnly posts a form carrying file to path but sends only the headers and the first sent bytes of the
// body, then waits for the answer, which must come before the rest is sent.
func postHeadOnly(t *testing.T, f *fixture, path, key string, file []byte, sent int) response {
	t.Helper()
	ct, body := form(t, file, "large.jpg", "")
	c, err := net.Dial("tcp", strings.TrimPrefix(f.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	head := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: filigrane\r\nX-API-Key: %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n",
		path, key, ct, len(body))
	if _, err := c.Write(append([]byte(head), body[:sent]...)); err != nil {
		t.Fatal(err)
	}
	// The deadline bounds a server that waits for the rest of the body: then the test fails here.
	_ = c.SetReadDeadline(time.Now().Add(15 * time.Second))
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer before the body was sent: %v", err)
	}
	defer res.Body.Close()
	var b bytes.Buffer
	b.ReadFrom(res.Body)
	return response{status: res.StatusCode, header: res.Header, body: b.Bytes()}
}

func countFiles(t *testing.T, root, dir string) int {
	t.Helper()
	n := 0
	filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			n++
		}
		return nil
	})
	return n
}

// TestWorkerLostMidJob: the first worker claims the job and dies (it never renews or reports). Once its lease
// expires the job is retried from the original input, succeeds once and is charged once.
func TestWorkerLostMidJob(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var mu sync.Mutex
	claims := 0
	f.n.Pool().OnClaim = func(ctx context.Context, id string) bool {
		mu.Lock()
		defer mu.Unlock()
		claims++
		return claims > 1 // the first claimant "dies" without a word
	}
	before, _ := balance(t, f, f.orgA)
	r := post(t, f.base+"/watermarks/images/async", f.keyA, "", photo(t, 512, 384, 7), `{"lost":"worker"}`)
	if r.status != 202 {
		t.Fatalf("async: %d %s", r.status, r.body)
	}
	rc := decodeReceipt(t, r)
	waitStatus(t, f, rc.StatusURL, "running")
	f.clk.Advance(31 * time.Second) // past the 30 s lease
	if _, _, err := f.n.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	st := waitStatus(t, f, rc.StatusURL, "retrying")
	if st.Attempts != 1 {
		t.Fatalf("attempts after the lost worker: %d", st.Attempts)
	}
	f.clk.Advance(2 * time.Second) // the first retry wait
	if _, _, err := f.n.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	res := waitResult(t, f, f.keyA, rc.ResultURL)
	if res.status != 200 {
		t.Fatalf("result after retry: %d %s", res.status, res.body)
	}
	final := decodeReceipt(t, call(t, "GET", f.base+rc.StatusURL, f.keyA, nil))
	if final.Status != "succeeded" || final.Attempts != 2 {
		t.Fatalf("final %+v", final)
	}
	if after, held := balance(t, f, f.orgA); before-after != 1 || held != 0 {
		t.Fatalf("charged %d (held %d), want exactly 1", before-after, held)
	}
}

func waitStatus(t *testing.T, f *fixture, statusURL, want string) receipt {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		rc := decodeReceipt(t, call(t, "GET", f.base+statusURL, f.keyA, nil))
		if rc.Status == want {
			return rc
		}
		if time.Now().After(deadline) {
			t.Fatalf("job never reached %s (now %+v)", want, rc)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestSyncEmbedBecomesJob: a synchronous embed that outlasts the sync wait answers 202 with the receipt, and
// the job goes on to succeed.
func TestSyncEmbedBecomesJob(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *node.Config) { c.SyncWait = 200 * time.Millisecond })
	gate := make(chan struct{})
	f.n.Pool().OnClaim = func(ctx context.Context, id string) bool {
		select {
		case <-gate:
		case <-ctx.Done():
		}
		return true
	}
	r := post(t, f.base+"/watermarks/images", f.keyA, "", photo(t, 400, 400, 8), `{"slow":true}`)
	if r.status != 202 || r.header.Get("Location") == "" {
		t.Fatalf("slow sync embed: %d %s", r.status, r.body)
	}
	rc := decodeReceipt(t, r)
	close(gate)
	if res := waitResult(t, f, f.keyA, rc.ResultURL); res.status != 200 {
		t.Fatalf("result: %d", res.status)
	}
}

// TestFailedJobReplaysFailure: a file whose header is fine but whose pixels are broken fails the job for good
// (no retry helps), the hold is refunded, and a replay with the same key answers the same failure.
func TestFailedJobReplaysFailure(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	img := photo(t, 600, 400, 9)
	broken := append([]byte(nil), img[:len(img)/3]...) // the header survives; the scan data is cut
	before, _ := balance(t, f, f.orgA)
	r := post(t, f.base+"/watermarks/images", f.keyA, "broken-file-1", broken, `{"x":1}`)
	if r.status != 422 {
		t.Fatalf("broken image: %d %s", r.status, r.body)
	}
	var body map[string]any
	json.Unmarshal(r.body, &body)
	if body["status"] != "failed" || body["error_code"] != "invalid_image" || !strings.HasPrefix(fmt.Sprint(body["request_id"]), "req_") {
		t.Fatalf("failure body %s", r.body)
	}
	again := post(t, f.base+"/watermarks/images", f.keyA, "broken-file-1", broken, `{"x":1}`)
	if again.status != 422 || !bytes.Equal(again.body, r.body) {
		t.Fatalf("replay: %d %s", again.status, again.body)
	}
	if after, held := balance(t, f, f.orgA); after != before || held != 0 {
		t.Fatalf("a failed job cost %d (held %d)", before-after, held)
	}
}
