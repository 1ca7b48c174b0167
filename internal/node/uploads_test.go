package node_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"filigrane/actors"
	"filigrane/internal/clock"
	"filigrane/internal/node"
)

// uploadRes is the upload resource (spec 2.5) as a client reads it.
type uploadRes struct {
	UploadID  string `json:"upload_id"`
	Status    string `json:"status"`
	Kind      string `json:"kind"`
	Filename  string `json:"filename"`
	Size      int64  `json:"size"`
	ExpiresAt string `json:"expires_at"`
	Upload    struct {
		Method    string `json:"method"`
		URL       string `json:"url"`
		ExpiresAt string `json:"expires_at"`
	} `json:"upload"`
	RequestID string `json:"request_id"`
	Error     string `json:"error"`
	ErrorCode string `json:"error_code"`
}

func sendJSON(t *testing.T, method, url, key, body string) response {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("X-API-Key", key)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return response{status: res.StatusCode, header: res.Header, body: b}
}

func decodeUpload(t *testing.T, r response) uploadRes {
	t.Helper()
	var u uploadRes
	if err := json.Unmarshal(r.body, &u); err != nil {
		t.Fatalf("upload resource %s: %v", r.body, err)
	}
	return u
}

// createUpload declares an upload and expects 201.
func createUpload(t *testing.T, f *fixture, key, kind, filename string, size int) uploadRes {
	t.Helper()
	r := sendJSON(t, "POST", f.base+"/uploads", key, fmt.Sprintf(`{"kind":%q,"filename":%q,"size":%d}`, kind, filename, size))
	if r.status != 201 {
		t.Fatalf("create %s upload: %d %s", kind, r.status, r.body)
	}
	return decodeUpload(t, r)
}

// putOpts shape a PUT to a signed URL.
type putOpts struct {
	chunked bool              // send without Content-Length
	header  map[string]string // extra headers
}

