package node_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image"
	"image/jpeg"
	"testing"

	"golang.org/x/image/bmp"
)

// TestImageTypesByName: a batch item and a detect upload are typed by their filename's extension (spec 4.4:
// "an image type"), and every image format a direct request takes is named there too. BMP and Netpbm files
// were embedded and detected when sent directly, but a batch item `scan.bmp` was 422 unsupported_file_type
// and a detect upload `scan.bmp` 422 invalid_request. A Netpbm source is recorded as
// image/x-portable-anymap (it was "image/pnm", which is no registered type). Uploads of a kind are also read
// only with the scope that creates them, and the scope refusal is worded for the kind.
func TestImageTypesByName(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	key := f.dev.Secret
	src, err := jpeg.Decode(bytes.NewReader(photo(t, 320, 256, 31)))
	if err != nil {
		t.Fatal(err)
	}
	var bmpFile bytes.Buffer
	if err := bmp.Encode(&bmpFile, src); err != nil {
		t.Fatal(err)
	}
	ppm := netpbm(src)

	// A key without watermarks:embed is told which scope an image upload needs, in English.
	noEmbed := sendJSON(t, "POST", f.base+"/uploads", f.keyB, `{"kind":"image","filename":"scan.bmp","size":10}`)
	if wantProblem(t, "image upload with a detect key", noEmbed, 403, "insufficient_scope"); decodeProblem(t, noEmbed).Detail != "an image upload needs the scope watermarks:embed" {
		t.Fatalf("scope refusal detail: %s", noEmbed.body)
	}

	// Reading an upload needs the scope that creates its kind: a detect-only key does not read an image
	// upload (and its signed URL), as it does not read an embed job's status; it reads a detect upload.
	img := createUpload(t, f, f.keyExpiring, "image", "scan.bmp", 10)
	det := createUpload(t, f, f.keyExpiring, "detect", "scan.bmp", 10)
	wantProblem(t, "image upload read with a detect key", call(t, "GET", f.base+"/uploads/"+img.UploadID, f.keyB, nil), 403, "insufficient_scope")
	if r := call(t, "GET", f.base+"/uploads/"+det.UploadID, f.keyB, nil); r.status != 200 {
		t.Fatalf("detect upload read with a detect key: %d %s", r.status, r.body)
	}

	// Detection of a BMP through a detect upload.
	u := uploaded(t, f, key, "detect", "scan.bmp", bmpFile.Bytes())
	if r := postUpload(t, f.base+"/watermarks/images/detect", key, "", u.UploadID, ""); r.status != 200 {
		t.Fatalf("detect a BMP upload: %d %s", r.status, r.body)
	}

	// A batch of a BMP and a PPM: both are embedded.
	files := [][]byte{bmpFile.Bytes(), ppm}
	r := sendBatch(t, "POST", f.base+"/watermarks/batches", key, "image-types-1",
		`{"items":[`+itemsJSON([]string{"scan.bmp", "scan.ppm"}, []int{len(files[0]), len(files[1])})+`]}`)
	if r.status != 201 {
		t.Fatalf("create a batch of a .bmp and a .ppm: %d %s", r.status, r.body)
	}
	b := decodeBatch(t, r)
	for i, it := range b.Items {
		if it.Upload == nil {
			t.Fatalf("item %d has no upload: %s", i, r.body)
		}
		if p := putFile(t, it.Upload.URL, files[i], putOpts{}); p.status != 200 {
			t.Fatalf("PUT item %d: %d %s", i, p.status, p.body)
		}
	}
	if r := sendBatch(t, "POST", f.base+"/watermarks/batches/"+b.BatchID+"/start", key, "", ""); r.status != 202 {
		t.Fatalf("start: %d %s", r.status, r.body)
	}
	done := waitBatch(t, &batchFixture{base: f.base, key: key}, b.BatchID, "completed", "failed")
	for i, it := range done.Items {
		if it.Status != "succeeded" || it.RequestID == nil {
			t.Fatalf("item %d (%s) ended %s: %+v", i, it.Filename, it.Status, done)
		}
	}

	// The PPM's source asset names a registered MIME type, also on its download.
	rc := decodeReceipt(t, call(t, "GET", f.base+"/watermarks/jobs/"+*done.Items[1].RequestID, key, nil))
	if rc.SourceAssetID == nil {
		t.Fatalf("the PPM item's job has no source asset: %s", rc.raw)
	}
	ar := call(t, "GET", f.base+"/assets/"+*rc.SourceAssetID, key, nil)
	var asset struct {
		Format      string `json:"format"`
		ContentType string `json:"content_type"`
	}
	if err := json.Unmarshal(ar.body, &asset); err != nil || ar.status != 200 {
		t.Fatalf("source asset: %d %s %v", ar.status, ar.body, err)
	}
	if asset.ContentType != "image/x-portable-anymap" {
		t.Fatalf("PPM source content_type %q, want image/x-portable-anymap (%s)", asset.ContentType, ar.body)
	}
	if dl := call(t, "GET", f.base+"/assets/"+*rc.SourceAssetID+"/content", key, nil); dl.header.Get("Content-Type") != "image/x-portable-anymap" ||
		!bytes.Equal(dl.body, ppm) {
		t.Fatalf("PPM source download: %d %q, %d bytes", dl.status, dl.header.Get("Content-Type"), len(dl.body))
	}
}

// netpbm encodes img as a binary PPM (P6).
func netpbm(img image.Image) []byte {
	bd := img.Bounds()
	var b bytes.Buffer
	fmt.Fprintf(&b, "P6\n%d %d\n255\n", bd.Dx(), bd.Dy())
	for y := bd.Min.Y; y < bd.Max.Y; y++ {
		for x := bd.Min.X; x < bd.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			b.Write([]byte{byte(r >> 8), byte(g >> 8), byte(bl >> 8)})
		}
	}
	return b.Bytes()
}
