package pdf

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// buildPDF assembles a PDF from object bodies (object i+1 is objs[i]) with a correct cross-reference table.
// Bodies that are streams are given as "<<dict>>\nstream\n...\nendstream"; streamObj builds those. The tests use
// it to make small documents and precisely broken ones; the adapter itself writes through pdfcpu.
func buildPDF(objs []string, trailer string) []byte {
	var b bytes.Buffer
	b.WriteString("%PDF-1.7\n%\xe2\xe3\xcf\xd3\n")
	offs := make([]int, len(objs))
	for i, o := range objs {
		offs[i] = b.Len()
		fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", i+1, o)
	}
	xref := b.Len()
	fmt.Fprintf(&b, "xref\n0 %d\n0000000000 65535 f \n", len(objs)+1)
	for _, off := range offs {
		fmt.Fprintf(&b, "%010d 00000 n \n", off)
	}
	fmt.Fprintf(&b, "trailer\n<< /Size %d %s >>\nstartxref\n%d\n%%%%EOF\n", len(objs)+1, trailer, xref)
	return b.Bytes()
}

func streamObj(dict string, data []byte) string {
	return fmt.Sprintf("<< %s /Length %d >>\nstream\n%s\nendstream", dict, len(data), data)
}

func flateObj(dict string, data []byte) string {
	var z bytes.Buffer
	w := zlib.NewWriter(&z)
	w.Write(data)
	w.Close()
	return streamObj(dict+" /Filter /FlateDecode", z.Bytes())
}

// docSpec describes a generated test document.
type docSpec struct {
	pages      int
	catalogExt string // extra catalog entries
	pageExt    string // extra entries of every page
	extraObjs  []string
	mediaBox   string
}

// textPage is a page of text lines with a filled gray box and a stroked frame: text stays selectable if the
// words can be extracted from the marked file.
func textPage(n int) string {
	var s strings.Builder
	s.WriteString("0.85 g 72 520 200 120 re f 0 g 1 w 60 60 492 672 re S\n")
	fmt.Fprintf(&s, "BT /F1 18 Tf 72 720 Td (Filigrane test page %d) Tj ET\n", n)
	for i := 0; i < 24; i++ {
		fmt.Fprintf(&s, "BT /F1 11 Tf 72 %d Td (Line %d of page %d: the quick brown fox jumps over the lazy dog.) Tj ET\n", 690-18*i, i, n)
	}
	return s.String()
}

// makeDoc builds a document with an outline, a link annotation and a title. Objects: 1 catalog, 2 pages,
// 3 font, 4 info, 5 outlines, 6 outline item, then per page its dictionary, content stream and link.
func makeDoc(spec docSpec) []byte {
	if spec.mediaBox == "" {
		spec.mediaBox = "[0 0 612 792]"
	}
	base := 7
	kids := make([]string, spec.pages)
	var pageObjs []string
	for p := 0; p < spec.pages; p++ {
		pageNr := base + 3*p
		kids[p] = fmt.Sprintf("%d 0 R", pageNr)
		pageObjs = append(pageObjs,
			fmt.Sprintf("<< /Type /Page /Parent 2 0 R /MediaBox %s /Resources << /Font << /F1 3 0 R >> >> /Contents %d 0 R /Annots [%d 0 R] %s >>",
				spec.mediaBox, pageNr+1, pageNr+2, spec.pageExt),
			flateObj("", []byte(textPage(p+1))),
			"<< /Type /Annot /Subtype /Link /Rect [72 700 300 740] /Border [0 0 0] /A << /S /URI /URI (https://example.org/filigrane) >> >>")
	}
	extraStart := base + 3*spec.pages
	_ = extraStart
	objs := []string{
		fmt.Sprintf("<< /Type /Catalog /Pages 2 0 R /Outlines 5 0 R %s >>", spec.catalogExt),
		fmt.Sprintf("<< /Type /Pages /Kids [%s] /Count %d >>", strings.Join(kids, " "), spec.pages),
		"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
		"<< /Title (Filigrane test document) /Author (pdf adapter tests) >>",
		"<< /Type /Outlines /First 6 0 R /Last 6 0 R /Count 1 >>",
		fmt.Sprintf("<< /Title (Chapter one) /Parent 5 0 R /Dest [%d 0 R /Fit] >>", base),
	}
	objs = append(objs, pageObjs...)
	objs = append(objs, spec.extraObjs...)
	return buildPDF(objs, "/Root 1 0 R /Info 4 0 R")
}

func writeTemp(t testing.TB, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func bufioReader(b []byte) *bufio.Reader { return bufio.NewReader(bytes.NewReader(b)) }
