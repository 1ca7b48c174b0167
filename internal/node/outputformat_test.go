package node_test

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"mime/multipart"
	"strings"
	"testing"

	"golang.org/x/image/webp"

	"filigrane/codec/imageio/imageiotest"
)

// postOptions posts an embed or detect form whose options are sent as form fields, the file named filename.
func postOptions(t *testing.T, url, key, idem string, file []byte, filename, data string, fields map[string]string) response {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	if data != "" {
		mw.WriteField("data", data)
	}
	for k, v := range fields {
		mw.WriteField(k, v)
	}
	fw, err := mw.CreateFormFile("file", filename)
	if err != nil {
		t.Fatal(err)
	}
	fw.Write(file)
	mw.Close()
	return sendRaw(t, url, key, idem, mw.FormDataContentType(), buf.Bytes())
}

// withEXIF inserts an APP1 Exif segment holding tiff right after a JPEG's SOI marker.
func withEXIF(t *testing.T, jpg, tiff []byte) []byte {
	t.Helper()
	payload := append([]byte("Exif\x00\x00"), tiff...)
	seg := []byte{0xFF, 0xE1, 0, 0}
	binary.BigEndian.PutUint16(seg[2:], uint16(len(payload)+2))
	out := append([]byte{}, jpg[:2]...)
	out = append(out, seg...)
	out = append(out, payload...)
	return append(out, jpg[2:]...)
}

// detectID posts file to synchronous detection and returns the watermark id found ("" when none).
func detectID(t *testing.T, f *fixture, file []byte) string {
	t.Helper()
	d := post(t, f.base+"/watermarks/images/detect", f.keyA, "", file, "")
	var det detection
	if err := json.Unmarshal(d.body, &det); err != nil || d.status != 200 {
		t.Fatalf("detect: %d %s", d.status, d.body)
	}
	if !det.Watermarked || det.WatermarkID == nil {
		return ""
	}
	return *det.WatermarkID
}

// assetOf reads an asset record's format and content type through the API.
func assetOf(t *testing.T, f *fixture, id string) (format, contentType string) {
	t.Helper()
	r := call(t, "GET", f.base+"/assets/"+id, f.keyA, nil)
	var as struct {
		Format      string `json:"format"`
		ContentType string `json:"content_type"`
	}
	if err := json.Unmarshal(r.body, &as); err != nil || r.status != 200 {
		t.Fatalf("asset %s: %d %s", id, r.status, r.body)
	}
	return as.Format, as.ContentType
}

