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

	"filigrane/codec"
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
// credits (one started minute, one detection); then a MOV through /watermarks/videos, which comes back a MOV.
func TestVideoEmbedAndDetectJobs(t *testing.T) {
	t.Parallel()
	requireFFmpeg(t)
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
	// The succeeded embed's receipt lists its units: the 1-second clip at 10 fps is one second of 10 frames.
	st := call(t, "GET", f.base+rc.StatusURL, f.keyA, nil)
	var marked struct {
		Status string `json:"status"`
		Units  []struct {
			Index     int     `json:"index"`
			StartTime float64 `json:"start_time"`
			EndTime   float64 `json:"end_time"`
			Frames    int     `json:"frames"`
		} `json:"units"`
	}
	if st.status != 200 || json.Unmarshal(st.body, &marked) != nil || marked.Status != "succeeded" ||
		len(marked.Units) != 1 || marked.Units[0].Index != 0 || marked.Units[0].StartTime != 0 ||
		marked.Units[0].EndTime != 1 || marked.Units[0].Frames != 10 {
		t.Fatalf("embed receipt %d %s; want one unit of 10 frames from 0 to 1 s", st.status, st.body)
	}

	r = postFile(t, f.base+"/watermarks/videos/detect/async", f.keyA, res.body, "marked.mp4", "")
	if r.status != 202 {
		t.Fatalf("video detect: %d %s", r.status, r.body)
	}
	drc := decodeReceipt(t, r)
	dres := waitResult(t, f, f.keyA, drc.ResultURL)
	if st := call(t, "GET", f.base+drc.StatusURL, f.keyA, nil); st.status != 200 ||
		bytes.Contains(st.body, []byte(`"units"`)) {
		t.Fatalf("detection receipt %d %s; want no units", st.status, st.body)
	}
	var det detection
	if dres.status != 200 || json.Unmarshal(dres.body, &det) != nil {
		t.Fatalf("detect result: %d %s", dres.status, dres.body)
	}
	if !det.Watermarked || det.WatermarkID == nil || *det.WatermarkID != wm {
		t.Fatalf("detection %s; want watermark %s", dres.body, wm)
	}
	// One unit per second of video, with its span: the 1-second clip at 10 fps is one unit from 0 to 1 s.
	var segs struct {
		Units []struct {
			Index       int      `json:"index"`
			Watermarked bool     `json:"watermarked"`
			StartTime   *float64 `json:"start_time"`
			EndTime     *float64 `json:"end_time"`
		} `json:"units"`
	}
	if err := json.Unmarshal(dres.body, &segs); err != nil || len(segs.Units) != 1 || segs.Units[0].Index != 0 ||
		!segs.Units[0].Watermarked || segs.Units[0].StartTime == nil || *segs.Units[0].StartTime != 0 ||
		segs.Units[0].EndTime == nil || *segs.Units[0].EndTime != 1 {
		t.Fatalf("detection units %s; want one watermarked unit from 0 to 1 s", dres.body)
	}
	// A MOV comes back a MOV, named and typed as one: it was a QuickTime file named clip-watermarked.mp4 and
	// typed video/mp4. It is sent under the name Etchv's Node SDK gives every video (video.mp4): the type and
	// the extension come from the file, not from its name. Its asset downloads typed and named the same way.
	mov := filepath.Join(t.TempDir(), "clip.mov")
	if err := os.WriteFile(mov+".mp4", tinyMP4(t), 0o600); err != nil {
		t.Fatal(err)
	}
	if msg, err := exec.Command("ffmpeg", "-v", "error", "-i", mov+".mp4", "-c", "copy", "-f", "mov", mov).CombinedOutput(); err != nil {
		t.Fatalf("ffmpeg: %v: %s", err, msg)
	}
	movClip, err := os.ReadFile(mov)
	if err != nil {
		t.Fatal(err)
	}
	// output_format names the container the output keeps: mov for a MOV (refused before as "can only be
	// mp4"), and mp4 for a MOV is refused naming mov, before anything is held, as is mov for an MP4.
	for _, c := range []struct {
		clip       []byte
		asked, got string
	}{{movClip, "mp4", "mov"}, {tinyMP4(t), "MOV", "mp4"}} {
		r = postOptions(t, f.base+"/watermarks/videos", f.keyA, "", c.clip, "video.mp4", `{"film":3}`,
			map[string]string{"output_format": c.asked})
		if r.status != 422 {
			t.Fatalf("output_format %s for a %s: %d, want 422", c.asked, c.got, r.status)
		}
		if p := decodeProblem(t, r); p.Code != "invalid_request" || !strings.Contains(p.Detail, "this video comes back as "+c.got) {
			t.Fatalf("output_format %s for a %s: %+v", c.asked, c.got, p)
		}
	}
	r = postOptions(t, f.base+"/watermarks/videos", f.keyA, "", movClip, "video.mp4", `{"film":2}`,
		map[string]string{"output_format": "mov"})
	if r.status != 200 || r.header.Get("Content-Type") != "video/quicktime" ||
		r.header.Get("Content-Disposition") != `attachment; filename="video-watermarked.mov"` ||
		len(r.body) < 12 || string(r.body[4:10]) != "ftypqt" {
		t.Fatalf("MOV embed: %d %v %q; want 200, a QuickTime file typed and named as one", r.status, r.header,
			r.body[:min(len(r.body), 12)])
	}
	if a := call(t, "GET", f.base+"/assets/"+r.header.Get("X-Asset-ID")+"/content", f.keyA, nil); a.status != 200 ||
		a.header.Get("Content-Type") != "video/quicktime" ||
		a.header.Get("Content-Disposition") != `attachment; filename="video-watermarked.mov"` || !bytes.Equal(a.body, r.body) {
		t.Fatalf("MOV asset download: %d %v; want the same QuickTime file, typed and named as one", a.status, a.header)
	}
	if after, held := balance(t, f, f.orgA); after != before-3 || held != 0 {
		t.Fatalf("balance %d held %d; want %d and nothing held", after, held, before-3)
	}
}