func putFile(t *testing.T, url string, body []byte, o putOpts) response {
	t.Helper()
	var rd io.Reader = bytes.NewReader(body)
	if o.chunked {
		rd = io.MultiReader(bytes.NewReader(body)) // unknown length: the client sends it chunked
	}
	req, err := http.NewRequest("PUT", url, rd)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range o.header {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("PUT %s: %v", url, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return response{status: res.StatusCode, header: res.Header, body: b}
}

// uploaded creates an upload and PUTs file to it.
func uploaded(t *testing.T, f *fixture, key, kind, filename string, file []byte) uploadRes {
	t.Helper()
	u := createUpload(t, f, key, kind, filename, len(file))
	r := putFile(t, u.Upload.URL, file, putOpts{})
	if r.status != 200 || decodeUpload(t, r).Status != "received" {
		t.Fatalf("PUT: %d %s", r.status, r.body)
	}
	return u
}

// postUpload sends an embed or detect request that names an upload instead of a file.
func postUpload(t *testing.T, url, key, idem, uploadID, data string) response {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	if data != "" {
		mw.WriteField("data", data)
	}
	mw.WriteField("upload_id", uploadID)
	mw.Close()
	req, _ := http.NewRequest("POST", url, &buf)
	req.Header.Set("Content-Type", mw.FormDataContentType())
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

func getUpload(t *testing.T, f *fixture, key, id string) uploadRes {
	t.Helper()
	r := call(t, "GET", f.base+"/uploads/"+id, key, nil)
	if r.status != 200 {
		t.Fatalf("GET upload: %d %s", r.status, r.body)
	}
	return decodeUpload(t, r)
}

func wantProblem(t *testing.T, what string, r response, status int, code string) {
	t.Helper()
	if r.status != status {
		t.Fatalf("%s: %d %s, want %d %s", what, r.status, r.body, status, code)
	}
	p := decodeProblem(t, r)
	if p.Code != code {
		t.Fatalf("%s: %d %s, want %d %s", what, r.status, r.body, status, code)
	}
}

// uploadFiles counts stored upload files and staging files of Puts in progress.
func uploadFiles(t *testing.T, f *fixture) int {
	t.Helper()
	root := node.Layout{Root: f.dataDir}.BlobDir()
	return countFiles(t, root, filepath.Join("data", "uploads.d")) + countFiles(t, root, "tmp")
}

func TestUploadCreate(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	key := f.dev.Secret
	now := f.clk.Now()
	r := sendJSON(t, "POST", f.base+"/uploads", key, `{"kind":"image","filename":"big photo.jpg","size":45000000,"note":"extra members are ignored"}`)
	if r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	u := decodeUpload(t, r)
	if !actors.ValidUploadID(u.UploadID) || u.Status != "pending" || u.Kind != "image" || u.Size != 45000000 || u.Filename != "big photo.jpg" {
		t.Fatalf("resource %s", r.body)
	}
	if r.header.Get("Location") != "/uploads/"+u.UploadID {
		t.Fatalf("Location %q", r.header.Get("Location"))
	}
	if u.Upload.Method != "PUT" || !strings.HasPrefix(u.Upload.URL, "http://"+f.n.UploadAddr()+"/uploads/"+u.UploadID+"?") {
		t.Fatalf("upload target %+v (upload host %s)", u.Upload, f.n.UploadAddr())
	}
	if u.Upload.ExpiresAt != now.Add(6*time.Hour).Format(time.RFC3339) || u.ExpiresAt != now.Add(24*time.Hour).Format(time.RFC3339) {
		t.Fatalf("expiries: URL %s, upload %s (now %s)", u.Upload.ExpiresAt, u.ExpiresAt, now)
	}
	var raw map[string]any
	json.Unmarshal(r.body, &raw)
	for _, absent := range []string{"request_id", "error"} {
		if _, ok := raw[absent]; ok {
			t.Fatalf("%s present before it is set: %s", absent, r.body)
		}
	}
	if g := getUpload(t, f, key, u.UploadID); g.Status != "pending" || g.Upload.URL != u.Upload.URL {
		t.Fatalf("GET %+v", g)
	}
	// Another organization does not see it; unknown ids are not found.
	if r := call(t, "GET", f.base+"/uploads/"+u.UploadID, f.keyA, nil); r.status != 404 {
		t.Fatalf("other organization: %d", r.status)
	}
	if r := call(t, "GET", f.base+"/uploads/upl_nope", key, nil); r.status != 404 {
		t.Fatalf("unknown id: %d", r.status)
	}

	cases := []struct {
		name, body string
		status     int
		code       string
	}{
		{"malformed", `{"kind":"image",`, 400, "malformed_json"},
		{"not an object", `[1]`, 400, "malformed_json"},
		{"two objects", `{"kind":"image","filename":"a.jpg","size":1}{}`, 400, "malformed_json"},
		{"unknown kind", `{"kind":"audio","filename":"a.mp3","size":10}`, 422, "invalid_request"},
		{"no kind", `{"filename":"a.jpg","size":10}`, 422, "invalid_request"},
		{"no filename", `{"kind":"image","size":10}`, 422, "invalid_request"},
		{"empty filename", `{"kind":"image","filename":" ","size":10}`, 422, "invalid_request"},
		{"path filename", `{"kind":"image","filename":"../a.jpg","size":10}`, 422, "invalid_request"},
		{"no size", `{"kind":"image","filename":"a.jpg"}`, 422, "invalid_request"},
		{"fractional size", `{"kind":"image","filename":"a.jpg","size":1.5}`, 422, "invalid_request"},
		{"string size", `{"kind":"image","filename":"a.jpg","size":"10"}`, 422, "invalid_request"},
		{"zero size", `{"kind":"image","filename":"a.jpg","size":0}`, 422, "invalid_request"},
		{"detect without a known extension", `{"kind":"detect","filename":"scan","size":10}`, 422, "invalid_request"},
		{"image over 50 MB", `{"kind":"image","filename":"a.jpg","size":50000001}`, 413, "file_too_large"},
		{"document over 20 MB", `{"kind":"document","filename":"a.pdf","size":20000001}`, 413, "file_too_large"},
		{"video over 20 MB", `{"kind":"video","filename":"a.mp4","size":20000001}`, 413, "file_too_large"},
		{"detect image over 192 MB", `{"kind":"detect","filename":"a.JPG","size":192000001}`, 413, "file_too_large"},
		{"detect PDF over 64 MB", `{"kind":"detect","filename":"a.pdf","size":64000001}`, 413, "file_too_large"},
		{"detect video over 100 MB", `{"kind":"detect","filename":"a.mov","size":100000001}`, 413, "file_too_large"},
		{"body over 64 KB", `{"kind":"image","filename":"a.jpg","size":1,"pad":"` + strings.Repeat("x", 65<<10) + `"}`, 413, "payload_too_large"},
	}
	for _, c := range cases {
		r := sendJSON(t, "POST", f.base+"/uploads", key, c.body)
		wantProblem(t, c.name, r, c.status, c.code)
	}
	for _, ok := range []string{
		`{"kind":"image","filename":"a.jpg","size":50000000}`,
		`{"kind":"document","filename":"a.pdf","size":20000000}`,
		`{"kind":"video","filename":"a.mp4","size":20000000}`,
		`{"kind":"detect","filename":"a.tiff","size":192000000}`,
		`{"kind":"detect","filename":"a.pdf","size":64000000}`,
		`{"kind":"detect","filename":"a.mp4","size":100000000}`,
		`{"kind":"detect","filename":"a.png","size":1e6}`,
	} {
		if r := sendJSON(t, "POST", f.base+"/uploads", key, ok); r.status != 201 {
			t.Fatalf("%s: %d %s", ok, r.status, r.body)
		}
	}
	// Scopes: keyB has only watermarks:detect.
	wantProblem(t, "embed upload with a detect key", sendJSON(t, "POST", f.base+"/uploads", f.keyB, `{"kind":"image","filename":"a.jpg","size":10}`), 403, "insufficient_scope")
	if r := sendJSON(t, "POST", f.base+"/uploads", f.keyB, `{"kind":"detect","filename":"a.jpg","size":10}`); r.status != 201 {
		t.Fatalf("detect upload with a detect key: %d %s", r.status, r.body)
	}
	wantProblem(t, "no key", sendJSON(t, "POST", f.base+"/uploads", "", `{}`), 401, "unauthorized")
}

func TestUploadPut(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	key := f.dev.Secret
	img := photo(t, 320, 240, 11)
	u := createUpload(t, f, key, "image", "p.jpg", len(img))
	// The upload host takes no API key.
	wantProblem(t, "PUT with an API key", putFile(t, u.Upload.URL, img, putOpts{header: map[string]string{"X-API-Key": key}}), 400, "api_key_not_accepted")
	wantProblem(t, "upload host with an API key", call(t, "GET", "http://"+f.n.UploadAddr()+"/healthz", key, nil), 400, "api_key_not_accepted")
	if r := call(t, "GET", "http://"+f.n.UploadAddr()+"/healthz", "", nil); r.status != 200 {
		t.Fatalf("upload host health: %d", r.status)
	}
	r := putFile(t, u.Upload.URL, img, putOpts{})
	if r.status != 200 {
		t.Fatalf("PUT: %d %s", r.status, r.body)
	}
	if g := getUpload(t, f, key, u.UploadID); g.Status != "received" {
		t.Fatalf("after PUT: %+v", g)
	}
	wantProblem(t, "second PUT", putFile(t, u.Upload.URL, img, putOpts{}), 409, "upload_already_received")
	if n := uploadFiles(t, f); n != 1 {
		t.Fatalf("%d upload files stored, want 1", n)
	}
	// A streamed (chunked) body of the right size is accepted too.
	u2 := createUpload(t, f, key, "image", "p.jpg", len(img))
	if r := putFile(t, u2.Upload.URL, img, putOpts{chunked: true}); r.status != 200 {
		t.Fatalf("chunked PUT: %d %s", r.status, r.body)
	}
}

func TestUploadSignedURL(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	key := f.dev.Secret
	body := bytes.Repeat([]byte{7}, 1000)
	u := createUpload(t, f, key, "detect", "x.png", len(body))
	other := createUpload(t, f, key, "detect", "x.png", len(body))
	pu, _ := url.Parse(u.Upload.URL)
	q := pu.Query()
	tamper := func(fn func(p *url.URL, q url.Values)) string {
		p2 := *pu
		q2 := url.Values{}
		for k, v := range q {
			q2[k] = append([]string(nil), v...)
		}
		fn(&p2, q2)
		p2.RawQuery = q2.Encode()
		return p2.String()
	}
	bad := map[string]string{
		"signature changed":   tamper(func(_ *url.URL, q url.Values) { q.Set("signature", flipFirst(q.Get("signature"))) }),
		"signature missing":   tamper(func(_ *url.URL, q url.Values) { q.Del("signature") }),
		"expiry extended":     tamper(func(_ *url.URL, q url.Values) { q.Set("expires", q.Get("expires")+"0") }),
		"other upload":        tamper(func(p *url.URL, _ url.Values) { p.Path = "/uploads/" + other.UploadID }),
		"unknown upload":      tamper(func(p *url.URL, _ url.Values) { p.Path = "/uploads/upl_" + strings.Repeat("0", 32) }),
		"malformed upload id": tamper(func(p *url.URL, _ url.Values) { p.Path = "/uploads/upl_x" }),
	}
	for name, u2 := range bad {
		wantProblem(t, name, putFile(t, u2, body, putOpts{}), 403, "invalid_upload_signature")
	}
	if n := uploadFiles(t, f); n != 0 {
		t.Fatalf("refused PUTs stored %d files", n)
	}
	// The URL is valid 6 hours.
	f.clk.Advance(6*time.Hour - time.Second)
	if r := putFile(t, other.Upload.URL, body, putOpts{}); r.status != 200 {
		t.Fatalf("PUT just before 6 h: %d %s", r.status, r.body)
	}
	f.clk.Advance(time.Second)
	wantProblem(t, "PUT after 6 h", putFile(t, u.Upload.URL, body, putOpts{}), 403, "upload_url_expired")
	if g := getUpload(t, f, key, u.UploadID); g.Status != "pending" {
		t.Fatalf("after refused PUT: %+v", g)
	}
}

func TestUploadWrongSize(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	key := f.dev.Secret
	body := bytes.Repeat([]byte("abcdefgh"), 4096) // 32 KiB
	u := createUpload(t, f, key, "detect", "x.jpg", len(body))
	wantProblem(t, "shorter body", putFile(t, u.Upload.URL, body[:len(body)-1], putOpts{}), 400, "upload_size_mismatch")
	wantProblem(t, "longer body", putFile(t, u.Upload.URL, append(body, 'x'), putOpts{}), 413, "file_too_large")
	wantProblem(t, "shorter chunked body", putFile(t, u.Upload.URL, body[:len(body)-1], putOpts{chunked: true}), 400, "upload_size_mismatch")
	wantProblem(t, "longer chunked body", putFile(t, u.Upload.URL, append(body, 'x'), putOpts{chunked: true}), 413, "file_too_large")
	wantProblem(t, "empty body", putFile(t, u.Upload.URL, nil, putOpts{}), 400, "upload_size_mismatch")
	if n := uploadFiles(t, f); n != 0 {
		t.Fatalf("refused PUTs left %d files", n)
	}
	if g := getUpload(t, f, key, u.UploadID); g.Status != "pending" {
		t.Fatalf("after refused PUTs: %+v", g)
	}
	// A larger chunked body (beyond the read-ahead) that runs long is refused as well.
	big := bytes.Repeat([]byte{1}, 300<<10)
	u2 := createUpload(t, f, key, "detect", "x.jpg", len(big)-1)
	wantProblem(t, "long streamed body", putFile(t, u2.Upload.URL, big, putOpts{chunked: true}), 413, "file_too_large")
	if n := uploadFiles(t, f); n != 0 {
		t.Fatalf("refused streamed PUT left %d files", n)
	}
	if r := putFile(t, u.Upload.URL, body, putOpts{}); r.status != 200 {
		t.Fatalf("exact body: %d %s", r.status, r.body)
	}
}

func TestUploadEmbedAsyncAndReuse(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	key := f.dev.Secret
	img := photo(t, 640, 480, 12)
	u := uploaded(t, f, key, "image", "holiday.jpg", img)
	r := postUpload(t, f.base+"/watermarks/images/async", key, "upload-embed-1", u.UploadID, `{"u":1}`)
	if r.status != 202 {
		t.Fatalf("async embed from upload: %d %s", r.status, r.body)
	}
	rc := decodeReceipt(t, r)
	res := waitResult(t, f, key, rc.ResultURL)
	wm := res.header.Get("X-Watermark-ID")
	if res.status != 200 || wm == "" {
		t.Fatalf("result: %d %s", res.status, res.body)
	}
	if cd := res.header.Get("Content-Disposition"); !strings.Contains(cd, "holiday-watermarked.png") {
		t.Fatalf("Content-Disposition %q does not name the uploaded file", cd)
	}
	// The output carries the watermark of the data: the job ran on the uploaded file.
	d := post(t, f.base+"/watermarks/images/detect", key, "", res.body, "")
	var det detection
	if err := json.Unmarshal(d.body, &det); err != nil || !det.Watermarked || det.WatermarkID == nil || *det.WatermarkID != wm {
		t.Fatalf("detect output: %d %s", d.status, d.body)
	}
	g := getUpload(t, f, key, u.UploadID)
	if g.Status != "consumed" || g.RequestID != rc.RequestID {
		t.Fatalf("after use: %+v, want consumed by %s", g, rc.RequestID)
	}
	// Used once: another request (another key or none) gets 409; the same key gets the original job.
	wantProblem(t, "second use", postUpload(t, f.base+"/watermarks/images/async", key, "upload-embed-2", u.UploadID, `{"u":1}`), 409, "upload_consumed")
	wantProblem(t, "second use without a key", postUpload(t, f.base+"/watermarks/images", key, "", u.UploadID, `{"u":1}`), 409, "upload_consumed")
	before, _ := balance(t, f, f.dev.OrgID)
	replay := postUpload(t, f.base+"/watermarks/images/async", key, "upload-embed-1", u.UploadID, `{"u":1}`)
	if replay.status != 202 || decodeReceipt(t, replay).RequestID != rc.RequestID || decodeReceipt(t, replay).Status != "succeeded" {
		t.Fatalf("replay: %d %s", replay.status, replay.body)
	}
	if after, _ := balance(t, f, f.dev.OrgID); after != before {
		t.Fatalf("replay charged %d", before-after)
	}
	// The sync form of the same request returns the job's output.
	sync := postUpload(t, f.base+"/watermarks/images", key, "upload-embed-1", u.UploadID, `{"u":1}`)
	if sync.status != 200 || sync.header.Get("X-Watermark-ID") != wm {
		t.Fatalf("sync replay: %d %s", sync.status, sync.header)
	}
	// Another organization cannot use it.
	wantProblem(t, "other organization", postUpload(t, f.base+"/watermarks/images/async", f.keyA, "", u.UploadID, `{"u":1}`), 404, "not_found")
}

func TestUploadStatesOnUse(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	key := f.dev.Secret
	img := photo(t, 400, 300, 13)
	pending := createUpload(t, f, key, "image", "p.jpg", len(img))
	wantProblem(t, "pending upload", postUpload(t, f.base+"/watermarks/images/async", key, "", pending.UploadID, `{"a":1}`), 409, "upload_not_received")

	// Kinds must match the endpoint.
	imgUp := uploaded(t, f, key, "image", "p.jpg", img)
	wantProblem(t, "image upload on detect", postUpload(t, f.base+"/watermarks/images/detect", key, "", imgUp.UploadID, ""), 422, "upload_kind_mismatch")
	detUp := uploaded(t, f, key, "detect", "p.jpg", img)
	wantProblem(t, "detect upload on embed", postUpload(t, f.base+"/watermarks/images/async", key, "", detUp.UploadID, `{"a":1}`), 422, "upload_kind_mismatch")
	pdfUp := uploaded(t, f, key, "detect", "p.pdf", []byte("%PDF-1.7 not really"))
	wantProblem(t, "PDF detect upload on image detect", postUpload(t, f.base+"/watermarks/images/detect", key, "", pdfUp.UploadID, ""), 422, "upload_kind_mismatch")
	if g := getUpload(t, f, key, imgUp.UploadID); g.Status != "received" {
		t.Fatalf("kind mismatch changed the upload: %+v", g)
	}
	// Refusals about the request (bad data) leave the upload usable.
	wantProblem(t, "bad data", postUpload(t, f.base+"/watermarks/images/async", key, "", imgUp.UploadID, `[]`), 422, "invalid_data")
	if g := getUpload(t, f, key, imgUp.UploadID); g.Status != "received" {
		t.Fatalf("bad data changed the upload: %+v", g)
	}

	// A detect upload answers a synchronous detection, then is consumed.
	d := postUpload(t, f.base+"/watermarks/images/detect", key, "", detUp.UploadID, "")
	if d.status != 200 {
		t.Fatalf("sync detect from upload: %d %s", d.status, d.body)
	}
	if g := getUpload(t, f, key, detUp.UploadID); g.Status != "consumed" || g.RequestID == "" {
		t.Fatalf("after detection: %+v", g)
	}

	// A file that is not an image rejects the upload with the error a direct request gets.
	text := []byte("hello, this is text and not an image")
	bad := uploaded(t, f, key, "image", "notes.jpg", text)
	direct := post(t, f.base+"/watermarks/images/async", key, "", text, `{"a":1}`)
	wantProblem(t, "direct text", direct, 422, "invalid_image")
	r := postUpload(t, f.base+"/watermarks/images/async", key, "", bad.UploadID, `{"a":1}`)
	wantProblem(t, "text upload", r, 422, "invalid_image")
	g := getUpload(t, f, key, bad.UploadID)
	if g.Status != "rejected" || g.ErrorCode != "invalid_image" || g.Error != decodeProblem(t, direct).Detail {
		t.Fatalf("rejected upload %+v; direct error %q", g, decodeProblem(t, direct).Detail)
	}
	wantProblem(t, "rejected upload reused", postUpload(t, f.base+"/watermarks/images/async", key, "", bad.UploadID, `{"a":1}`), 409, "upload_rejected")
}

func TestUploadInsufficientCreditsKeepsUpload(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	img := photo(t, 400, 300, 14)
	u := uploaded(t, f, f.keyPoor, "image", "p.jpg", img)
	wantProblem(t, "no credits", postUpload(t, f.base+"/watermarks/images/async", f.keyPoor, "poor-attempt-1", u.UploadID, `{"a":1}`), 402, "insufficient_credits")
	if g := getUpload(t, f, f.keyPoor, u.UploadID); g.Status != "received" || g.RequestID != "" {
		t.Fatalf("after 402: %+v", g)
	}
	if rep, err := (actors.OrgClient{Caller: f.n.Cluster()}).Grant(context.Background(), actors.OrgGrant{OrgID: f.orgPoor, Op: "test-grant", Credits: 5}); err != nil || rep.Code != actors.ReplyOK {
		t.Fatalf("grant: %v %+v", err, rep)
	}
	// A new request (another key) may use it now.
	r := postUpload(t, f.base+"/watermarks/images/async", f.keyPoor, "poor-attempt-2", u.UploadID, `{"a":1}`)
	if r.status != 202 {
		t.Fatalf("after grant: %d %s", r.status, r.body)
	}
	// Wait through the job actor: polling with the key would spend the launch plan's 20 requests a minute.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rep, err := (actors.JobClient{Caller: f.n.Cluster()}).Await(ctx, f.orgPoor, decodeReceipt(t, r).RequestID)
	if err != nil || rep.Record == nil || rep.Record.Status != "succeeded" {
		t.Fatalf("job: %v %+v", err, rep)
	}
}

// TestUploadInUse: while a synchronous embed holds the upload (its job is blocked in the worker), another
// request gets 409 upload_in_use; once the first request answered, upload_consumed. The first request holds the
// upload until the test releases its job (its sync wait is far longer than the test), not for a fixed time a
// loaded machine could spend before the second request is answered.
func TestUploadInUse(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *node.Config) { c.SyncWait = 2 * time.Minute })
	key := f.dev.Secret
	release := make(chan struct{})
	claimed := make(chan struct{}, 8)
	var once sync.Once
	f.n.Pool().OnClaim = func(ctx context.Context, id string) bool {
		claimed <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
		}
		return true
	}
	defer once.Do(func() { close(release) })
	u := uploaded(t, f, key, "image", "p.jpg", photo(t, 640, 480, 15))
	first := make(chan response, 1)
	go func() { first <- postUpload(t, f.base+"/watermarks/images", key, "", u.UploadID, `{"a":1}`) }()
	// The worker holds the first request's job: the first request claimed the upload and waits.
	select {
	case <-claimed:
	case <-time.After(time.Minute): // only turns a hang into a failure
		t.Fatal("the first request's job never reached a worker")
	}
	sawInUse := false
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline) && !sawInUse; time.Sleep(20 * time.Millisecond) {
		r := postUpload(t, f.base+"/watermarks/images/async", key, "", u.UploadID, `{"a":1}`)
		p := decodeProblem(t, r)
		switch p.Code {
		case "upload_in_use":
			sawInUse = true
		case "upload_not_received", "upload_consumed":
			t.Fatalf("second request: %d %s", r.status, r.body)
		}
	}
	if !sawInUse {
		t.Fatal("no upload_in_use while the first request held the upload")
	}
	once.Do(func() { close(release) })
	r1 := <-first
	if r1.status != 200 || len(r1.body) == 0 {
		t.Fatalf("first request once its job ran: %d %.200s", r1.status, r1.body)
	}
	wantProblem(t, "after the first answered", postUpload(t, f.base+"/watermarks/images/async", key, "", u.UploadID, `{"a":1}`), 409, "upload_consumed")
}