// TestEmbedOutputFormatJPEG: output_format=jpeg gives a JPEG (4:4:4, EXIF kept with orientation 1) whose mark
// reads back, an asset recorded as JPEG; the format is part of the Idempotency-Key's request; a bad value, the
// option on a detection and JPEG of a transparent image are refused and charge nothing.
func TestEmbedOutputFormatJPEG(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	cam := imageiotest.CameraEXIF(imageiotest.Camera{Orientation: 6, Make: "FiligraneCam", Model: "T1",
		DateTimeOriginal: "2026:05:04 09:00:00", GPSLatitude: [3][2]uint32{{48, 1}, {51, 1}, {0, 1}}})
	img := withEXIF(t, photo(t, 640, 480, 11), cam)
	before, _ := balance(t, f, f.orgA)

	r := postOptions(t, f.base+"/watermarks/images", f.keyA, "fmt-jpeg-0001", img, "camera.jpg", `{"a":1}`,
		map[string]string{"output_format": "jpeg"})
	if r.status != 200 {
		t.Fatalf("embed as jpeg: %d %s", r.status, r.body)
	}
	if ct, cd := r.header.Get("Content-Type"), r.header.Get("Content-Disposition"); ct != "image/jpeg" ||
		cd != `attachment; filename="camera-watermarked.jpg"` {
		t.Fatalf("Content-Type %q, Content-Disposition %q", ct, cd)
	}
	out, err := jpeg.Decode(bytes.NewReader(r.body))
	if err != nil {
		t.Fatalf("output is not a JPEG: %v", err)
	}
	// Orientation 6 was applied: the output is upright (480 x 640), with full-resolution chroma.
	if b := out.Bounds(); b.Dx() != 480 || b.Dy() != 640 {
		t.Fatalf("output is %v, want the upright 480x640", b)
	}
	if y, ok := out.(*image.YCbCr); !ok || y.SubsampleRatio != image.YCbCrSubsampleRatio444 {
		t.Fatalf("output chroma is not 4:4:4 (%T)", out)
	}
	exif, err := imageiotest.ReadEXIF(imageiotest.EXIFOf(r.body))
	if err != nil {
		t.Fatalf("output EXIF: %v", err)
	}
	if mk := exif.String(exif.IFD0, 0x010F); mk != "FiligraneCam" {
		t.Errorf("output EXIF Make %q", mk)
	}
	if o, ok := exif.Uint(exif.IFD0, 0x0112); !ok || o != 1 {
		t.Errorf("output EXIF orientation %d %v, want 1", o, ok)
	}
	wm, assetID := r.header.Get("X-Watermark-ID"), r.header.Get("X-Asset-ID")
	if got := detectID(t, f, r.body); got != wm || wm == "" {
		t.Fatalf("detection of the JPEG output found %q, want %q", got, wm)
	}
	if format, ct := assetOf(t, f, assetID); format != "JPEG" || ct != "image/jpeg" {
		t.Fatalf("watermarked asset format %q content type %q", format, ct)
	}
	content := call(t, "GET", f.base+"/assets/"+assetID+"/content", f.keyA, nil)
	if content.status != 200 || content.header.Get("Content-Type") != "image/jpeg" || !bytes.Equal(content.body, r.body) {
		t.Fatalf("asset content: %d %q", content.status, content.header.Get("Content-Type"))
	}

	// jpg names the same format: a replay, answered with the same file.
	replay := postOptions(t, f.base+"/watermarks/images", f.keyA, "fmt-jpeg-0001", img, "camera.jpg", `{"a":1}`,
		map[string]string{"output_format": "JPG"})
	if replay.status != 200 || !bytes.Equal(replay.body, r.body) {
		t.Fatalf("replay as JPG: %d", replay.status)
	}
	for _, other := range []string{"webp", "png", ""} {
		fields := map[string]string{}
		if other != "" {
			fields["output_format"] = other
		}
		c := postOptions(t, f.base+"/watermarks/images", f.keyA, "fmt-jpeg-0001", img, "camera.jpg", `{"a":1}`, fields)
		if p := decodeProblem(t, c); c.status != 409 || p.Code != "idempotency_conflict" {
			t.Fatalf("same key as %q: %d %+v", other, c.status, p)
		}
	}

	bad := postOptions(t, f.base+"/watermarks/images", f.keyA, "", img, "camera.jpg", `{"a":1}`,
		map[string]string{"output_format": "gif"})
	if p := decodeProblem(t, bad); bad.status != 422 || p.Code != "invalid_request" || !strings.Contains(p.Detail, "output_format") {
		t.Fatalf("output_format=gif: %d %+v", bad.status, p)
	}
	det := postOptions(t, f.base+"/watermarks/images/detect", f.keyA, "", r.body, "x.jpg", "",
		map[string]string{"output_format": "jpeg"})
	if p := decodeProblem(t, det); det.status != 422 || p.Code != "invalid_request" {
		t.Fatalf("output_format on a detection: %d %+v", det.status, p)
	}

	// A picture with transparent pixels cannot be a JPEG: 422, refunded.
	rgba := image.NewNRGBA(image.Rect(0, 0, 320, 320))
	for i := range rgba.Pix {
		rgba.Pix[i] = uint8(i * 7)
	}
	rgba.SetNRGBA(3, 3, color.NRGBA{10, 20, 30, 0})
	var pngBuf bytes.Buffer
	if err := png.Encode(&pngBuf, rgba); err != nil {
		t.Fatal(err)
	}
	alpha := postOptions(t, f.base+"/watermarks/images", f.keyA, "", pngBuf.Bytes(), "logo.png", `{"a":1}`,
		map[string]string{"output_format": "jpeg"})
	// The job ran and failed: the failed-job problem body, whose status is the job's.
	var failed struct{ Status, Code, Detail string }
	if err := json.Unmarshal(alpha.body, &failed); err != nil || alpha.status != 422 || failed.Status != "failed" ||
		failed.Code != "invalid_image" || !strings.Contains(failed.Detail, "transparent") {
		t.Fatalf("jpeg of a transparent png: %d %s", alpha.status, alpha.body)
	}

	// The embed and its detection are charged; the replay, the conflicts, the refusals and the failed job are not.
	after, held := balance(t, f, f.orgA)
	if before-after != 2 || held != 0 {
		t.Fatalf("charged %d credits (held %d), want 1 embed and 1 detection", before-after, held)
	}
}

