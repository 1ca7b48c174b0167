package pdf

import (
	"context"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/pdfcpu/pdfcpu/pkg/api"
	"github.com/pdfcpu/pdfcpu/pkg/pdfcpu/types"

	"filigrane/codec/pdf/pdftest"
)

// markedMetadata is what a marked file says of itself: its XMP metadata stream (decoded; "" without one),
// whether that stream is filtered, and its information dictionary's text entries.
type markedMetadata struct {
	xmp      string
	filtered bool
	info     map[string]string
	// lastContent is the first page's last content stream, where the overlay is drawn.
	lastContent string
}

func readMarkedMetadata(t *testing.T, path string) markedMetadata {
	t.Helper()
	ctx, err := api.ReadContextFile(path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	xt := ctx.XRefTable
	root, err := xt.Catalog()
	if err != nil {
		t.Fatal(err)
	}
	var m markedMetadata
	if root["Metadata"] != nil { // else m.xmp stays ""
		sd, _, err := xt.DereferenceStreamDict(root["Metadata"])
		if err != nil || sd == nil {
			t.Fatalf("metadata stream: %v", err)
		}
		if err := sd.Decode(); err != nil {
			t.Fatal(err)
		}
		m.xmp, m.filtered = string(sd.Content), sd.Dict["Filter"] != nil
	}
	page, _, _, err := xt.PageDict(1, false)
	if err != nil {
		t.Fatal(err)
	}
	contents, err := xt.DereferenceArray(page["Contents"])
	if err != nil || len(contents) == 0 {
		t.Fatalf("page contents %v: %v", page["Contents"], err)
	}
	sd, _, err := xt.DereferenceStreamDict(contents[len(contents)-1])
	if err != nil || sd.Decode() != nil {
		t.Fatalf("last content stream: %v", err)
	}
	m.lastContent = string(sd.Content)
	info, err := xt.DereferenceDict(*xt.Info)
	if err != nil {
		t.Fatal(err)
	}
	m.info = map[string]string{}
	for k, v := range info {
		if s, ok := v.(types.StringLiteral); ok {
			m.info[k], _ = types.StringLiteralToString(s)
		}
	}
	return m
}

// xmpText is the value of an XMP property written as an element or an attribute ("" when absent).
func xmpText(xmp, qname string) string {
	q := regexp.QuoteMeta(qname)
	if m := regexp.MustCompile(`<` + q + `>([^<]*)</` + q + `>`).FindStringSubmatch(xmp); m != nil {
		return m[1]
	}
	if m := regexp.MustCompile(q + `\s*=\s*["']([^"']*)["']`).FindStringSubmatch(xmp); m != nil {
		return m[1]
	}
	return ""
}

// TestPDFAIdentification: a marked PDF/A-1 document no longer declares PDF/A (the overlay's soft mask is
// transparency, which PDF/A-1 forbids), nor does a PDF/A-2 one without a PDF/A output intent (its overlay's
// DeviceGray and blending would need one); a PDF/A-2 or -3 document with an output intent keeps its
// declaration. The report says which, and in every case the XMP's producer and dates are the information
// dictionary's as written (PDF/A requires them equal): the creation date the input's XMP states, the
// modification date the time of marking, whether the identification is written as attributes or as elements, in a classic or an
// object-stream layout.
func TestPDFAIdentification(t *testing.T) {
	a := testAdapter(t)
	for _, c := range []struct {
		name    string
		doc     pdftest.PDFADoc
		removed bool
		pdfa    string
	}{
		{"1B with an output intent", pdftest.PDFADoc{Part: 1, Conformance: "B", OutputIntent: true}, true, "1B"},
		{"2B without an output intent", pdftest.PDFADoc{Part: 2, Conformance: "B", Elements: true}, true, "2B"},
		{"2B with an output intent", pdftest.PDFADoc{Part: 2, Conformance: "B", OutputIntent: true, Elements: true}, false, "2B"},
		{"3U with an output intent, object streams", pdftest.PDFADoc{Part: 3, Conformance: "U", OutputIntent: true, Packed: true}, false, "3U"},
		{"2A tagged, with an output intent", pdftest.PDFADoc{Part: 2, Conformance: "A", OutputIntent: true, Tagged: true}, false, "2A"},
		// The identification under a prefix of its own, and no producer or dates: the identification goes, and
		// the producer and dates are added.
		{"1A bare, prefix id", pdftest.PDFADoc{Part: 1, Conformance: "A", Prefix: "id", Bare: true}, true, "1A"},
		// Metadata too large to edit that names the identification is dropped: the output claims nothing.
		{"metadata over 4 MiB", pdftest.PDFADoc{Part: 2, Conformance: "B", OutputIntent: true, Pad: maxXMPBytes}, true, "?"},
		// Metadata that cannot be decoded is dropped before the validation, which refused the document for it:
		// no claim can be read from it, and the output makes none.
		{"undecodable metadata", pdftest.PDFADoc{Part: 2, Conformance: "B", OutputIntent: true, Undecodable: true}, false, ""},
		// A metadata stream that does not say it is one (no /Type /Metadata, no /Subtype /XML) is not counted in
		// the memory estimate (the scan before parsing sees it as any stream), so it is not decoded: dropped
		// unread, as undecodable metadata is.
		{"untyped metadata", pdftest.PDFADoc{Part: 2, Conformance: "B", OutputIntent: true, Untyped: true}, false, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			src := writeTemp(t, "in.pdf", pdftest.PDFA(c.doc))
			dst := filepath.Join(t.TempDir(), "out.pdf")
			rep, err := a.Embed(context.Background(), src, dst, testID("pdfa"), Options{})
			if err != nil {
				t.Fatal(err)
			}
			if rep.PDFA != c.pdfa || rep.PDFARemoved != c.removed {
				t.Fatalf("report PDFA %q removed %v, want %q %v", rep.PDFA, rep.PDFARemoved, c.pdfa, c.removed)
			}
			m := readMarkedMetadata(t, dst)
			if c.pdfa == "?" || c.doc.Undecodable || c.doc.Untyped {
				if m.xmp != "" {
					t.Fatalf("metadata too large to edit, or undecodable, kept: %.300q", m.xmp)
				}
				return
			}
			// A tagged document's overlay is an artifact (level A: content outside the structure tree must be).
			if art := regexp.MustCompile(`/Artifact BMC\s*q [^Q]* Do Q\s*EMC`).MatchString(m.lastContent); art != c.doc.Tagged {
				t.Fatalf("overlay marked as an artifact: %v, want %v (tagged): %q", art, c.doc.Tagged, m.lastContent)
			}
			prefix := c.doc.Prefix
			if prefix == "" {
				prefix = "pdfaid"
			}
			part, conf := xmpText(m.xmp, prefix+":part"), xmpText(m.xmp, prefix+":conformance")
			if c.removed && (part != "" || conf != "") {
				t.Fatalf("output still declares PDF/A:\n%s", m.xmp)
			}
			if !c.removed && (part != c.pdfa[:1] || conf != c.pdfa[1:]) {
				t.Fatalf("output declares part %q, want %s:\n%s", part, c.pdfa, m.xmp)
			}
			if m.filtered {
				t.Fatalf("metadata stream filtered (PDF/A wants it readable as it is)")
			}
			if p := xmpText(m.xmp, "pdf:Producer"); p != m.info["Producer"] || p == "" {
				t.Fatalf("XMP producer %q, information dictionary's %q", p, m.info["Producer"])
			}
			for _, d := range [][2]string{{"xmp:ModifyDate", "ModDate"}, {"xmp:CreateDate", "CreationDate"}} {
				x, err := time.Parse(time.RFC3339, xmpText(m.xmp, d[0]))
				if err != nil {
					t.Fatalf("%s: %v\n%s", d[0], err, m.xmp)
				}
				i, ok := types.DateTime(m.info[d[1]], false)
				// The input's creation date (its XMP's: its information dictionary has none) is kept; the
				// modification date is the time of marking.
				kept := d[1] == "CreationDate" && !c.doc.Bare
				if !ok || !x.Equal(i) || (x.Year() == 2020) != kept {
					t.Fatalf("XMP %s %s, information dictionary's %s %q", d[0], x, d[1], m.info[d[1]])
				}
			}
		})
	}
}