func TestUploadExpiryAndSweep(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	key := f.dev.Secret
	img := photo(t, 640, 480, 16)
	unused := uploaded(t, f, key, "image", "p.jpg", img)
	pending := createUpload(t, f, key, "image", "p.jpg", len(img))
	used := uploaded(t, f, key, "image", "p.jpg", img)
	detected := uploaded(t, f, key, "detect", "p.jpg", img)
	r := postUpload(t, f.base+"/watermarks/images/async", key, "", used.UploadID, `{"a":1}`)
	if r.status != 202 {
		t.Fatalf("embed: %d %s", r.status, r.body)
	}
	if res := waitResult(t, f, key, decodeReceipt(t, r).ResultURL); res.status != 200 {
		t.Fatalf("embed result: %d %s", res.status, res.body)
	}
	if r := postUpload(t, f.base+"/watermarks/images/detect", key, "", detected.UploadID, ""); r.status != 200 {
		t.Fatalf("detect: %d %s", r.status, r.body)
	}
	if n := uploadFiles(t, f); n != 3 {
		t.Fatalf("%d upload files before expiry, want 3", n)
	}
	f.clk.Advance(24*time.Hour - time.Second)
	if g := getUpload(t, f, key, unused.UploadID); g.Status != "received" {
		t.Fatalf("just before 24 h: %+v", g)
	}
	f.clk.Advance(time.Second)
	for _, id := range []string{unused.UploadID, pending.UploadID} {
		if g := getUpload(t, f, key, id); g.Status != "expired" {
			t.Fatalf("after 24 h: %+v", g)
		}
		wantProblem(t, "expired upload", postUpload(t, f.base+"/watermarks/images/async", key, "", id, `{"a":1}`), 410, "upload_expired")
	}
	// The node's sweeper runs the upload pass.
	if _, _, err := f.n.Sweep(context.Background()); err != nil {
		t.Fatalf("sweep: %v", err)
	}
	// The unused upload's file and the synchronously detected one are gone; the job's input stays (it is
	// the source asset of the embed).
	if n := uploadFiles(t, f); n != 1 {
		t.Fatalf("%d upload files after the sweep, want 1", n)
	}
	if g := getUpload(t, f, key, unused.UploadID); g.Status != "expired" {
		t.Fatalf("swept: %+v", g)
	}
	if g := getUpload(t, f, key, used.UploadID); g.Status != "consumed" {
		t.Fatalf("swept consumed upload: %+v", g)
	}
	// Sweeping again changes nothing; records go after their 30 days.
	sw := actors.Sweeper{Store: f.n.Store(), Blobs: f.n.Blobs(), Clock: f.clk, Logger: zerolog.Nop()}
	if n, err := sw.SweepUploads(context.Background()); err != nil || n != 0 {
		t.Fatalf("second sweep: %d, %v", n, err)
	}
	f.clk.Advance(actors.UploadRecordRetention)
	if n, err := sw.SweepUploads(context.Background()); err != nil || n != 4 {
		t.Fatalf("retention sweep: %d, %v", n, err)
	}
	if r := call(t, "GET", f.base+"/uploads/"+unused.UploadID, key, nil); r.status != 404 {
		t.Fatalf("record after retention: %d %s", r.status, r.body)
	}
}