// TestUnmarkableVideosRefusedUncharged: a 176x144 clip (under half a tile of the mark, which no detection read
// back on real footage) is refused by the synchronous and the asynchronous video embed when it is probed, before
// anything is held: 422 invalid_video naming its size and the minimum. Before, it was marked and charged and
// detect_video found no mark; then (until the check moved into the probe) it was accepted, credits held, and its
// job failed after running. Its detection is read like any video's: found unmarked. A clip with an alpha channel
// (PNG frames in a MOV, rgba) is refused too, saying so, by its job: before, it came back opaque and charged.
func TestUnmarkableVideosRefusedUncharged(t *testing.T) {
	t.Parallel()
	out := filepath.Join(t.TempDir(), "small.mp4")
	cmd := exec.Command("ffmpeg", "-v", "error", "-f", "lavfi", "-i", "testsrc2=size=176x144:rate=10", "-t", "1",
		"-pix_fmt", "yuv420p", "-c:v", "libx264", "-preset", "ultrafast", out)
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("ffmpeg: %v: %s", err, msg)
	}
	clip, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t)
	before, _ := balance(t, f, f.orgA)
	for _, path := range []string{"/watermarks/videos", "/watermarks/videos/async"} {
		r := postFile(t, f.base+path, f.keyA, clip, "small.mp4", `{"s":1}`)
		if p := decodeProblem(t, r); r.status != 422 || p.Code != "invalid_video" || !strings.Contains(p.Detail, "frames of 176x144") ||
			!strings.Contains(p.Detail, codec.VideoSizeRule()) {
			t.Fatalf("%s of 176x144 frames: %d %s; want 422 invalid_video naming the size and the minimum", path, r.status, r.body)
		}
	}
	if after, held := balance(t, f, f.orgA); after != before || held != 0 {
		t.Fatalf("balance %d held %d after the refusals; want %d, nothing held", after, held, before)
	}
	d := postFile(t, f.base+"/watermarks/videos/detect", f.keyA, clip, "small.mp4", "")
	var det struct {
		Watermarked *bool `json:"watermarked"`
	}
	if d.status != 200 || json.Unmarshal(d.body, &det) != nil || det.Watermarked == nil || *det.Watermarked {
		t.Fatalf("detection of 176x144 frames: %d %s; want 200, not watermarked", d.status, d.body)
	}
	before, _ = balance(t, f, f.orgA) // the detection is charged
	alphaPath := filepath.Join(t.TempDir(), "alpha.mov")
	if msg, err := exec.Command("ffmpeg", "-v", "error", "-f", "lavfi", "-i", "testsrc2=size=320x256:rate=5", "-t", "1",
		"-c:v", "png", "-pix_fmt", "rgba", "-f", "mov", alphaPath).CombinedOutput(); err != nil {
		t.Fatalf("ffmpeg: %v: %s", err, msg)
	}
	alpha, err := os.ReadFile(alphaPath)
	if err != nil {
		t.Fatal(err)
	}
	// Refused by the request's probe, before anything is held: no job is made of it.
	r := postFile(t, f.base+"/watermarks/videos", f.keyA, alpha, "alpha.mov", `{"s":3}`)
	if p := decodeProblem(t, r); r.status != 422 || p.Code != "invalid_video" || !strings.Contains(p.Detail, "alpha channel") ||
		strings.Contains(string(r.body), `"status":"`) {
		t.Fatalf("embed of a video with alpha: %d %.300q; want 422 invalid_video naming the alpha channel, no job", r.status, r.body)
	}
	if after, held := balance(t, f, f.orgA); after != before || held != 0 {
		t.Fatalf("balance %d held %d after the refusals; want %d, nothing held", after, held, before)
	}
}

