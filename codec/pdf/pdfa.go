package pdf

import (
	"bytes"
	"fmt"
	"html"
	"regexp"
	"strconv"
	"strings"

	"github.com/pdfcpu/pdfcpu/pkg/pdfcpu/types"
)

// PDF/A: what a marked document keeps of the PDF/A identification its XMP metadata declares (pdfaid:part and
// pdfaid:conformance in the catalog's /Metadata stream). The overlay is an image under a soft mask, which is
// transparency: PDF/A-1 forbids it, so a PDF/A-1 output would claim a conformance it has lost, and its readers'
// validators and archives' intake would refuse it. PDF/A-2 and -3 allow it, with a PDF/A output intent (the
// overlay's DeviceGray is then allowed, and no page needs a blending colour space of its own). So:
//
//   - part 2 or 3 with a PDF/A output intent: the identification is kept;
//   - any other claim (part 1, part 2 or 3 without an output intent, part 4, which forbids the information
//     dictionary the structural layer writes, or a part this code does not know): the identification is
//     removed from the XMP, and the report says so (EmbedReport.PDFARemoved).
//
// The rest of what the output's metadata says of the document (its dates, producer, thumbnails), for every
// document, PDF/A or not, is metadata.go's, which uses the XMP editing helpers below. The file is not otherwise
// checked against PDF/A (no validator runs here): fonts, colour and the rest are the input's, unchanged by the
// mark.
//
// This file owns reading the PDF/A claim and the in-place XMP text edits; it must not touch the page content.

const (
	nsPDFAID = "http://www.aiim.org/pdfa/ns/id/"
	nsXMP    = "http://ns.adobe.com/xap/1.0/"
	nsPDF    = "http://ns.adobe.com/pdf/1.3/"
	nsRDF    = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"

	// The placeholders of the XMP dates, as long as the dates they stand for ("2026-11-28T17:39:03+00:00").
	modDatePlaceholder    = "FILIGRANE-MOD-DATE-000000"
	createDatePlaceholder = "FILIGRANE-CREATE-DATE-000"
	xmpDateLen            = len("2026-11-28T17:39:03+00:00")

	// maxXMPBytes bounds the metadata stream this code reads and edits (the parser's bound is 256 MB); XMP
	// with embedded thumbnails reaches a few hundred kilobytes. A larger catalog stream loses its /Metadata
	// entry before the validation decodes it (repairMetadata), another is emptied (metadata.go). The memory
	// estimate counts what the streams decode to up to this bound (countMetadata).
	maxXMPBytes = 4 << 20
)

// pdfaClaim reads the PDF/A part and conformance XMP text declares (0, "" for none).
func pdfaClaim(xmp []byte) (part int, conformance string) {
	for _, p := range xmlPrefixes(xmp, nsPDFAID) {
		if v, ok := xmpValue(xmp, p, "part"); ok {
			if n, err := strconv.Atoi(v); err == nil && n > 0 {
				c, _ := xmpValue(xmp, p, "conformance")
				return n, c
			}
		}
	}
	return 0, ""
}

// pdfaOutputIntent reports whether the catalog has a PDF/A output intent (/S /GTS_PDFA1 with its profile).
func (d *document) pdfaOutputIntent() bool {
	root, err := d.ctx.XRefTable.Catalog()
	if err != nil {
		return false
	}
	arr, err := d.ctx.XRefTable.DereferenceArray(root["OutputIntents"])
	if err != nil {
		return false
	}
	for _, o := range arr {
		oi := d.dict(o)
		if oi != nil && d.name(oi["S"]) == "GTS_PDFA1" && oi["DestOutputProfile"] != nil {
			return true
		}
	}
	return false
}

// tagged reports whether the catalog declares the document tagged (/MarkInfo << /Marked true >>).
func (d *document) tagged() bool {
	root, err := d.ctx.XRefTable.Catalog()
	if err != nil {
		return false
	}
	m, err := d.ctx.XRefTable.Dereference(d.dict(root["MarkInfo"])["Marked"])
	b, ok := m.(types.Boolean)
	return err == nil && ok && b.Value()
}

