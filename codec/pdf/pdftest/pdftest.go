// Package pdftest builds small PDF documents for tests: valid ones with text, an outline, a link and a title,
// and precisely broken ones from object bodies. It writes the bytes by hand (with a correct cross-reference
// table) so that tests do not depend on the writer under test; it holds no state and must not be used by
// production code.
package pdftest

import (
	"bytes"
	"cmp"
	"compress/zlib"
	"fmt"
	"strings"
)

// Build assembles a PDF from object bodies (object i+1 is objs[i]) with a correct cross-reference table and
// the trailer entries given (e.g. "/Root 1 0 R"). Stream bodies come from Stream or Flate.
func Build(objs []string, trailer string) []byte {
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

// Stream is the body of a stream object with the entries dict and the raw data.
func Stream(dict string, data []byte) string {
	return fmt.Sprintf("<< %s /Length %d >>\nstream\n%s\nendstream", dict, len(data), data)
}

// Flate is the body of a stream object holding data compressed with FlateDecode.
func Flate(dict string, data []byte) string {
	var z bytes.Buffer
	w := zlib.NewWriter(&z)
	w.Write(data)
	w.Close()
	return Stream(dict+" /Filter /FlateDecode", z.Bytes())
}

// Doc describes a generated document.
type Doc struct {
	Pages      int
	CatalogExt string   // extra catalog entries
	InfoExt    string   // extra entries of the information dictionary
	PageExt    string   // extra entries of every page
	ExtraObjs  []string // objects appended after the pages' (numbered from ExtraObject(Pages, 1))
	MediaBox   string   // "" means US Letter
	Packed     bool     // laid out with object streams and a cross-reference stream (Packed), else a classic table
}

// TextPage is the content of a page of text lines with a filled gray box and a stroked frame: text stays
// selectable if the words can be extracted from a marked file.
func TextPage(n int) string {
	var s strings.Builder
	s.WriteString("0.85 g 72 520 200 120 re f 0 g 1 w 60 60 492 672 re S\n")
	fmt.Fprintf(&s, "BT /F1 18 Tf 72 720 Td (Filigrane test page %d) Tj ET\n", n)
	for i := 0; i < 24; i++ {
		fmt.Fprintf(&s, "BT /F1 11 Tf 72 %d Td (Line %d of page %d: the quick brown fox jumps over the lazy dog.) Tj ET\n", 690-18*i, i, n)
	}
	return s.String()
}

// firstPageObject is the object number of the first page's dictionary in a Make document.
const firstPageObject = 7

// ExtraObject is the number of the i-th (from 1) of the ExtraObjs of a document of pages pages.
func ExtraObject(pages, i int) int { return firstPageObject + 3*pages + i - 1 }

// Make builds a document with an outline, a link annotation on every page and a title. Objects: 1 catalog,
// 2 pages, 3 font, 4 info, 5 outlines, 6 outline item, then per page its dictionary, content stream and link,
// then ExtraObjs.
func Make(spec Doc) []byte {
	if spec.MediaBox == "" {
		spec.MediaBox = "[0 0 612 792]"
	}
	kids := make([]string, spec.Pages)
	var pageObjs []string
	for p := 0; p < spec.Pages; p++ {
		pageNr := firstPageObject + 3*p
		kids[p] = fmt.Sprintf("%d 0 R", pageNr)
		pageObjs = append(pageObjs,
			fmt.Sprintf("<< /Type /Page /Parent 2 0 R /MediaBox %s /Resources << /Font << /F1 3 0 R >> >> /Contents %d 0 R /Annots [%d 0 R] %s >>",
				spec.MediaBox, pageNr+1, pageNr+2, spec.PageExt),
			Flate("", []byte(TextPage(p+1))),
			"<< /Type /Annot /Subtype /Link /Rect [72 700 300 740] /Border [0 0 0] /A << /S /URI /URI (https://example.org/filigrane) >> >>")
	}
	objs := []string{
		fmt.Sprintf("<< /Type /Catalog /Pages 2 0 R /Outlines 5 0 R %s >>", spec.CatalogExt),
		fmt.Sprintf("<< /Type /Pages /Kids [%s] /Count %d >>", strings.Join(kids, " "), spec.Pages),
		"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
		"<< /Title (Filigrane test document) /Author (pdf adapter tests) " + spec.InfoExt + ">>",
		"<< /Type /Outlines /First 6 0 R /Last 6 0 R /Count 1 >>",
		fmt.Sprintf("<< /Title (Chapter one) /Parent 5 0 R /Dest [%d 0 R /Fit] >>", firstPageObject),
	}
	objs = append(objs, pageObjs...)
	objs = append(objs, spec.ExtraObjs...)
	if spec.Packed {
		return Packed(objs, "/Root 1 0 R /Info 4 0 R")
	}
	return Build(objs, "/Root 1 0 R /Info 4 0 R")
}

// RepeatedPage is a one-page document whose page tree names the page object times times (and counts times
// pages), as `mutool clean -gggg` writes identical pages: the adapter processes the page once.
func RepeatedPage(times int) []byte {
	return Build([]string{
		"<< /Type /Catalog /Pages 2 0 R >>",
		fmt.Sprintf("<< /Type /Pages /Kids [%s] /Count %d >>", strings.TrimSpace(strings.Repeat("3 0 R ", times)), times),
		"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>",
		Flate("", []byte(TextPage(1))),
		"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
	}, "/Root 1 0 R")
}

// SharedNode is a document whose page tree names one intermediate node twice (which doubles the pages below it:
// 2^k pages from k such nodes): not a tree, which the adapter refuses before processing any page.
func SharedNode() []byte {
	page := "<< /Type /Page /Parent 3 0 R /MediaBox [0 0 612 792] >>"
	return Build([]string{
		"<< /Type /Catalog /Pages 2 0 R >>",
		"<< /Type /Pages /Kids [3 0 R 3 0 R] /Count 4 >>",
		"<< /Type /Pages /Parent 2 0 R /Kids [4 0 R 5 0 R] /Count 2 >>",
		page,
		page,
	}, "/Root 1 0 R")
}

// FirstStreamedObject is the number of ObjectStreams' first object kept in an object stream.
const FirstStreamedObject = 100

// ObjectStreams assembles a PDF whose objects 1 to len(plain) are plain[i-1] (at most 9) and whose objects
// FirstStreamedObject+i are each alone in an object stream of their own (object 10+i, FlateDecode), with a
// cross-reference stream (the only way to address an object inside a stream) rooted at object 1. A streamed
// object's bytes are streamed[i] as they are: padding after the object inflates the stream without adding to
// the object. At most 90 streamed objects.
func ObjectStreams(plain []string, streamed [][]byte) []byte {
	if len(plain) > 9 || len(streamed) > 90 {
		panic("pdftest.ObjectStreams: at most 9 plain and 90 streamed objects")
	}
	var b bytes.Buffer
	b.WriteString("%PDF-1.7\n")
	offs := map[int]int{}
	obj := func(n int, body string) {
		offs[n] = b.Len()
		fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", n, body)
	}
	for i, p := range plain {
		obj(i+1, p)
	}
	for i, s := range streamed {
		head := fmt.Sprintf("%d 0 ", FirstStreamedObject+i)
		obj(10+i, Flate(fmt.Sprintf("/Type /ObjStm /N 1 /First %d", len(head)), append([]byte(head), s...)))
	}
	k := len(streamed)
	size, xrefNr := FirstStreamedObject+k, 10+k
	xrefOff := b.Len()
	var rows bytes.Buffer
	for n := range size {
		typ, f2, f3 := byte(0), 0, 0
		switch {
		case n == 0:
			f3 = 65535
		case n == xrefNr:
			typ, f2 = 1, xrefOff
		case offs[n] > 0:
			typ, f2 = 1, offs[n]
		case n >= FirstStreamedObject:
			typ, f2 = 2, 10+n-FirstStreamedObject
		}
		rows.Write([]byte{typ, byte(f2 >> 24), byte(f2 >> 16), byte(f2 >> 8), byte(f2), byte(f3 >> 8), byte(f3)})
	}
	fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\nstartxref\n%d\n%%%%EOF\n", xrefNr,
		Stream(fmt.Sprintf("/Type /XRef /Size %d /W [1 4 2] /Root 1 0 R", size), rows.Bytes()), xrefOff)
	return b.Bytes()
}

