package pdf

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"unicode/utf16"

	"github.com/pdfcpu/pdfcpu/pkg/api"
	"github.com/pdfcpu/pdfcpu/pkg/pdfcpu/types"

	"filigrane/codec/pdf/pdftest"
)

// xmpEncodings write XMP text in the encodings a packet may have: UTF-16 with a byte order mark, which the
// edits read, and UTF-32 and UTF-16 without a mark, which they do not.
var xmpEncodings = map[string]func(string) []byte{
	"utf-8":             func(s string) []byte { return []byte(s) },
	"utf-16le":          func(s string) []byte { return append([]byte{0xff, 0xfe}, utf16Bytes(s, binary.LittleEndian)...) },
	"utf-16be":          func(s string) []byte { return append([]byte{0xfe, 0xff}, utf16Bytes(s, binary.BigEndian)...) },
	"utf-16le, no mark": func(s string) []byte { return utf16Bytes(s, binary.LittleEndian) },
	"utf-32be": func(s string) []byte {
		b := []byte{0, 0, 0xfe, 0xff}
		for _, r := range s {
			b = binary.BigEndian.AppendUint32(b, uint32(r))
		}
		return b
	},
}

func utf16Bytes(s string, order binary.AppendByteOrder) []byte {
	var b []byte
	for _, u := range utf16.Encode([]rune(s)) {
		b = order.AppendUint16(b, u)
	}
	return b
}

// holdsInAnyEncoding reports whether b holds s in one of xmpEncodings' encodings (without their marks).
func holdsInAnyEncoding(b []byte, s string) bool {
	for name, enc := range xmpEncodings {
		e := enc(s)
		switch name {
		case "utf-16le", "utf-16be":
			e = e[2:]
		case "utf-32be":
			e = e[4:]
		}
		if bytes.Contains(b, e) {
			return true
		}
	}
	return false
}

// TestMarkedPDFReadsUTF16XMP: the catalog's XMP and a page's, in UTF-16 with a byte order mark (which XMP allows),
// are read as UTF-8 XMP is: the PDF/A-1 identification is removed and reported, the thumbnails dropped, the XMP's
// creation date kept; XMP in an encoding the edits cannot read (UTF-32, UTF-16 without a mark) is not kept
// unread: the catalog's is dropped, a page's emptied, and no thumbnail or identification survives in the output.
func TestMarkedPDFReadsUTF16XMP(t *testing.T) {
	a := testAdapter(t)
	catalogXMP := "<?xpacket begin='\ufeff' id='W5M0MpCehiHzreSzNTczkc9d'?>\n<x:xmpmeta xmlns:x='adobe:ns:meta/'>" +
		"<rdf:RDF xmlns:rdf='http://www.w3.org/1999/02/22-rdf-syntax-ns#'><rdf:Description rdf:about=''" +
		" xmlns:xmp='http://ns.adobe.com/xap/1.0/' xmlns:xmpGImg='http://ns.adobe.com/xap/1.0/g/img/'" +
		" xmlns:pdfaid='http://www.aiim.org/pdfa/ns/id/' pdfaid:part='1' pdfaid:conformance='B'>" +
		"<xmp:CreateDate>2019-03-04T05:06:07Z</xmp:CreateDate><xmp:Thumbnails><rdf:Alt><rdf:li rdf:parseType='Resource'>" +
		"<xmpGImg:image>" + pdftest.ThumbnailMark + "</xmpGImg:image></rdf:li></rdf:Alt></xmp:Thumbnails>" +
		"</rdf:Description></rdf:RDF></x:xmpmeta>\n<?xpacket end='w'?>"
	pageXMP := "<x:xmpmeta xmlns:x='adobe:ns:meta/'><rdf:RDF xmlns:rdf='http://www.w3.org/1999/02/22-rdf-syntax-ns#'>" +
		"<rdf:Description rdf:about='' xmlns:xmpGImg='http://ns.adobe.com/xap/1.0/g/img/' xmpGImg:image='" +
		pdftest.ThumbnailMark + "'/></rdf:RDF></x:xmpmeta>"
	for _, c := range []struct {
		encoding string
		readable bool
	}{{"utf-16le", true}, {"utf-16be", true}, {"utf-32be", false}, {"utf-16le, no mark", false}} {
		t.Run(c.encoding, func(t *testing.T) {
			enc := xmpEncodings[c.encoding]
			// The catalog's XMP Flate-compressed, the page's stored as it is (unfiltered text is read without
			// decoding: a thumbnail must be found in it in every encoding).
			src := writeTemp(t, "in.pdf", pdftest.Build([]string{
				"<< /Type /Catalog /Pages 2 0 R /Metadata 4 0 R >>",
				"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
				"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 144 216] /Metadata 5 0 R >>",
				pdftest.Flate("/Type /Metadata /Subtype /XML", enc(catalogXMP)),
				pdftest.Stream("/Type /Metadata /Subtype /XML", enc(pageXMP)),
			}, "/Root 1 0 R"))
			dst := filepath.Join(t.TempDir(), "out.pdf")
			rep, err := a.Embed(context.Background(), src, dst, testID("utf-16 xmp"), Options{})
			if err != nil {
				t.Fatal(err)
			}
			m := readMarkedMetadata(t, dst)
			out, err := os.ReadFile(dst)
			if err != nil {
				t.Fatal(err)
			}
			pc, err := api.ReadContextFile(dst)
			if err != nil {
				t.Fatal(err)
			}
			for nr, e := range pc.XRefTable.Table {
				sd, ok := e.Object.(types.StreamDict)
				if ok && sd.Decode() == nil && (holdsInAnyEncoding(sd.Content, pdftest.ThumbnailMark) ||
					holdsInAnyEncoding(sd.Content, "pdfaid:part")) {
					t.Fatalf("object %d (%v) holds a thumbnail or the PDF/A identification: %q", nr, sd.Dict, sd.Content)
				}
			}
			if holdsInAnyEncoding(out, pdftest.ThumbnailMark) {
				t.Fatal("the marked file holds a thumbnail")
			}
			if !c.readable {
				if m.xmp != "" || rep.PDFA != "" {
					t.Fatalf("unreadable XMP kept (%q), or a claim read from it (%q)", m.xmp, rep.PDFA)
				}
				return
			}
			if rep.PDFA != "1B" || !rep.PDFARemoved {
				t.Fatalf("report PDFA %q removed %v, want 1B removed", rep.PDFA, rep.PDFARemoved)
			}
			if m.info["CreationDate"] != "D:20190304050607+00'00'" || xmpText(m.xmp, "xmp:CreateDate") != "2019-03-04T05:06:07+00:00" {
				t.Fatalf("creation date %q, XMP's %q; want the input XMP's, 2019-03-04T05:06:07Z:\n%s",
					m.info["CreationDate"], xmpText(m.xmp, "xmp:CreateDate"), m.xmp)
			}
		})
	}
}