func TestUploadCORS(t *testing.T) {
	t.Parallel()
	const site = "https://app.example.com"
	f := newFixture(t, func(c *node.Config) { c.WebsiteOrigin = site })
	key := f.dev.Secret
	body := bytes.Repeat([]byte{3}, 100)
	u := createUpload(t, f, key, "detect", "x.png", len(body))
	preflight := func(origin string) response {
		req, _ := http.NewRequest("OPTIONS", u.Upload.URL, nil)
		req.Header.Set("Origin", origin)
		req.Header.Set("Access-Control-Request-Method", "PUT")
		req.Header.Set("Access-Control-Request-Headers", "content-type")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return response{status: res.StatusCode, header: res.Header, body: b}
	}
	ok := preflight(site)
	h := ok.header
	if ok.status != 204 || h.Get("Access-Control-Allow-Origin") != site || !strings.Contains(h.Get("Access-Control-Allow-Methods"), "PUT") ||
		!strings.Contains(strings.ToLower(h.Get("Access-Control-Allow-Headers")), "content-type") {
		t.Fatalf("preflight from the website: %d %v", ok.status, h)
	}
	if strings.Contains(strings.ToLower(h.Get("Access-Control-Allow-Headers")), "x-api-key") {
		t.Fatalf("preflight allows X-API-Key: %v", h)
	}
	for _, origin := range []string{"https://evil.example.com", "http://app.example.com", "null"} {
		r := preflight(origin)
		if r.status != 403 || r.header.Get("Access-Control-Allow-Origin") != "" || r.header.Get("Access-Control-Allow-Methods") != "" {
			t.Fatalf("preflight from %s: %d %v", origin, r.status, r.header)
		}
	}
	wantProblem(t, "PUT from another origin", putFile(t, u.Upload.URL, body, putOpts{header: map[string]string{"Origin": "https://evil.example.com"}}), 403, "origin_not_allowed")
	r := putFile(t, u.Upload.URL, body, putOpts{header: map[string]string{"Origin": site}})
	if r.status != 200 || r.header.Get("Access-Control-Allow-Origin") != site {
		t.Fatalf("PUT from the website: %d %v %s", r.status, r.header, r.body)
	}
}