// Packed assembles a PDF the way current writers lay one out: objects 1..len(objs) are objs[i-1], every one
// that is not a stream packed into shared object streams (up to 100 objects each, FlateDecode: similar
// objects compress together), the streams plain, and a cross-reference stream whose dictionary carries the
// trailer entries given (e.g. "/Root 1 0 R /Info 4 0 R").
func Packed(objs []string, trailer string) []byte {
	const perStream = 100
	var b bytes.Buffer
	b.WriteString("%PDF-1.7\n%\xe2\xe3\xcf\xd3\n")
	type loc struct{ off, stream, index int } // off > 0: plain at off; else in object stream stream at index
	locs := make([]loc, len(objs)+1)
	var packed []int
	for i, o := range objs {
		if strings.Contains(o, "\nstream\n") {
			locs[i+1].off = b.Len()
			fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", i+1, o)
			continue
		}
		packed = append(packed, i+1)
	}
	next := len(objs) + 1
	for start := 0; start < len(packed); start += perStream {
		group := packed[start:min(start+perStream, len(packed))]
		var head, body strings.Builder
		for k, n := range group {
			fmt.Fprintf(&head, "%d %d ", n, body.Len())
			body.WriteString(objs[n-1])
			body.WriteString("\n")
			locs[n] = loc{stream: next, index: k}
		}
		locs = append(locs, loc{off: b.Len()})
		fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", next, Flate(fmt.Sprintf("/Type /ObjStm /N %d /First %d", len(group), head.Len()),
			[]byte(head.String()+body.String())))
		next++
	}
	xrefNr, xrefOff := next, b.Len()
	locs = append(locs, loc{off: xrefOff})
	var rows bytes.Buffer
	for n, l := range locs {
		typ, f2, f3 := byte(1), l.off, 0
		switch {
		case n == 0:
			typ, f3 = 0, 65535
		case l.off == 0:
			typ, f2, f3 = 2, l.stream, l.index
		}
		rows.Write([]byte{typ, byte(f2 >> 24), byte(f2 >> 16), byte(f2 >> 8), byte(f2), byte(f3 >> 8), byte(f3)})
	}
	fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\nstartxref\n%d\n%%%%EOF\n", xrefNr,
		Stream(fmt.Sprintf("/Type /XRef /Size %d /W [1 4 2] %s", xrefNr+1, trailer), rows.Bytes()), xrefOff)
	return b.Bytes()
}

