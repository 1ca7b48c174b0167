package node_test

import (
	"bytes"
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