// TestEmbedOutputFormatWebPAsync: output_format=webp in the query of an async embed; the job's result is
// served as image/webp, a WebP whose mark reads back. As a form field beside an upload_id, it is honoured too.
func TestEmbedOutputFormatWebPAsync(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	img := photo(t, 640, 480, 12)
	r := post(t, f.base+"/watermarks/images/async?output_format=WebP", f.keyA, "", img, `{"b":2}`)
	if r.status != 202 {
		t.Fatalf("async embed as webp: %d %s", r.status, r.body)
	}
	res := waitResult(t, f, f.keyA, decodeReceipt(t, r).ResultURL)
	if res.status != 200 || res.header.Get("Content-Type") != "image/webp" ||
		res.header.Get("Content-Disposition") != `attachment; filename="holiday_photo-watermarked.webp"` {
		t.Fatalf("result: %d %v", res.status, res.header)
	}
	out, err := webp.Decode(bytes.NewReader(res.body))
	if err != nil {
		t.Fatalf("result is not a WebP: %v", err)
	}
	if b := out.Bounds(); b.Dx() != 640 || b.Dy() != 480 {
		t.Fatalf("result is %v", b)
	}
	wm := res.header.Get("X-Watermark-ID")
	if got := detectID(t, f, res.body); got != wm || wm == "" {
		t.Fatalf("detection of the WebP result found %q, want %q", got, wm)
	}
	if format, ct := assetOf(t, f, res.header.Get("X-Asset-ID")); format != "WEBP" || ct != "image/webp" {
		t.Fatalf("watermarked asset format %q content type %q", format, ct)
	}

	// Through an upload, the option as a form field: a bad value is refused before the upload is claimed (it
	// stays usable), then webp is honoured.
	u := uploaded(t, f, f.keyA, "image", "scan.jpg", photo(t, 600, 400, 13))
	bad := postFields(t, f.base+"/watermarks/images", f.keyA, "", nil, "upload_id", u.UploadID, "data", `{"c":3}`,
		"output_format", "tiff")
	wantProblem(t, "output_format=tiff with an upload", bad, 422, "invalid_request")
	if got := getUpload(t, f, f.keyA, u.UploadID); got.Status != "received" {
		t.Fatalf("upload after a refused option: %+v", got)
	}
	good := postFields(t, f.base+"/watermarks/images", f.keyA, "", nil, "upload_id", u.UploadID, "data", `{"c":3}`,
		"output_format", "webp")
	if good.status != 200 || good.header.Get("Content-Type") != "image/webp" ||
		good.header.Get("Content-Disposition") != `attachment; filename="scan-watermarked.webp"` {
		t.Fatalf("embed of an upload as webp: %d %v", good.status, good.header)
	}
	if _, err := webp.Decode(bytes.NewReader(good.body)); err != nil {
		t.Fatalf("upload's result is not a WebP: %v", err)
	}
}