// PDFADoc describes a PDFA document.
type PDFADoc struct {
	Part         int
	Conformance  string
	OutputIntent bool   // a PDF/A output intent (/S /GTS_PDFA1), its ICC profile a stand-in nothing here reads
	Elements     bool   // the identification as XMP elements (<pdfaid:part>2</pdfaid:part>), else as attributes
	Packed       bool   // laid out with object streams (Doc.Packed)
	Tagged       bool   // /MarkInfo << /Marked true >> in the catalog (level A is for tagged documents)
	Pad          int    // spaces added inside the packet, the stream then Flate-compressed (a large XMP in a small file)
	Undecodable  bool   // the metadata stream declares /FlateDecode over its plain text, so it cannot be decoded
	Prefix       string // the prefix bound to the identification's namespace ("" is pdfaid)
	Bare         bool   // the XMP holds the identification alone: no producer, no dates
	Untyped      bool   // the metadata stream has neither /Type /Metadata nor /Subtype /XML (which the specification requires)
}

// PDFA is a one-page 2×3-inch document whose XMP metadata (an unfiltered stream, as PDF/A wants) declares PDF/A
// spec.Part and spec.Conformance, with a producer and dates of 2020 in the XMP (unless Bare) and none in its
// information dictionary. Only the declaration is PDF/A's: the document is not made to conform otherwise.
func PDFA(spec PDFADoc) []byte {
	p := spec.Prefix
	if p == "" {
		p = "pdfaid"
	}
	id := fmt.Sprintf(` %s:part='%d' %s:conformance='%s'/>`, p, spec.Part, p, spec.Conformance)
	if spec.Elements {
		id = fmt.Sprintf(`><%s:part>%d</%s:part><%s:conformance>%s</%s:conformance></rdf:Description>`, p, spec.Part, p, p, spec.Conformance, p)
	}
	xmp := "<?xpacket begin='\ufeff' id='W5M0MpCehiHzreSzNTczkc9d'?>\n" +
		"<x:xmpmeta xmlns:x='adobe:ns:meta/'>\n<rdf:RDF xmlns:rdf='http://www.w3.org/1999/02/22-rdf-syntax-ns#'>\n"
	if !spec.Bare {
		xmp += `<rdf:Description rdf:about="" xmlns:pdf='http://ns.adobe.com/pdf/1.3/' pdf:Producer='Filigrane tests'/>` + "\n" +
			`<rdf:Description rdf:about="" xmlns:xmp='http://ns.adobe.com/xap/1.0/'><xmp:ModifyDate>2020-01-02T03:04:05Z</xmp:ModifyDate>` +
			"<xmp:CreateDate>2020-01-02T03:04:05Z</xmp:CreateDate></rdf:Description>\n"
	}
	xmp += fmt.Sprintf(`<rdf:Description rdf:about="" xmlns:%s='http://www.aiim.org/pdfa/ns/id/'`, p) + id + "\n" +
		"</rdf:RDF>\n</x:xmpmeta>\n<?xpacket end='w'?>"
	meta := ExtraObject(1, 1)
	doc := Doc{Pages: 1, MediaBox: "[0 0 144 216]", Packed: spec.Packed,
		CatalogExt: fmt.Sprintf("/Metadata %d 0 R", meta),
		ExtraObjs:  []string{Stream("/Type /Metadata /Subtype /XML", []byte(xmp))}}
	if spec.Undecodable {
		doc.ExtraObjs[0] = Stream("/Type /Metadata /Subtype /XML /Filter /FlateDecode", []byte(xmp))
	}
	if spec.Untyped {
		doc.ExtraObjs[0] = Stream("", []byte(xmp))
	}
	if spec.Pad > 0 {
		xmp = strings.Replace(xmp, "</rdf:RDF>", strings.Repeat(" ", spec.Pad)+"</rdf:RDF>", 1)
		doc.ExtraObjs[0] = Flate("/Type /Metadata /Subtype /XML", []byte(xmp))
	}
	if spec.Tagged {
		doc.CatalogExt += " /MarkInfo << /Marked true >>"
	}
	if spec.OutputIntent {
		doc.CatalogExt += fmt.Sprintf(" /OutputIntents [%d 0 R]", meta+1)
		doc.ExtraObjs = append(doc.ExtraObjs,
			fmt.Sprintf("<< /Type /OutputIntent /S /GTS_PDFA1 /OutputConditionIdentifier (sRGB) /DestOutputProfile %d 0 R >>", meta+2),
			Stream("/N 3", []byte("stand-in for an ICC profile")))
	}
	return Make(doc)
}

