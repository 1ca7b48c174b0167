package node_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"filigrane/codec/pdf/pdftest"
)

// postFile sends file under filename with the data field (when not empty) to url.
func postFile(t *testing.T, url, key string, file []byte, filename, data string) response {
	t.Helper()
	ct, body := form(t, file, filename, data)
	req, _ := http.NewRequest("POST", url, bytes.NewReader(body))
	req.Header.Set("Content-Type", ct)
	req.Header.Set("X-API-Key", key)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer res.Body.Close()
	var b bytes.Buffer
	b.ReadFrom(res.Body)
	return response{status: res.StatusCode, header: res.Header, body: b.Bytes()}
}

// tinyMP4 makes a one-second 512x384 H.264 MP4 with ffmpeg's test pattern.
func tinyMP4(t *testing.T) []byte {
	t.Helper()
	out := filepath.Join(t.TempDir(), "clip.mp4")
	cmd := exec.Command("ffmpeg", "-v", "error", "-f", "lavfi", "-i", "testsrc=size=512x384:rate=10", "-t", "1",
		"-pix_fmt", "yuv420p", "-c:v", "libx264", "-preset", "ultrafast", out)
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("ffmpeg: %v: %s", err, msg)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// tinyPDF is a one-page Letter PDF with text, an outline and a link.
func tinyPDF() []byte { return pdftest.Make(pdftest.Doc{Pages: 1}) }

// TestVideoEmbedAndDetectJobs round-trips a video through /watermarks/videos/async and
// /watermarks/videos/detect/async: the receipt, the watermarked MP4, a detection that finds its id, and the
// credits (one started minute, one detection).
func TestVideoEmbedAndDetectJobs(t *testing.T) {
	if _, err := exec.LookPath("ffmpeg"); err != nil {
		t.Fatal("ffmpeg is not installed (scripts/setup.sh installs it)")
	}
	f := newFixture(t)
	before, _ := balance(t, f, f.orgA)
	r := postFile(t, f.base+"/watermarks/videos/async", f.keyA, tinyMP4(t), "clip.mp4", `{"film":1}`)
	if r.status != 202 {
		t.Fatalf("video embed: %d %s", r.status, r.body)
	}
	rc := decodeReceipt(t, r)
	if rc.Operation != "embed" || rc.Format != "MP4" || rc.Credits != 1 {
		t.Fatalf("receipt %s", r.body)
	}
	res := waitResult(t, f, f.keyA, rc.ResultURL)
	wm := res.header.Get("X-Watermark-ID")
	if res.status != 200 || res.header.Get("Content-Type") != "video/mp4" || wm == "" ||
		res.header.Get("Content-Disposition") != `attachment; filename="clip-watermarked.mp4"` {
		t.Fatalf("embed result: %d %v %.200s", res.status, res.header, res.body)
	}

	r = postFile(t, f.base+"/watermarks/videos/detect/async", f.keyA, res.body, "marked.mp4", "")
	if r.status != 202 {
		t.Fatalf("video detect: %d %s", r.status, r.body)
	}
	drc := decodeReceipt(t, r)
	dres := waitResult(t, f, f.keyA, drc.ResultURL)
	var det detection
	if dres.status != 200 || json.Unmarshal(dres.body, &det) != nil {
		t.Fatalf("detect result: %d %s", dres.status, dres.body)
	}
	if !det.Watermarked || det.WatermarkID == nil || *det.WatermarkID != wm {
		t.Fatalf("detection %s; want watermark %s", dres.body, wm)
	}
	if after, held := balance(t, f, f.orgA); after != before-2 || held != 0 {
		t.Fatalf("balance %d held %d; want %d and nothing held", after, held, before-2)
	}
}

// TestDocumentEmbedAndDetect round-trips a PDF through /watermarks/documents and
// /watermarks/documents/detect, both answering in the request.
func TestDocumentEmbedAndDetect(t *testing.T) {
	f := newFixture(t)
	before, _ := balance(t, f, f.orgA)
	r := postFile(t, f.base+"/watermarks/documents", f.keyA, tinyPDF(), "report.pdf", `{"doc":1}`)
	wm := r.header.Get("X-Watermark-ID")
	if r.status != 200 || r.header.Get("Content-Type") != "application/pdf" || wm == "" || !bytes.HasPrefix(r.body, []byte("%PDF")) {
		t.Fatalf("document embed: %d %v %.200s", r.status, r.header, r.body)
	}
	d := postFile(t, f.base+"/watermarks/documents/detect", f.keyA, r.body, "marked.pdf", "")
	var det detection
	if d.status != 200 || json.Unmarshal(d.body, &det) != nil {
		t.Fatalf("document detect: %d %s", d.status, d.body)
	}
	if !det.Watermarked || det.WatermarkID == nil || *det.WatermarkID != wm {
		t.Fatalf("detection %s; want watermark %s", d.body, wm)
	}
	// A file that is not a PDF is refused before anything is charged.
	bad := postFile(t, f.base+"/watermarks/documents", f.keyA, []byte("not a pdf at all"), "x.pdf", `{"doc":2}`)
	if bad.status != 422 || !bytes.Contains(bad.body, []byte(`"code":"invalid_document"`)) {
		t.Fatalf("not a PDF: %d %s", bad.status, bad.body)
	}
	if after, held := balance(t, f, f.orgA); after != before-2 || held != 0 {
		t.Fatalf("balance %d held %d; want %d and nothing held", after, held, before-2)
	}
}

// TestVideoDetectFromUpload: a detect upload named .mp4 is a video upload: /watermarks/videos/detect/async
// uses it (an unmarked clip is reported unmarked), the document endpoint refuses it as another kind.
func TestVideoDetectFromUpload(t *testing.T) {
	if _, err := exec.LookPath("ffmpeg"); err != nil {
		t.Fatal("ffmpeg is not installed (scripts/setup.sh installs it)")
	}
	f := newFixture(t)
	key := f.dev.Secret
	u := uploaded(t, f, key, "detect", "plain.mp4", tinyMP4(t))
	wantProblem(t, "video upload at the document endpoint",
		postUpload(t, f.base+"/watermarks/documents/detect/async", key, "", u.UploadID, ""), 422, "upload_kind_mismatch")
	r := postUpload(t, f.base+"/watermarks/videos/detect/async", key, "", u.UploadID, "")
	if r.status != 202 {
		t.Fatalf("video detect from upload: %d %s", r.status, r.body)
	}
	rc := decodeReceipt(t, r)
	if rc.StatusURL != "/watermarks/jobs/"+rc.RequestID || rc.Operation != "detect" || rc.Format != "MP4" || rc.Credits != 1 {
		t.Fatalf("receipt %s", r.body)
	}
	res := waitResult(t, f, key, rc.ResultURL)
	var det detection
	if res.status != 200 || json.Unmarshal(res.body, &det) != nil || det.Watermarked || det.WatermarkID != nil {
		t.Fatalf("detection of an unmarked clip: %d %s", res.status, res.body)
	}
	if g := getUpload(t, f, key, u.UploadID); g.Status != "consumed" || g.RequestID != rc.RequestID {
		t.Fatalf("upload after use: %+v", g)
	}
}

// postMedia sends file as filename with data (when not empty) and an Idempotency-Key (when not empty).
func postMedia(t *testing.T, url, key, idem string, file []byte, filename, data string) response {
	t.Helper()
	ct, body := form(t, file, filename, data)
	req, _ := http.NewRequest("POST", url, bytes.NewReader(body))
	req.Header.Set("Content-Type", ct)
	req.Header.Set("X-API-Key", key)
	if idem != "" {
		req.Header.Set("Idempotency-Key", idem)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	return response{status: res.StatusCode, header: res.Header, body: b}
}

// TestMediaProgramMissing: on a node where ffmpeg and mutool are not installed (PATH without them), every
// video and document endpoint answers 503 media_unavailable with Retry-After before it stores or holds
// anything; an upload named in such a request stays usable, and once the programs are back (no restart)
// the same upload is processed. Images are not affected.
func TestMediaProgramMissing(t *testing.T) {
	clip := tinyMP4(t)
	f := newFixture(t)
	u := uploaded(t, f, f.keyA, "video", "clip.mp4", clip)
	before, _ := balance(t, f, f.orgA)
	path := os.Getenv("PATH")
	t.Setenv("PATH", t.TempDir()) // an empty directory: no ffmpeg, ffprobe or mutool

	for _, c := range []struct {
		route, filename string
		file            []byte
		data            string
	}{
		{"/watermarks/videos", "clip.mp4", clip, `{"v":1}`},
		{"/watermarks/videos/async", "clip.mp4", clip, `{"v":1}`},
		{"/watermarks/videos/detect", "clip.mp4", clip, ""},
		{"/watermarks/videos/detect/async", "clip.mp4", clip, ""},
		{"/watermarks/documents", "report.pdf", tinyPDF(), `{"d":1}`},
		{"/watermarks/documents/async", "report.pdf", tinyPDF(), `{"d":1}`},
		{"/watermarks/documents/detect", "report.pdf", tinyPDF(), ""},
		{"/watermarks/documents/detect/async", "report.pdf", tinyPDF(), ""},
	} {
		r := postMedia(t, f.base+c.route, f.keyA, "missing-"+strings.ReplaceAll(c.route[12:], "/", "-"), c.file, c.filename, c.data)
		wantProblem(t, c.route+" without its program", r, 503, "media_unavailable")
		if r.header.Get("Retry-After") != "60" || !bytes.Contains(r.body, []byte("not installed")) {
			t.Fatalf("%s: Retry-After %q, body %s", c.route, r.header.Get("Retry-After"), r.body)
		}
	}
	r := postUpload(t, f.base+"/watermarks/videos/async", f.keyA, "", u.UploadID, `{"v":2}`)
	wantProblem(t, "video upload without ffmpeg", r, 503, "media_unavailable")
	if g := getUpload(t, f, f.keyA, u.UploadID); g.Status != "received" {
		t.Fatalf("upload after the refusal: %+v, want it still received", g)
	}
	if after, held := balance(t, f, f.orgA); after != before || held != 0 {
		t.Fatalf("balance %d held %d after refusals; want %d, nothing held", after, held, before)
	}
	// Images need no external program.
	if r := post(t, f.base+"/watermarks/images", f.keyA, "", photo(t, 320, 320, 4), `{"i":1}`); r.status != 200 {
		t.Fatalf("image embed without ffmpeg: %d %s", r.status, r.body)
	}

	t.Setenv("PATH", path)
	r = postUpload(t, f.base+"/watermarks/videos/async", f.keyA, "", u.UploadID, `{"v":2}`)
	if r.status != 202 {
		t.Fatalf("the same upload with ffmpeg back: %d %s", r.status, r.body)
	}
	if res := waitResult(t, f, f.keyA, decodeReceipt(t, r).ResultURL); res.status != 200 || res.header.Get("Content-Type") != "video/mp4" {
		t.Fatalf("result: %d %v", res.status, res.header)
	}
}