// TestDocumentEmbedAndDetect round-trips a PDF through /watermarks/documents and
// /watermarks/documents/detect, both answering in the request.
func TestDocumentEmbedAndDetect(t *testing.T) {
	t.Parallel()
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
	// Marked, then signed (what docs/errors.md tells the owner of a document to be signed to do): the signed
	// copy is still read, though it is refused for marking, and the refusal, uncharged, says why.
	signed := signPDF(t, r.body)
	d = postFile(t, f.base+"/watermarks/documents/detect", f.keyA, signed, "signed.pdf", "")
	if d.status != 200 || json.Unmarshal(d.body, &det) != nil || !det.Watermarked || det.WatermarkID == nil || *det.WatermarkID != wm {
		t.Fatalf("detection of the signed copy: %d %s; want 200 and watermark %s", d.status, d.body, wm)
	}
	if p := decodeProblem(t, postFile(t, f.base+"/watermarks/documents", f.keyA, signed, "signed.pdf", `{"doc":3}`)); p.Code != "invalid_document" ||
		!strings.Contains(p.Detail, "cannot be watermarked: the PDF is digitally signed") {
		t.Fatalf("embed of the signed copy: %+v; want invalid_document saying it is signed", p)
	}
	// Marked, then protected with an owner password (opens without one): still read.
	protected := mutoolClean(t, r.body, "-E", "aes-256", "-O", "owner-secret")
	d = postFile(t, f.base+"/watermarks/documents/detect", f.keyA, protected, "protected.pdf", "")
	if d.status != 200 || json.Unmarshal(d.body, &det) != nil || !det.Watermarked || det.WatermarkID == nil || *det.WatermarkID != wm {
		t.Fatalf("detection of the protected copy: %d %s; want 200 and watermark %s", d.status, d.body, wm)
	}
	// A file that is not a PDF is refused before anything is charged, by the embed and by the detection, each
	// saying what it could not do.
	bad := postFile(t, f.base+"/watermarks/documents", f.keyA, []byte("not a pdf at all"), "x.pdf", `{"doc":2}`)
	if bad.status != 422 || !bytes.Contains(bad.body, []byte(`"code":"invalid_document"`)) || !bytes.Contains(bad.body, []byte("cannot be watermarked")) {
		t.Fatalf("not a PDF: %d %s", bad.status, bad.body)
	}
	bad = postFile(t, f.base+"/watermarks/documents/detect", f.keyA, []byte("not a pdf at all"), "x.pdf", "")
	if p := decodeProblem(t, bad); bad.status != 422 || p.Code != "invalid_document" || !strings.HasPrefix(p.Detail, "the PDF cannot be checked for a watermark: ") {
		t.Fatalf("detection of not a PDF: %d %s; want 422 invalid_document, cannot be checked", bad.status, bad.body)
	}
	// An empty file is a PDF that cannot be read, as the route's other refusals say (it was 422 invalid_image,
	// "Invalid image"), and a file above the direct limit is not sent to an upload, which takes no larger PDF.
	bad = postFile(t, f.base+"/watermarks/documents", f.keyA, []byte{}, "empty.pdf", `{"doc":4}`)
	if p := decodeProblem(t, bad); bad.status != 422 || p.Code != "invalid_document" {
		t.Fatalf("empty PDF: %d %s; want 422 invalid_document", bad.status, bad.body)
	}
	bad = postFile(t, f.base+"/watermarks/documents", f.keyA, append([]byte("%PDF-1.7\n"), make([]byte, 20_000_000)...), "big.pdf", `{"doc":5}`)
	if p := decodeProblem(t, bad); bad.status != 413 || p.Code != "file_too_large" || strings.Contains(p.Detail, "send larger files through an upload") ||
		!strings.Contains(p.Detail, "a PDF embed takes no larger file, sent directly or through an upload") {
		t.Fatalf("PDF above 20 MB: %d %s; want 413 file_too_large saying an upload takes no larger PDF", bad.status, bad.body)
	}
	if after, held := balance(t, f, f.orgA); after != before-4 || held != 0 {
		t.Fatalf("balance %d held %d; want %d and nothing held", after, held, before-4)
	}
}

