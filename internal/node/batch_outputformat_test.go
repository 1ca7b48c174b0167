package node_test

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"image/jpeg"
	"io"
	"strings"
	"testing"

	"golang.org/x/image/webp"
)

// batchDetect runs an async image detection of file and returns the watermark id found ("" when none). Async:
// a synchronous detection watches for the client's disconnect, which the fixture's in-memory listener cannot
// wake (util_test.go).
func batchDetect(t *testing.T, f *batchFixture, file []byte) string {
	t.Helper()
	d := post(t, f.base+"/watermarks/images/detect/async", f.key, "", file, "")
	if d.status != 202 {
		t.Fatalf("detect: %d %s", d.status, d.body)
	}
	res := waitResult(t, &fixture{n: f.n, base: f.base, clk: f.clk}, f.key, decodeReceipt(t, d).ResultURL)
	var det detection
	if err := json.Unmarshal(res.body, &det); err != nil || res.status != 200 {
		t.Fatalf("detection result: %d %s", res.status, res.body)
	}
	if !det.Watermarked || det.WatermarkID == nil {
		return ""
	}
	return *det.WatermarkID
}

// TestBatchOutputFormat: a JSON batch with output_format jpeg and an archive gives JPEG results whose marks
// read back, archive members named .jpg (a hidden character of an item's filename, kept as sent in the batch,
// dropped from its member's name), and leaves its PDF a PDF; the format is part of the batch key's
// request; a bad value creates nothing; a zip batch's manifest takes the option too (webp).
func TestBatchOutputFormat(t *testing.T) {
	t.Parallel()
	f := newBatchFixture(t, "scale", 100)
	url := f.base + "/watermarks/batches"
	a, b, doc := photo(t, 320, 320, 21), photo(t, 300, 280, 22), tinyPDF()
	items := itemsJSON([]string{"a.jpg", "b\u200b.png", "report.pdf"}, []int{len(a), len(b), len(doc)})

	r := sendBatch(t, "POST", url, f.key, "fmt-batch-01", `{"output_format":"gif","items":[`+items+`]}`)
	if p := decodeProblem(t, r); r.status != 422 || p.Code != "invalid_request" || !strings.Contains(p.Detail, "output_format") {
		t.Fatalf("output_format gif: %d %+v", r.status, p)
	}
	if r := sendBatch(t, "GET", url, f.key, "", ""); r.status != 200 || !strings.Contains(string(r.body), `"data":[]`) {
		t.Fatalf("a refused request created a batch: %s", r.body)
	}

	body := `{"archive":true,"output_format":"jpeg","items":[` + items + `]}`
	r = sendBatch(t, "POST", url, f.key, "fmt-batch-01", body)
	if r.status != 201 || !strings.Contains(string(r.body), `"output_format":"jpeg"`) {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	draft := decodeBatch(t, r)
	// jpg names the same format: a replay. Another format, or none (png), is another request.
	if r := sendBatch(t, "POST", url, f.key, "fmt-batch-01", strings.Replace(body, `"jpeg"`, `"JPG"`, 1)); r.status != 200 ||
		decodeBatch(t, r).BatchID != draft.BatchID {
		t.Fatalf("replay as JPG: %d %s", r.status, r.body)
	}
	for _, other := range []string{`"output_format":"webp",`, `"output_format":"png",`, ``} {
		c := sendBatch(t, "POST", url, f.key, "fmt-batch-01", strings.Replace(body, `"output_format":"jpeg",`, other, 1))
		if p := decodeProblem(t, c); c.status != 409 || p.Code != "idempotency_conflict" {
			t.Fatalf("same key with %q: %d %+v", other, c.status, p)
		}
	}

	for i, file := range [][]byte{a, b, doc} {
		if r := putFile(t, draft.Items[i].Upload.URL, file, putOpts{}); r.status != 200 {
			t.Fatalf("PUT item %d: %d %s", i, r.status, r.body)
		}
	}
	if r := sendBatch(t, "POST", url+"/"+draft.BatchID+"/start", f.key, "", ""); r.status != 202 {
		t.Fatalf("start: %d %s", r.status, r.body)
	}
	done := waitBatch(t, f, draft.BatchID, "completed", "failed")
	if done.Status != "completed" || done.Counts["succeeded"] != 3 || *done.ArchiveStatus != "ready" {
		t.Fatalf("ended %s %v archive %v: %+v", done.Status, done.Counts, done.ArchiveStatus, done.Items)
	}
	results := map[string][]byte{}
	for i, it := range done.Items {
		res := call(t, "GET", f.base+it.ResultURL, f.key, nil)
		if res.status != 200 {
			t.Fatalf("item %d result: %d %s", i, res.status, res.body)
		}
		ct := res.header.Get("Content-Type")
		if i == 2 {
			if ct != "application/pdf" || !bytes.HasPrefix(res.body, []byte("%PDF")) {
				t.Fatalf("the PDF item's result is %q", ct)
			}
		} else {
			if ct != "image/jpeg" {
				t.Fatalf("item %d result is %q, want image/jpeg", i, ct)
			}
			if _, err := jpeg.Decode(bytes.NewReader(res.body)); err != nil {
				t.Fatalf("item %d result is not a JPEG: %v", i, err)
			}
			if wm := res.header.Get("X-Watermark-ID"); wm == "" || batchDetect(t, f, res.body) != wm {
				t.Fatalf("item %d: the JPEG's mark does not read back as %q", i, wm)
			}
		}
		results[it.Filename] = res.body
	}

	r = sendBatch(t, "GET", f.base+done.ArchiveURL, f.key, "", "")
	if r.status != 200 {
		t.Fatalf("archive: %d %s", r.status, r.body)
	}
	zr, err := zip.NewReader(bytes.NewReader(r.body), int64(len(r.body)))
	if err != nil {
		t.Fatal(err)
	}
	if done.Items[1].Filename != "b\u200b.png" {
		t.Fatalf("item 1's filename %+q, want it as sent", done.Items[1].Filename)
	}
	want := map[string]string{"000-a-watermarked.jpg": "a.jpg", "001-b-watermarked.jpg": "b\u200b.png", "002-report-watermarked.pdf": "report.pdf"}
	var names []string
	for _, zf := range zr.File {
		names = append(names, zf.Name)
		src, ok := want[zf.Name]
		if !ok {
			continue
		}
		rc, err := zf.Open()
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || !bytes.Equal(got, results[src]) {
			t.Fatalf("archive member %s is not the item's result (%v)", zf.Name, err)
		}
	}
	if strings.Join(names, ",") != "000-a-watermarked.jpg,001-b-watermarked.jpg,002-report-watermarked.pdf,manifest.json" {
		t.Fatalf("archive entries %v", names)
	}

	// The zip route's manifest takes the option: a webp result.
	zr2 := postZip(t, f, "fmt-zip-0001", zipOf(t, map[string][]byte{"c.jpg": photo(t, 300, 300, 23)}, []string{"c.jpg"}),
		`{"output_format":"webp","items":[{"filename":"c.jpg","data":{"n":3}}]}`)
	if zr2.status != 202 || !strings.Contains(string(zr2.body), `"output_format":"webp"`) {
		t.Fatalf("zip batch as webp: %d %s", zr2.status, zr2.body)
	}
	zdone := waitBatch(t, f, decodeBatch(t, zr2).BatchID, "completed", "failed")
	if zdone.Status != "completed" {
		t.Fatalf("zip batch ended %s: %+v", zdone.Status, zdone.Items)
	}
	res := call(t, "GET", f.base+zdone.Items[0].ResultURL, f.key, nil)
	if res.status != 200 || res.header.Get("Content-Type") != "image/webp" {
		t.Fatalf("zip item result: %d %q", res.status, res.header.Get("Content-Type"))
	}
	if _, err := webp.Decode(bytes.NewReader(res.body)); err != nil {
		t.Fatalf("zip item result is not a WebP: %v", err)
	}
}