func TestUploadCORSWithoutOrigin(t *testing.T) {
	t.Parallel()
	f := newFixture(t) // no website origin configured: no browser may upload
	u := createUpload(t, f, f.dev.Secret, "detect", "x.png", 10)
	req, _ := http.NewRequest("OPTIONS", u.Upload.URL, nil)
	req.Header.Set("Origin", "https://app.example.com")
	req.Header.Set("Access-Control-Request-Method", "PUT")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 403 || res.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("preflight: %d %v", res.StatusCode, res.Header)
	}
}

// TestUploadURLSurvivesRestart: the signing secret is kept in the data directory.
func TestUploadURLSurvivesRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	clk := clock.NewManual(time.Date(2026, 5, 4, 10, 0, 0, 0, time.UTC))
	n := startNode(t, dir, clk)
	secret := n.DevOrg.Secret
	f := &fixture{n: n, base: "http://" + n.APIAddr(), clk: clk, dataDir: dir}
	body := []byte("0123456789")
	u := createUpload(t, f, secret, "detect", "x.png", len(body))
	stopNode(t, n)
	n = startNode(t, dir, clk, func(c *node.Config) { c.UploadAddr = "127.0.0.1:0" })
	defer stopNode(t, n)
	// The new listener has another port; the path and signature are what matter.
	pu, _ := url.Parse(u.Upload.URL)
	pu.Host = n.UploadAddr()
	if r := putFile(t, pu.String(), body, putOpts{}); r.status != 200 {
		t.Fatalf("PUT after restart: %d %s", r.status, r.body)
	}
}

