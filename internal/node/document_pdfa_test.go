package node_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"filigrane/codec/pdf/pdftest"
)

// TestDocumentEmbedPDFA: through a node, a marked PDF/A-1 document comes back without its PDF/A identification
// (the overlay's transparency breaks PDF/A-1: docs/codec.md, "PDF/A inputs"), and a PDF/A-2 one with a PDF/A
// output intent keeps it. The metadata stream is unfiltered, so the identification is read from the bytes.
func TestDocumentEmbedPDFA(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for _, c := range []struct {
		doc  pdftest.PDFADoc
		want string // the identification the output declares, "" for none
	}{
		{pdftest.PDFADoc{Part: 1, Conformance: "B", OutputIntent: true}, ""},
		{pdftest.PDFADoc{Part: 2, Conformance: "B", OutputIntent: true}, "pdfaid:part='2' pdfaid:conformance='B'"},
	} {
		r := postFile(t, f.base+"/watermarks/documents", f.keyA, pdftest.PDFA(c.doc), "archive.pdf", `{"doc":1}`)
		if r.status != 200 || !bytes.HasPrefix(r.body, []byte("%PDF")) {
			t.Fatalf("PDF/A-%d embed: %d %.300s", c.doc.Part, r.status, r.body)
		}
		if !bytes.Contains(r.body, []byte("<x:xmpmeta")) {
			t.Fatalf("PDF/A-%d: the output has no XMP metadata in plain text", c.doc.Part)
		}
		got := bytes.Contains(r.body, []byte("pdfaid:part"))
		if c.want == "" && got || c.want != "" && !bytes.Contains(r.body, []byte(c.want)) {
			t.Fatalf("PDF/A-%d: output declares pdfaid:part %v, want %q", c.doc.Part, got, c.want)
		}
	}
}

// TestDocumentEmbedDropsThumbnailsKeepsCreationDate: through a node, a marked PDF comes back without its page
// and XMP thumbnails (unmarked renderings of the page: docs/codec.md, "Document metadata"), with its input's
// creation date in the information dictionary, and is detected with the watermark the embed answered.
func TestDocumentEmbedDropsThumbnailsKeepsCreationDate(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	in := pdftest.Described(pdftest.DescribedDoc{Pages: 1, CreationDate: "D:20190304050607+02'00'", XMP: true, PageThumbs: true})
	r := postFile(t, f.base+"/watermarks/documents", f.keyA, in, "brochure.pdf", `{"doc":1}`)
	wm := r.header.Get("X-Watermark-ID")
	if r.status != 200 || wm == "" || !bytes.HasPrefix(r.body, []byte("%PDF")) {
		t.Fatalf("embed: %d %.300s", r.status, r.body)
	}
	// The rewritten XMP is unfiltered, so what it holds is read from the bytes.
	if !bytes.Contains(r.body, []byte("<x:xmpmeta")) || bytes.Contains(r.body, []byte("Thumbnails")) ||
		bytes.Contains(r.body, []byte(pdftest.ThumbnailMark)) {
		t.Fatalf("the marked file holds a thumbnail, or its XMP is not in plain text")
	}
	if !bytes.Contains(r.body, []byte("/CreationDate(D:20190304050607+02'00')")) ||
		!bytes.Contains(r.body, []byte("<xmp:CreateDate>2019-03-04T05:06:07+02:00</xmp:CreateDate>")) {
		t.Fatalf("the input's creation date is lost")
	}
	d := postFile(t, f.base+"/watermarks/documents/detect", f.keyA, r.body, "marked.pdf", "")
	var det detection
	if d.status != 200 || json.Unmarshal(d.body, &det) != nil || !det.Watermarked || det.WatermarkID == nil || *det.WatermarkID != wm {
		t.Fatalf("detect: %d %s; want watermark %s", d.status, d.body, wm)
	}
}