// xmpDate is a PDF date as pdfcpu's writer writes it (D:20261128173903+00'00') in the XMP form, of the
// placeholders' length.
func xmpDate(s string) (string, error) {
	var y, mo, dd, h, mi, sec, th, tm int
	var sign byte
	if _, err := fmt.Sscanf(s, "D:%4d%2d%2d%2d%2d%2d%c%2d'%2d'", &y, &mo, &dd, &h, &mi, &sec, &sign, &th, &tm); err != nil || (sign != '+' && sign != '-') {
		return "", fmt.Errorf("information dictionary date %q not in the writer's form", s)
	}
	x := fmt.Sprintf("%04d-%02d-%02dT%02d:%02d:%02d%c%02d:%02d", y, mo, dd, h, mi, sec, sign, th, tm)
	if len(x) != xmpDateLen {
		return "", fmt.Errorf("information dictionary date %q out of range", s)
	}
	return x, nil
}

var xmlnsRE = regexp.MustCompile(`xmlns:([A-Za-z_][A-Za-z0-9_.-]*)\s*=\s*("[^"]*"|'[^']*')`)

// xmlPrefixes are the prefixes the XML text binds to namespace ns.
func xmlPrefixes(x []byte, ns string) []string {
	var out []string
	for _, m := range xmlnsRE.FindAllSubmatch(x, -1) {
		if string(m[2][1:len(m[2])-1]) == ns {
			out = append(out, string(m[1]))
		}
	}
	return out
}

// propREs match property prefix:local of XMP as an attribute (prefix:local="v") and as an element
// (<prefix:local>v</prefix:local>), the two forms the simple properties take in RDF/XML.
func propREs(prefix, local string) (attr, elem *regexp.Regexp) {
	q := regexp.QuoteMeta(prefix + ":" + local)
	attr = regexp.MustCompile(`(\s` + q + `\s*=\s*)("[^"]*"|'[^']*')`)
	elem = regexp.MustCompile(`(<` + q + `(?:\s[^>]*)?>)([^<]*)(</` + q + `\s*>)`)
	return attr, elem
}

// xmpValue is the text of property prefix:local, unescaped.
func xmpValue(x []byte, prefix, local string) (string, bool) {
	attr, elem := propREs(prefix, local)
	if m := attr.FindSubmatch(x); m != nil {
		return html.UnescapeString(string(m[2][1 : len(m[2])-1])), true
	}
	if m := elem.FindSubmatch(x); m != nil {
		return html.UnescapeString(string(bytes.TrimSpace(m[2]))), true
	}
	return "", false
}

// removePDFAID removes the PDF/A identification properties (part, conformance, amendment, corrigendum,
// revision) under every prefix bound to their namespace. The namespace declaration stays: unused, it is valid.
func removePDFAID(x []byte) []byte {
	for _, p := range xmlPrefixes(x, nsPDFAID) {
		for _, local := range []string{"part", "conformance", "amd", "corr", "rev"} {
			attr, elem := propREs(p, local)
			x = attr.ReplaceAll(x, nil)
			x = elem.ReplaceAll(x, nil)
		}
	}
	return x
}

type xmpValueSet struct {
	ns, prefix, local, value string
	add                      bool // added in an rdf:Description of its own (prefix bound there) when absent
}

var aboutRE = regexp.MustCompile(`:about\s*=\s*("[^"]*"|'[^']*')`)

// setXMPValues gives each property its value, in the form it has; false when one to add cannot be (no
// rdf:RDF element found).
func setXMPValues(x []byte, sets []xmpValueSet) ([]byte, bool) {
	for _, s := range sets {
		v := html.EscapeString(s.value)
		rv := strings.ReplaceAll(v, "$", "$$") // literal in a regexp replacement
		found := false
		for _, p := range xmlPrefixes(x, s.ns) {
			attr, elem := propREs(p, s.local)
			if attr.Match(x) || elem.Match(x) {
				found = true
				x = attr.ReplaceAll(x, []byte("${1}\""+rv+"\""))
				x = elem.ReplaceAll(x, []byte("${1}"+rv+"${3}"))
			}
		}
		if found || !s.add {
			continue
		}
		rdf := xmlPrefixes(x, nsRDF)
		if len(rdf) == 0 {
			return nil, false
		}
		end := []byte("</" + rdf[0] + ":RDF>")
		i := bytes.LastIndex(x, end)
		if i < 0 {
			return nil, false
		}
		// Every rdf:Description of a PDF/A packet must name the same resource: the first one's.
		about := `""`
		if m := aboutRE.FindSubmatch(x); m != nil {
			about = string(m[1])
		}
		desc := fmt.Sprintf(`<%s:Description %s:about=%s xmlns:%s="%s" %s:%s="%s"/>`+"\n",
			rdf[0], rdf[0], about, s.prefix, s.ns, s.prefix, s.local, v)
		x = append(x[:i:i], append([]byte(desc), x[i:]...)...)
	}
	return x, true
}