// ThumbnailMark is in every thumbnail Described writes (the pages' /Thumb image, the XMP's xmp:Thumbnails and
// xmpGImg:image), in plain bytes: a thumbnail is an unmarked rendering of the page, which no marked output may
// hold.
const ThumbnailMark = "UNMARKEDPDFTHUMBNAIL"

// DescribedDoc describes a document with dates and thumbnails.
type DescribedDoc struct {
	Pages        int
	CreationDate string // the information dictionary's /CreationDate ("" for none)
	XMP          bool   // a catalog XMP stream (Flate-compressed, not PDF/A) with dates of 2020 and thumbnails
	XMPCreated   string // the XMP's xmp:CreateDate ("" is 2020-01-02T03:04:05Z)
	PageThumbs   bool   // every page's /Thumb is one 20×1 gray image whose bytes are ThumbnailMark
	PageXMP      bool   // every page's /Metadata is one XMP stream (Flate-compressed) with an xmp:Thumbnails
	Packed       bool   // laid out with object streams (Doc.Packed)
	PDF20        bool   // a PDF 2.0 header
}

// Described is a document of Letter pages (Make's) with the dates and thumbnails spec asks for. Its XMP holds an
// xmp:CreateDate and xmp:ModifyDate of 2020-01-02T03:04:05Z, an xmp:MetadataDate, a dc:title, an xmp:Thumbnails
// element and, in a second rdf:Description, an xmpGImg:image attribute, both holding ThumbnailMark.
func Described(spec DescribedDoc) []byte {
	doc := Doc{Pages: spec.Pages, Packed: spec.Packed}
	if spec.CreationDate != "" {
		doc.InfoExt = "/CreationDate (" + spec.CreationDate + ") "
	}
	if spec.PageThumbs {
		doc.PageExt = fmt.Sprintf("/Thumb %d 0 R", ExtraObject(spec.Pages, len(doc.ExtraObjs)+1))
		doc.ExtraObjs = append(doc.ExtraObjs, Stream(fmt.Sprintf("/Type /XObject /Subtype /Image /Width %d /Height 1 "+
			"/ColorSpace /DeviceGray /BitsPerComponent 8", len(ThumbnailMark)), []byte(ThumbnailMark)))
	}
	thumb := "/9j/4AAQSkZJRgABAgEASABIAAD/" + strings.Repeat(ThumbnailMark, 4)
	if spec.PageXMP {
		xmp := "<x:xmpmeta xmlns:x='adobe:ns:meta/'><rdf:RDF xmlns:rdf='http://www.w3.org/1999/02/22-rdf-syntax-ns#'>" +
			`<rdf:Description rdf:about="" xmlns:xmp="http://ns.adobe.com/xap/1.0/" xmlns:xmpGImg="http://ns.adobe.com/xap/1.0/g/img/">` +
			`<xmp:Thumbnails><rdf:Alt><rdf:li rdf:parseType="Resource"><xmpGImg:image>` + thumb +
			"</xmpGImg:image></rdf:li></rdf:Alt></xmp:Thumbnails></rdf:Description></rdf:RDF></x:xmpmeta>"
		doc.PageExt += fmt.Sprintf(" /Metadata %d 0 R", ExtraObject(spec.Pages, len(doc.ExtraObjs)+1))
		doc.ExtraObjs = append(doc.ExtraObjs, Flate("/Type /Metadata /Subtype /XML", []byte(xmp)))
	}
	if spec.XMP {
		xmp := "<?xpacket begin='\ufeff' id='W5M0MpCehiHzreSzNTczkc9d'?>\n" +
			"<x:xmpmeta xmlns:x='adobe:ns:meta/'>\n<rdf:RDF xmlns:rdf='http://www.w3.org/1999/02/22-rdf-syntax-ns#'>\n" +
			`<rdf:Description rdf:about="" xmlns:xmp="http://ns.adobe.com/xap/1.0/" xmlns:xmpGImg="http://ns.adobe.com/xap/1.0/g/img/"` +
			` xmlns:dc="http://purl.org/dc/elements/1.1/" xmp:ModifyDate="2020-01-02T03:04:05Z" xmp:MetadataDate="2020-01-02T03:04:05Z">` + "\n" +
			"<xmp:CreateDate>" + cmp.Or(spec.XMPCreated, "2020-01-02T03:04:05Z") + "</xmp:CreateDate>\n" +
			`<dc:title><rdf:Alt><rdf:li xml:lang="x-default">Filigrane test document</rdf:li></rdf:Alt></dc:title>` + "\n" +
			`<xmp:Thumbnails><rdf:Alt><rdf:li rdf:parseType="Resource"><xmpGImg:width>20</xmpGImg:width>` +
			"<xmpGImg:format>JPEG</xmpGImg:format><xmpGImg:image>" + thumb + "</xmpGImg:image></rdf:li></rdf:Alt></xmp:Thumbnails>\n" +
			"</rdf:Description>\n" +
			`<rdf:Description rdf:about="" xmlns:g="http://ns.adobe.com/xap/1.0/g/img/" g:format="JPEG" g:image="` + thumb + `"/>` + "\n" +
			"</rdf:RDF>\n</x:xmpmeta>\n<?xpacket end='w'?>"
		doc.CatalogExt = fmt.Sprintf("/Metadata %d 0 R", ExtraObject(spec.Pages, len(doc.ExtraObjs)+1))
		doc.ExtraObjs = append(doc.ExtraObjs, Flate("/Type /Metadata /Subtype /XML", []byte(xmp)))
	}
	if spec.PDF20 {
		return bytes.Replace(Make(doc), []byte("%PDF-1.7"), []byte("%PDF-2.0"), 1) // the same length
	}
	return Make(doc)
}