// TestUploadSyncDetectTooLargeKeepsUpload: a synchronous detection answers files up to 95 MB; above that it
// answers 413 and the upload stays usable for the async endpoint.
func TestUploadSyncDetectTooLargeKeepsUpload(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	key := f.dev.Secret
	img := photo(t, 320, 240, 17)
	const size = 96_000_000
	u := createUpload(t, f, key, "detect", "big.jpg", size)
	// A real JPEG followed by padding: the header probe reads a valid image, the file is above 95 MB.
	req, _ := http.NewRequest("PUT", u.Upload.URL, io.MultiReader(bytes.NewReader(img), io.LimitReader(zeros{}, int64(size-len(img)))))
	req.ContentLength = size
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("PUT: %d", res.StatusCode)
	}
	wantProblem(t, "sync detection above 95 MB", postUpload(t, f.base+"/watermarks/images/detect", key, "", u.UploadID, ""), 413, "file_too_large")
	if g := getUpload(t, f, key, u.UploadID); g.Status != "received" {
		t.Fatalf("after 413: %+v", g)
	}
	r := postUpload(t, f.base+"/watermarks/images/detect/async", key, "", u.UploadID, "")
	if r.status != 202 {
		t.Fatalf("async detection: %d %s", r.status, r.body)
	}
	if g := getUpload(t, f, key, u.UploadID); g.Status != "consumed" || g.RequestID != decodeReceipt(t, r).RequestID {
		t.Fatalf("after async detection: %+v", g)
	}
	waitResult(t, f, key, decodeReceipt(t, r).ResultURL)
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// TestUploadConcurrentPuts: two PUTs of the same upload race; one is received, the other refused, and one
// file stays stored.
func TestUploadConcurrentPuts(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	body := bytes.Repeat([]byte("0123456789abcdef"), 64<<10) // 1 MiB
	u := createUpload(t, f, f.dev.Secret, "detect", "x.png", len(body))
	var wg sync.WaitGroup
	statuses := make([]int, 4)
	for i := range statuses {
		wg.Add(1)
		go func() {
			defer wg.Done()
			statuses[i] = putFile(t, u.Upload.URL, body, putOpts{}).status
		}()
	}
	wg.Wait()
	ok := 0
	for _, s := range statuses {
		switch s {
		case 200:
			ok++
		case 409:
		default:
			t.Fatalf("statuses %v", statuses)
		}
	}
	if ok != 1 {
		t.Fatalf("statuses %v: want exactly one 200", statuses)
	}
	if n := uploadFiles(t, f); n != 1 {
		t.Fatalf("%d files stored, want 1", n)
	}
}

// flipFirst changes the first hex digit of s to another one (a fixed replacement would leave 1 in 16
// signatures unchanged).
func flipFirst(s string) string {
	if s[0] == '0' {
		return "1" + s[1:]
	}
	return "0" + s[1:]
}
