package node_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"filigrane/actors"
	"filigrane/codec/pdf/pdftest"
	"filigrane/internal/node"
)

// TestDocumentDecodeBudget: a PDF's parse and analysis are reserved in the node's decode budget (80 MiB here),
// as an image's decode is: the parse's part (about 48 MB for a small file) before it, each page's part as the
// page arrives (9 MB for a 2×3-inch page, 54 MB for a Letter page). With the budget in use, a synchronous
// detection answers 503 decode_busy with Retry-After; a document whose parse's estimate is above the whole
// budget is refused with 413 document_too_large before it is parsed (also for the metadata an embed decodes), one with a page too large to analyse
// beside its parse (Letter, here) when that page arrives, in the request or in its job; none of them is
// charged, and the job writes no result. A job waits for its memory and succeeds once it is free; a document of
// small pages is detected beside another decode, in the request and in a job, rather than reserving every page
// at the largest size (737 MB with 2 render workers: the whole budget).
func TestDocumentDecodeBudget(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *node.Config) { c.DecodeMemory = 80 << 20 })
	b := f.n.DecodeBudget()
	url := f.base + "/watermarks/documents/detect"
	bal0, _ := balance(t, f, f.orgA)

	// The whole budget in use: the edge's probe (a parse) waits, then answers busy.
	release, err := b.Acquire(context.Background(), b.Capacity())
	if err != nil {
		t.Fatal(err)
	}
	r := postFile(t, url, f.keyA, tinyPDF(), "report.pdf", "")
	release()
	if p := decodeProblem(t, r); r.status != 503 || p.Code != "decode_busy" || r.header.Get("Retry-After") != "5" {
		t.Fatalf("budget in use: %d %+v Retry-After %q", r.status, p, r.header.Get("Retry-After"))
	}

	// Another decode holds 16 MiB: a document of one small page (48 MB to parse, 9 MB for its page) is
	// detected beside it, in the request and in a job, without waiting.
	small := pdftest.Make(pdftest.Doc{Pages: 1, MediaBox: "[0 0 144 216]"})
	other, err := b.Acquire(context.Background(), 16<<20)
	if err != nil {
		t.Fatal(err)
	}
	if r := postFile(t, url, f.keyA, small, "small.pdf", ""); r.status != 200 {
		other()
		t.Fatalf("detection beside another decode: %d %s", r.status, r.body)
	}
	r = postFile(t, url+"/async", f.keyA, small, "small.pdf", "")
	if r.status != 202 {
		other()
		t.Fatalf("async detect: %d %s", r.status, r.body)
	}
	waitJob(t, f, decodeReceipt(t, r).RequestID, "succeeded")
	other()
	bal1, _ := balance(t, f, f.orgA)

	// 12,000 tiny objects (a 0.6 MB file): about 95 MB for the parser's model, more than the whole budget.
	objs := make([]string, 12_000)
	for i := range objs {
		objs[i] = "<< /A 1 >>"
	}
	many := pdftest.Make(pdftest.Doc{Pages: 1, ExtraObjs: objs})
	for _, c := range []struct{ route, data string }{{url, ""}, {f.base + "/watermarks/documents", `{"doc":1}`}} {
		r := postFile(t, c.route, f.keyA, many, "many.pdf", c.data)
		if p := decodeProblem(t, r); r.status != 413 || p.Code != "document_too_large" || !strings.Contains(p.Detail, "processing this PDF takes") {
			t.Fatalf("%s, over the budget: %d %+v", c.route, r.status, p)
		}
	}
	// Two XMP packets of 4 MiB (the catalog's and the page's, 18 kB compressed): an embed's estimate counts 8
	// bytes a byte of them (the validation and the metadata edits decode them), 112 MB, over the budget.
	packet := []byte("<x:xmpmeta xmlns:x='adobe:ns:meta/'>" + strings.Repeat(" ", 4<<20) + "</x:xmpmeta>")
	meta := pdftest.Make(pdftest.Doc{Pages: 1, CatalogExt: fmt.Sprintf("/Metadata %d 0 R", pdftest.ExtraObject(1, 1)),
		PageExt: fmt.Sprintf("/Metadata %d 0 R", pdftest.ExtraObject(1, 2)), ExtraObjs: []string{
			pdftest.Flate("/Type /Metadata /Subtype /XML", packet), pdftest.Flate("/Type /Metadata /Subtype /XML", packet)}})
	r = postFile(t, f.base+"/watermarks/documents", f.keyA, meta, "metadata.pdf", `{"doc":2}`)
	if p := decodeProblem(t, r); r.status != 413 || p.Code != "document_too_large" || !strings.Contains(p.Detail, "processing this PDF takes") {
		t.Fatalf("embed of 8 MiB of metadata, over the budget: %d %+v", r.status, p)
	}
	// A Letter page takes about 54 MB to analyse, which cannot fit beside the 48 MB of the parse: refused when
	// it arrives, in the request and in a job, which fails without a result.
	r = postFile(t, url, f.keyA, tinyPDF(), "letter.pdf", "")
	if p := decodeProblem(t, r); r.status != 413 || p.Code != "document_too_large" || !strings.Contains(p.Detail, "a page of this PDF") {
		t.Fatalf("a page over the budget: %d %+v", r.status, p)
	}
	r = postFile(t, url+"/async", f.keyA, tinyPDF(), "letter.pdf", "")
	if r.status != 202 {
		t.Fatalf("async detect: %d %s", r.status, r.body)
	}
	rc := decodeReceipt(t, r)
	waitJob(t, f, rc.RequestID, "failed")
	g := decodeReceipt(t, call(t, "GET", f.base+rc.StatusURL, f.keyA, nil))
	if g.ErrorCode == nil || *g.ErrorCode != "document_too_large" || g.Credits != 0 {
		t.Fatalf("job with a page over the budget: %s", g.raw)
	}
	if res := call(t, "GET", f.base+g.ResultURL, f.keyA, nil); res.status == 200 {
		t.Fatalf("result of the failed job: %d %s", res.status, res.body)
	}
	if bal, held := balance(t, f, f.orgA); bal != bal1 || held != 0 || bal1 >= bal0 {
		t.Fatalf("balance %d held %d after the refusals, want %d (below %d after two detections) and 0", bal, held, bal1, bal0)
	}

	// A job waits for the memory instead, and succeeds on its first attempt once it is free: here, 52 MiB
	// free, room for its parse (and the edge's probe before it) but not for its page beside it.
	hold, err := b.Acquire(context.Background(), b.Capacity()-52<<20)
	if err != nil {
		t.Fatal(err)
	}
	r = postFile(t, url+"/async", f.keyA, small, "small.pdf", "")
	if r.status != 202 {
		hold()
		t.Fatalf("async detect: %d %s", r.status, r.body)
	}
	rc = decodeReceipt(t, r)
	waitReservation(t, b)
	if g := decodeReceipt(t, call(t, "GET", f.base+rc.StatusURL, f.keyA, nil)); g.Status == "succeeded" || g.Status == "failed" {
		hold()
		t.Fatalf("job %s while its memory is held", g.Status)
	}
	hold()
	waitJob(t, f, rc.RequestID, "succeeded")
	if final := decodeReceipt(t, call(t, "GET", f.base+rc.StatusURL, f.keyA, nil)); final.Attempts != 1 {
		t.Fatalf("job %+v, want succeeded on its first attempt", final)
	}

	// Every reservation was given back.
	all, err := b.Acquire(context.Background(), b.Capacity())
	if err != nil {
		t.Fatal("budget not released:", err)
	}
	all()
}

// waitReservation polls b until a reservation waits in it, within a bounded time.
func waitReservation(t *testing.T, b *actors.DecodeBudget) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for b.Waiting() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no reservation ever waited in the decode budget")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