// TestMarkedPDFDropsPrivateData: an application's private data (/PieceInfo) of a page, of a form XObject and
// of the catalog, which can hold an unmarked copy of the page (Illustrator's whole artwork), is not in the
// marked file, streams included; the catalog's /PieceInfo keeps the structural mark alone, which is still found,
// in a classic and an object-stream layout.
func TestMarkedPDFDropsPrivateData(t *testing.T) {
	a := testAdapter(t)
	const private = "UNMARKEDPRIVATEARTWORK"
	piece := func(nr int) string {
		return fmt.Sprintf("/PieceInfo << /Illustrator << /LastModified (D:20200102030405Z) /Private %d 0 R >> >>", nr)
	}
	objs := []string{
		"<< /Type /Catalog /Pages 2 0 R " + piece(6) + " >>",
		"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
		"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 144 216] /Resources << /XObject << /Fm1 5 0 R >> >> /Contents 4 0 R " +
			piece(7) + " /LastModified (D:20200102030405Z) >>",
		pdftest.Stream("", []byte("q /Fm1 Do Q")),
		pdftest.Stream("/Type /XObject /Subtype /Form /BBox [0 0 144 216] "+piece(8), []byte("0 0 1 rg 10 10 50 50 re f")),
		"<< /AIMetaData 9 0 R >>",
		"<< /AIPrivateData1 10 0 R >>",
		"<< /AIPrivateData1 11 0 R >>",
		pdftest.Stream("", []byte("%AI document "+private)),
		pdftest.Flate("", []byte("%AI page "+private)),
		pdftest.Flate("", []byte("%AI form "+private)),
	}
	for _, layout := range []struct {
		name string
		data []byte
	}{{"classic", pdftest.Build(objs, "/Root 1 0 R")}, {"object streams", pdftest.Packed(objs, "/Root 1 0 R")}} {
		t.Run(layout.name, func(t *testing.T) {
			dst := filepath.Join(t.TempDir(), "out.pdf")
			id := testID("private data")
			if _, err := a.Embed(context.Background(), writeTemp(t, "in.pdf", layout.data), dst, id, Options{}); err != nil {
				t.Fatal(err)
			}
			pc, err := api.ReadContextFile(dst)
			if err != nil {
				t.Fatal(err)
			}
			for nr, e := range pc.XRefTable.Table {
				if e == nil || e.Free {
					continue
				}
				var dict types.Dict
				switch o := e.Object.(type) {
				case types.Dict:
					dict = o
				case types.StreamDict:
					dict = o.Dict
					if o.Decode() == nil && bytes.Contains(o.Content, []byte(private)) {
						t.Fatalf("object %d holds the private data", nr)
					}
				}
				if pi, ok := dict["PieceInfo"]; ok && (dict.Type() == nil || *dict.Type() != "Catalog") {
					t.Fatalf("object %d (%v) keeps its /PieceInfo %v", nr, dict, pi)
				}
			}
			root, err := pc.XRefTable.Catalog()
			if err != nil {
				t.Fatal(err)
			}
			pi, err := pc.XRefTable.DereferenceDict(root["PieceInfo"])
			if err != nil || len(pi) != 1 || pi[pieceKey] == nil {
				t.Fatalf("catalog /PieceInfo %v (%v), want the structural mark's alone", pi, err)
			}
			d, err := a.Detect(context.Background(), dst)
			if err != nil || !d.Watermarked || d.WatermarkID == nil || *d.WatermarkID != id.String() {
				t.Fatalf("detection %+v (%v), want %s", d, err, id)
			}
		})
	}
}