// mutoolClean is doc rewritten by mutool clean with flags.
func mutoolClean(t *testing.T, doc []byte, flags ...string) []byte {
	t.Helper()
	dir := t.TempDir()
	in, out := filepath.Join(dir, "in.pdf"), filepath.Join(dir, "out.pdf")
	if err := os.WriteFile(in, doc, 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := exec.Command("mutool", append(append([]string{"clean"}, flags...), in, out)...).CombinedOutput(); err != nil {
		t.Fatalf("mutool clean %v: %v: %s", flags, err, b)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// signPDF appends to doc, as an incremental update (mutool), what a signing tool adds: a signature field whose
// value is a signature dictionary with a /ByteRange, and the form's SigFlags. The signature's bytes are zeros:
// the service reads only that the document is signed.
func signPDF(t *testing.T, doc []byte) []byte {
	t.Helper()
	dir := t.TempDir()
	in, out, script := filepath.Join(dir, "in.pdf"), filepath.Join(dir, "signed.pdf"), filepath.Join(dir, "sign.js")
	const js = `var doc = new PDFDocument(scriptArgs[0]);
var sig = doc.addObject({Type: "Sig", Filter: "Adobe.PPKLite", SubFilter: "adbe.pkcs7.detached",
	ByteRange: [0, 100, 200, 300], Contents: doc.newString("0000")});
var field = doc.addObject({Type: "Annot", Subtype: "Widget", FT: "Sig", T: doc.newString("Signature1"),
	Rect: [0, 0, 0, 0], F: 132, V: sig});
doc.getTrailer().get("Root").put("AcroForm", {Fields: [field], SigFlags: 3});
doc.save(scriptArgs[1], "incremental");
`
	if err := os.WriteFile(in, doc, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(script, []byte(js), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := exec.Command("mutool", "run", script, in, out).CombinedOutput(); err != nil {
		t.Fatalf("mutool run: %v: %s", err, b)
	}
	signed, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(signed, doc) || !bytes.Contains(signed[len(doc):], []byte("/ByteRange")) {
		t.Fatalf("the signature was not appended to the document")
	}
	return signed
}

// TestVideoDetectFromUpload: a detect upload named .mp4 is a video upload: /watermarks/videos/detect/async
// uses it (an unmarked clip is reported unmarked), the document endpoint refuses it as another kind.
func TestVideoDetectFromUpload(t *testing.T) {
	t.Parallel()
	requireFFmpeg(t)
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
	// An empty file sent directly is a video that cannot be read (it was 422 invalid_image, "Invalid image").
	wantProblem(t, "empty video", postFile(t, f.base+"/watermarks/videos/detect", key, []byte{}, "empty.mp4", ""), 422, "invalid_video")
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

// assetMedia is what an asset record says about its file's media (our extension fields; absent where they do
// not apply, so pointers tell absent from zero).
type assetMedia struct {
	MediaType       string   `json:"media_type"`
	Format          string   `json:"format"`
	ContentType     string   `json:"content_type"`
	Kind            string   `json:"kind"`
	Width           *int     `json:"width"`
	Height          *int     `json:"height"`
	PageCount       *int     `json:"page_count"`
	FrameCount      *int64   `json:"frame_count"`
	DurationSeconds *float64 `json:"duration_seconds"`
}

func getAssetMedia(t *testing.T, f *fixture, key, id string) assetMedia {
	t.Helper()
	r := call(t, "GET", f.base+"/assets/"+id, key, nil)
	var a assetMedia
	if r.status != 200 || json.Unmarshal(r.body, &a) != nil {
		t.Fatalf("asset %s: %d %s", id, r.status, r.body)
	}
	return a
}

// TestDocumentIdempotencyUploadsAndRecords: PDFs get what images get. A synchronous embed replayed with its
// Idempotency-Key answers the same marked file and charges once, and the key with other data is 409; an
// embed and a synchronous detection by upload_id work, and a used upload is consumed; a keyed synchronous
// detection replays its result; both asset records are documents with their page count and no pixel,
// frame or duration fields.
func TestDocumentIdempotencyUploadsAndRecords(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	key := f.keyA
	before, _ := balance(t, f, f.orgA)
	doc := pdftest.Make(pdftest.Doc{Pages: 3})

	r := postMedia(t, f.base+"/watermarks/documents", key, "doc-order-1", doc, "contract.pdf", `{"contract":1}`)
	wm, out, src := r.header.Get("X-Watermark-ID"), r.header.Get("X-Asset-ID"), r.header.Get("X-Source-Asset-ID")
	if r.status != 200 || wm == "" || out == "" || src == "" || !bytes.HasPrefix(r.body, []byte("%PDF")) {
		t.Fatalf("keyed document embed: %d %v %.200s", r.status, r.header, r.body)
	}
	again := postMedia(t, f.base+"/watermarks/documents", key, "doc-order-1", doc, "contract.pdf", `{"contract":1}`)
	if again.status != 200 || !bytes.Equal(again.body, r.body) || again.header.Get("X-Asset-ID") != out ||
		again.header.Get("X-Request-ID") != r.header.Get("X-Request-ID") {
		t.Fatalf("replay: %d %v (same body %v)", again.status, again.header, bytes.Equal(again.body, r.body))
	}
	wantProblem(t, "same key, other data",
		postMedia(t, f.base+"/watermarks/documents", key, "doc-order-1", doc, "contract.pdf", `{"contract":2}`), 409, "idempotency_conflict")

	for id, kind := range map[string]string{out: "watermarked", src: "source"} {
		a := getAssetMedia(t, f, key, id)
		if a.Kind != kind || a.MediaType != "document" || a.Format != "PDF" || a.ContentType != "application/pdf" ||
			a.PageCount == nil || *a.PageCount != 3 || a.Width != nil || a.Height != nil || a.FrameCount != nil || a.DurationSeconds != nil {
			t.Fatalf("%s asset record %+v; want a 3-page PDF document without pixel, frame or duration fields", kind, a)
		}
	}

	// Embed by upload_id; the upload is then consumed.
	u := uploaded(t, f, key, "document", "handbook.pdf", doc)
	byUpload := postUpload(t, f.base+"/watermarks/documents", key, "", u.UploadID, `{"handbook":1}`)
	if byUpload.status != 200 || !bytes.HasPrefix(byUpload.body, []byte("%PDF")) || byUpload.header.Get("X-Watermark-ID") == "" {
		t.Fatalf("embed by upload: %d %v", byUpload.status, byUpload.header)
	}
	if g := getUpload(t, f, key, u.UploadID); g.Status != "consumed" {
		t.Fatalf("upload after use: %+v", g)
	}
	wantProblem(t, "used upload", postUpload(t, f.base+"/watermarks/documents", key, "", u.UploadID, `{"handbook":2}`), 409, "upload_consumed")

	// Synchronous detection by upload_id, and with a key (recorded, replayed, charged once).
	d := uploaded(t, f, key, "detect", "received.pdf", r.body)
	det := postUpload(t, f.base+"/watermarks/documents/detect", key, "", d.UploadID, "")
	var got detection
	if det.status != 200 || json.Unmarshal(det.body, &got) != nil || !got.Watermarked || got.WatermarkID == nil || *got.WatermarkID != wm {
		t.Fatalf("detect by upload: %d %s; want %s", det.status, det.body, wm)
	}
	k1 := postMedia(t, f.base+"/watermarks/documents/detect", key, "doc-check-1", byUpload.body, "h.pdf", "")
	k2 := postMedia(t, f.base+"/watermarks/documents/detect", key, "doc-check-1", byUpload.body, "h.pdf", "")
	if k1.status != 200 || k2.status != 200 || !bytes.Equal(k1.body, k2.body) || !bytes.Contains(k1.body, []byte(byUpload.header.Get("X-Watermark-ID"))) {
		t.Fatalf("keyed detection and replay: %d %s / %d %s", k1.status, k1.body, k2.status, k2.body)
	}
	// Charged: the keyed embed once, the upload embed, the detection by upload, the keyed detection once.
	if after, held := balance(t, f, f.orgA); after != before-4 || held != 0 {
		t.Fatalf("balance %d held %d; want %d and nothing held", after, held, before-4)
	}
}

// finished is the outcome of a request that may answer in the request or with a job receipt (a synchronous
// request past 20 s, a loaded machine): the result either way.
func finished(t *testing.T, f *fixture, key string, r response) response {
	t.Helper()
	if r.status == 202 {
		return waitResult(t, f, key, decodeReceipt(t, r).ResultURL)
	}
	return r
}

// TestVideoIdempotencyUploadsAndRecords: videos get what images get. An async embed replayed with its
// Idempotency-Key answers the same job and charges once, the key with other data is 409; both asset records
// are videos with the clip's frame size, frame count and duration and no page count; a synchronous embed and
// a detection by upload_id work and consume their uploads; a keyed detection replays its result.
func TestVideoIdempotencyUploadsAndRecords(t *testing.T) {
	t.Parallel()
	requireFFmpeg(t)
	clip := tinyMP4(t) // 512x384, 10 frames in 1 s
	f := newFixture(t)
	key := f.keyA
	before, _ := balance(t, f, f.orgA)

	r := postMedia(t, f.base+"/watermarks/videos/async", key, "film-order-1", clip, "trailer.mp4", `{"film":1}`)
	if r.status != 202 {
		t.Fatalf("keyed video embed: %d %s", r.status, r.body)
	}
	rc := decodeReceipt(t, r)
	again := postMedia(t, f.base+"/watermarks/videos/async", key, "film-order-1", clip, "trailer.mp4", `{"film":1}`)
	if again.status != 202 && again.status != 200 || decodeReceipt(t, again).RequestID != rc.RequestID {
		t.Fatalf("replay: %d %s; want the receipt of %s", again.status, again.body, rc.RequestID)
	}
	wantProblem(t, "same key, other data",
		postMedia(t, f.base+"/watermarks/videos/async", key, "film-order-1", clip, "trailer.mp4", `{"film":2}`), 409, "idempotency_conflict")
	res := waitResult(t, f, key, rc.ResultURL)
	wm, out, src := res.header.Get("X-Watermark-ID"), res.header.Get("X-Asset-ID"), res.header.Get("X-Source-Asset-ID")
	if res.status != 200 || wm == "" || out == "" || src == "" {
		t.Fatalf("embed result: %d %v", res.status, res.header)
	}
	for id, kind := range map[string]string{out: "watermarked", src: "source"} {
		a := getAssetMedia(t, f, key, id)
		if a.Kind != kind || a.MediaType != "video" || a.Format != "MP4" || a.ContentType != "video/mp4" ||
			a.Width == nil || *a.Width != 512 || a.Height == nil || *a.Height != 384 || a.FrameCount == nil || *a.FrameCount != 10 ||
			a.DurationSeconds == nil || *a.DurationSeconds < 0.95 || *a.DurationSeconds > 1.05 || a.PageCount != nil {
			t.Fatalf("%s asset record %+v; want a 512x384 MP4 video of 10 frames and 1 s, without page count", kind, a)
		}
	}

	// A synchronous embed by upload_id; the upload is then consumed.
	u := uploaded(t, f, key, "video", "teaser.mp4", clip)
	byUpload := finished(t, f, key, postUpload(t, f.base+"/watermarks/videos", key, "", u.UploadID, `{"teaser":1}`))
	if byUpload.status != 200 || byUpload.header.Get("Content-Type") != "video/mp4" || byUpload.header.Get("X-Watermark-ID") == "" {
		t.Fatalf("embed by upload: %d %v %.200s", byUpload.status, byUpload.header, byUpload.body)
	}
	if g := getUpload(t, f, key, u.UploadID); g.Status != "consumed" {
		t.Fatalf("upload after use: %+v", g)
	}
	wantProblem(t, "used upload", postUpload(t, f.base+"/watermarks/videos", key, "", u.UploadID, `{"teaser":2}`), 409, "upload_consumed")

	// Detection of the first output by upload_id with a key: the replay answers the same result, charged once.
	d := uploaded(t, f, key, "detect", "seen.mp4", res.body)
	k1 := finished(t, f, key, postUpload(t, f.base+"/watermarks/videos/detect", key, "film-check-1", d.UploadID, ""))
	k2 := finished(t, f, key, postUpload(t, f.base+"/watermarks/videos/detect", key, "film-check-1", d.UploadID, ""))
	var got detection
	if k1.status != 200 || json.Unmarshal(k1.body, &got) != nil || !got.Watermarked || got.WatermarkID == nil || *got.WatermarkID != wm {
		t.Fatalf("detection by upload: %d %s; want %s", k1.status, k1.body, wm)
	}
	if k2.status != 200 || !bytes.Equal(k1.body, k2.body) {
		t.Fatalf("keyed detection replay: %d %s, first %s", k2.status, k2.body, k1.body)
	}
	// Charged: the keyed embed once (one started minute), the upload embed, the detection once.
	if after, held := balance(t, f, f.orgA); after != before-3 || held != 0 {
		t.Fatalf("balance %d held %d; want %d and nothing held", after, held, before-3)
	}
}

// TestDocumentWithSharedPageTreeNodeRefusedUncharged: a PDF whose page tree names one intermediate node twice
// (2^k pages from k such nodes) is refused by the synchronous embed and detection with 422 invalid_document
// naming the fault, before any page is rendered, and nothing is charged or held. (A page named more than once,
// as `mutool clean -gggg` writes identical pages, is accepted and processed once: codec/pdf.)
func TestDocumentWithSharedPageTreeNodeRefusedUncharged(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	before, _ := balance(t, f, f.orgA)
	doc := pdftest.SharedNode()
	for _, c := range []struct{ what, path, data string }{
		{"embed", "/watermarks/documents", `{"doc":1}`},
		{"detect", "/watermarks/documents/detect", ""},
	} {
		r := postFile(t, f.base+c.path, f.keyA, doc, "repeated.pdf", c.data)
		if r.status != 422 || !bytes.Contains(r.body, []byte(`"invalid_document"`)) || !bytes.Contains(r.body, []byte("more than once")) {
			t.Fatalf("%s: %d %s; want 422 invalid_document saying the node is named more than once", c.what, r.status, r.body)
		}
	}
	if after, held := balance(t, f, f.orgA); after != before || held != 0 {
		t.Fatalf("balance %d held %d after the refusals; want %d, nothing held", after, held, before)
	}
}

// TestDocumentWithManyTokensRefusedUncharged: a 17 kB PDF whose object stream inflates to 16 million syntax
// tokens (the parser's time and memory grow with each: codec/pdf's MaxTokens) is refused before it is parsed
// with 413 document_too_large naming the tokens (and what could not be done: watermarked, or checked), by the
// synchronous embed and detection and by the edge's probe of an asynchronous detection (no job is made), and
// nothing is charged or held.
func TestDocumentWithManyTokensRefusedUncharged(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	before, _ := balance(t, f, f.orgA)
	junk := "100 0 [" + strings.Repeat("[]", 8_000_000) + "]"
	doc := pdftest.Make(pdftest.Doc{Pages: 1, ExtraObjs: []string{pdftest.Flate("/Type /ObjStm /N 1 /First 6", []byte(junk))}})
	for _, c := range []struct{ what, path, data, verb string }{
		{"embed", "/watermarks/documents", `{"doc":1}`, "watermarked"},
		{"detect", "/watermarks/documents/detect", "", "checked for a watermark"},
		{"async detect", "/watermarks/documents/detect/async", "", "checked for a watermark"},
	} {
		r := postFile(t, f.base+c.path, f.keyA, doc, "tokens.pdf", c.data)
		if p := decodeProblem(t, r); r.status != 413 || p.Code != "document_too_large" || !strings.Contains(p.Detail, "syntax tokens") ||
			!strings.HasPrefix(p.Detail, "the PDF cannot be "+c.verb+": ") {
			t.Fatalf("%s: %d %s; want 413 document_too_large: the PDF cannot be %s, naming the syntax tokens", c.what, r.status, r.body, c.verb)
		}
	}
	if after, held := balance(t, f, f.orgA); after != before || held != 0 {
		t.Fatalf("balance %d held %d after the refusals; want %d, nothing held", after, held, before)
	}
}

// requireFFmpeg fails the test where ffmpeg is missing: the video tests need the real one, which
// scripts/setup.sh installs (a skip would hide that a machine cannot run them).
func requireFFmpeg(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("ffmpeg"); err != nil {
		t.Fatal("ffmpeg is not installed (scripts/setup.sh installs it)")
	}
}
