package imageio

import (
	"bytes"
	"compress/zlib"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strconv"
	"unicode/utf8"
)

// XMP carried from the input to the output.
//
// The input's XMP packet (an RDF/XML document: rights, creator, captions, keywords, editing settings) is read from
// a JPEG APP1 segment headed "http://ns.adobe.com/xap/1.0/\0" (the first one; the segments of extended XMP,
// headed "http://ns.adobe.com/xmp/extension/\0", are not carried), a PNG iTXt chunk with the keyword
// "XML:com.adobe.xmp" anywhere in the file (inflated when compressed) or a WebP "XMP " chunk; never from a TIFF
// file. normalizeXMP makes it true of the output and every encoder writes it back (JPEG APP1 after the Exif
// APP1, PNG iTXt before the image data, WebP "XMP " chunk after it).
//
// normalizeXMP edits the original bytes by byte ranges and never re-serialises the document (encoding/xml's
// encoder renames namespace prefixes, which XMP readers that match prefixes would then miss). It tokenises the
// packet with encoding/xml (which resolves no external entity and refuses undeclared ones) and finds each
// token's bytes by the decoder's InputOffset. It changes only, wherever they are, as an attribute of an element
// (rdf:Description's shorthand) or as an element:
//   - the thumbnails: xmp:Thumbnails and anything in the xmpGImg namespace (a base64 JPEG is an unmarked copy of
//     the picture) are removed;
//   - xmpNote:HasExtendedXMP is removed, since the extended part is not carried;
//   - tiff:Orientation is set to 1 (the pixels are upright, or "as stored" for PNG and WebP; see the package doc);
//   - tiff:ImageWidth, tiff:ImageLength, exif:PixelXDimension and exif:PixelYDimension are set to the size of the
//     upright output.
//
// An element holding anything but text (a qualified value, a child element, a comment) where one of those
// values is set is removed rather than set. Everything else (dc:rights, dc:creator, xmpRights:*, photoshop:*,
// Iptc4xmpCore:*, crs:*, unknown namespaces, the xpacket wrapper and its padding) is kept byte for byte.
//
// Trailing NUL bytes, which some writers put after the packet, are left out. A packet that is not valid UTF-8,
// not well-formed XML with exactly one root element and an rdf:RDF element, that uses a prefix it does not
// declare, carries a DOCTYPE (entity declarations) or is larger than MaxXMPBytes, before or after the edits, is
// dropped: bad metadata never fails an embed, and a packet we could not check is
// never shipped. The result is checked again: normalising it once more must change nothing.

// MaxXMPBytes is the largest XMP packet kept: what one JPEG APP1 segment holds behind its 29-byte
// "http://ns.adobe.com/xap/1.0/\0" header, as the XMP specification counts it. Larger packets are dropped for
// every output format, so the PNG, JPEG and WebP of one input carry the same XMP.
const MaxXMPBytes = 65502

// Where XMP is found and written.
const (
	xmpJPEGHeader    = "http://ns.adobe.com/xap/1.0/\x00"
	xmpExtJPEGHeader = "http://ns.adobe.com/xmp/extension/\x00" // extended XMP: not carried
	xmpPNGKeyword    = "XML:com.adobe.xmp"
)

// The namespaces whose properties normalizeXMP edits.
const (
	nsRDF     = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"
	nsXMP     = "http://ns.adobe.com/xap/1.0/"
	nsXMPGImg = "http://ns.adobe.com/xap/1.0/g/img/"
	nsXMPNote = "http://ns.adobe.com/xmp/note/"
	nsTIFF    = "http://ns.adobe.com/tiff/1.0/"
	nsEXIF    = "http://ns.adobe.com/exif/1.0/"
)

var errBadXMP = errors.New("malformed XMP")

// xmpEdit replaces x[start:end] with repl.
type xmpEdit struct {
	start, end int
	repl       string
}

// xmpRule says what normalizeXMP does with a property: drop it, or set its value (set is true).
func xmpRule(n xml.Name, width, height int) (drop bool, value string, set bool) {
	switch {
	case n.Space == nsXMPGImg, n.Space == nsXMP && n.Local == "Thumbnails",
		n.Space == nsXMPNote && n.Local == "HasExtendedXMP":
		return true, "", false
	case n.Space == nsTIFF && n.Local == "Orientation":
		return false, "1", true
	case n.Space == nsTIFF && n.Local == "ImageWidth", n.Space == nsEXIF && n.Local == "PixelXDimension":
		return false, strconv.Itoa(width), true
	case n.Space == nsTIFF && n.Local == "ImageLength", n.Space == nsEXIF && n.Local == "PixelYDimension":
		return false, strconv.Itoa(height), true
	}
	return false, "", false
}

// normalizeXMP returns a copy of the packet x made true of an upright width×height output and without
// thumbnails, or nil when x is empty, too large or malformed (see the comment at the top of this file).
func normalizeXMP(x []byte, width, height int) []byte {
	// Some writers end the packet with a NUL, as if it were a C string; XML forbids the character and readers
	// ignore it. It is left out.
	x = bytes.TrimRight(x, "\x00")
	if len(x) == 0 || len(x) > MaxXMPBytes || !utf8.Valid(x) {
		return nil
	}
	edits, err := xmpEdits(x, width, height)
	if err != nil {
		return nil
	}
	out := make([]byte, 0, len(x)+16*len(edits))
	at := 0
	for _, e := range edits {
		out = append(append(out, x[at:e.start]...), e.repl...)
		at = e.end
	}
	out = append(out, x[at:]...)
	if len(out) > MaxXMPBytes {
		return nil
	}
	// Check the result as a reader will see it: well-formed, and with nothing left to remove or set.
	if again, err := xmpEdits(out, width, height); err != nil || len(again) > 0 {
		return nil
	}
	return out
}

// xmpEdits tokenises x and returns the edits normalizeXMP makes, in order and not overlapping; an edit that
// would not change the bytes is left out.
func xmpEdits(x []byte, width, height int) ([]xmpEdit, error) {
	d := xml.NewDecoder(bytes.NewReader(x))
	d.Strict = true
	var edits []xmpEdit
	edit := func(start, end int, repl string) {
		if string(x[start:end]) != repl {
			edits = append(edits, xmpEdit{start, end, repl})
		}
	}
	depth, roots, sawRDF := 0, 0, false
	for {
		start := int(d.InputOffset())
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, errBadXMP
		}
		end := int(d.InputOffset())
		switch t := tok.(type) {
		case xml.Directive: // <!DOCTYPE ...>, with entity declarations: XMP has none
			return nil, errBadXMP
		case xml.CharData:
			if depth == 0 && len(bytes.Trim(t, " \t\r\n\uFEFF")) > 0 {
				return nil, errBadXMP // text outside the root element
			}
		case xml.EndElement:
			depth--
		case xml.StartElement:
			if depth == 0 {
				roots++
			}
			if t.Name.Space == nsRDF && t.Name.Local == "RDF" {
				sawRDF = true
			}
			if err := checkPrefix(x[start+1:end], t.Name); err != nil {
				return nil, err
			}
			drop, value, set := xmpRule(t.Name, width, height)
			if drop {
				elemEnd, _, _, err := skipElement(d)
				if err != nil {
					return nil, err
				}
				edits = append(edits, xmpEdit{start, elemEnd, ""})
				continue
			}
			if err := attrEdits(x[start:end], start, t.Attr, width, height, edit); err != nil {
				return nil, err
			}
			if !set {
				depth++
				continue
			}
			elemEnd, endTag, simple, err := skipElement(d)
			if err != nil {
				return nil, err
			}
			if selfClosed := bytes.HasSuffix(x[start:end], []byte("/>")); !simple || selfClosed {
				// Not a plain text value: remove the property rather than guess at its form. Attribute edits
				// inside the start tag are taken back, since the whole element goes.
				for len(edits) > 0 && edits[len(edits)-1].start >= start {
					edits = edits[:len(edits)-1]
				}
				edits = append(edits, xmpEdit{start, elemEnd, ""})
				continue
			}
			edit(end, endTag, value)
		}
	}
	if roots != 1 || !sawRDF || depth != 0 {
		return nil, errBadXMP
	}
	return edits, nil
}

// skipElement reads the tokens of the element whose start tag was just read, up to its end tag, and returns
// the offsets where its end tag ends and starts and whether it holds text alone.
func skipElement(d *xml.Decoder) (end, endTag int, simple bool, err error) {
	simple = true
	for depth := 1; ; {
		off := int(d.InputOffset())
		tok, err := d.Token()
		if err != nil {
			return 0, 0, false, errBadXMP // io.EOF too: the element is not closed
		}
		switch tok.(type) {
		case xml.StartElement:
			depth++
			simple = false
		case xml.EndElement:
			depth--
			if depth == 0 {
				return int(d.InputOffset()), off, simple, nil
			}
		case xml.CharData:
		case xml.Directive:
			return 0, 0, false, errBadXMP
		default: // comments and processing instructions
			simple = false
		}
	}
}

// checkPrefix refuses a name whose prefix (in raw, the bytes after '<' of its tag) was not declared: the decoder
// then leaves the prefix where the namespace should be, and a thumbnail under an undeclared prefix would escape
// the rules that go by namespace.
func checkPrefix(raw []byte, n xml.Name) error {
	end := bytes.IndexAny(raw, " \t\r\n/>=")
	if end < 0 {
		end = len(raw)
	}
	if prefix, _, ok := bytes.Cut(raw[:end], []byte(":")); ok && string(prefix) == n.Space {
		return errBadXMP
	}
	return nil
}

// xmlAttr is where one attribute is in a start tag: from the white space before it to its closing quote, and
// its value between the quotes.
type xmlAttr struct {
	start, name, valStart, valEnd, end int
}

// attrSpans finds the attributes of a start tag (from '<' to '>') that the decoder has already checked, in
// order.
func attrSpans(tag []byte) ([]xmlAttr, error) {
	isSpace := func(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }
	i := 1
	for i < len(tag) && !isSpace(tag[i]) && tag[i] != '/' && tag[i] != '>' {
		i++
	}
	var out []xmlAttr
	for {
		a := xmlAttr{start: i}
		for i < len(tag) && isSpace(tag[i]) {
			i++
		}
		if i >= len(tag) || tag[i] == '/' || tag[i] == '>' {
			return out, nil
		}
		a.name = i
		for i < len(tag) && !isSpace(tag[i]) && tag[i] != '=' {
			i++
		}
		for i < len(tag) && isSpace(tag[i]) {
			i++
		}
		if i >= len(tag) || tag[i] != '=' {
			return nil, errBadXMP
		}
		i++
		for i < len(tag) && isSpace(tag[i]) {
			i++
		}
		if i >= len(tag) || (tag[i] != '"' && tag[i] != '\'') {
			return nil, errBadXMP
		}
		q := bytes.IndexByte(tag[i+1:], tag[i])
		if q < 0 {
			return nil, errBadXMP
		}
		a.valStart, a.valEnd = i+1, i+1+q
		i = a.valEnd + 1
		a.end = i
		out = append(out, a)
	}
}

// attrEdits makes the edits of the attributes of the start tag tag, which starts at offset base of the packet.
func attrEdits(tag []byte, base int, attrs []xml.Attr, width, height int,
	edit func(start, end int, repl string)) error {
	spans, err := attrSpans(tag)
	if err != nil || len(spans) != len(attrs) {
		return errBadXMP
	}
	for k, a := range attrs {
		s := spans[k]
		if a.Name.Space == "xmlns" || (a.Name.Space == "" && a.Name.Local == "xmlns") {
			continue // a namespace declaration
		}
		if err := checkPrefix(tag[s.name:s.valStart], a.Name); err != nil {
			return err
		}
		switch drop, value, set := xmpRule(a.Name, width, height); {
		case drop:
			edit(base+s.start, base+s.end, "")
		case set:
			edit(base+s.valStart, base+s.valEnd, value)
		}
	}
	return nil
}

// checkXMP returns an error for XMP an encoder must not write: larger than MaxXMPBytes or not UTF-8.
// Picture.XMP always passes.
func checkXMP(x []byte) error {
	if len(x) > MaxXMPBytes {
		return fmt.Errorf("imageio: XMP of %d bytes exceeds %d", len(x), MaxXMPBytes)
	}
	if !utf8.Valid(x) {
		return errors.New("imageio: XMP is not UTF-8")
	}
	return nil
}

// pngXMP returns the packet of an iTXt chunk's body when its keyword is XML:com.adobe.xmp, inflated when it is
// compressed (no further than one byte past MaxXMPBytes: normalizeXMP drops a packet that large), and nil
// otherwise.
func pngXMP(body []byte) []byte {
	k := bytes.IndexByte(body, 0)
	if k < 0 || string(body[:k]) != xmpPNGKeyword || k+3 > len(body) {
		return nil
	}
	compressed, method, rest := body[k+1], body[k+2], body[k+3:]
	for range 2 { // the language tag and the translated keyword
		j := bytes.IndexByte(rest, 0)
		if j < 0 {
			return nil
		}
		rest = rest[j+1:]
	}
	switch {
	case compressed == 0:
		return rest
	case compressed == 1 && method == 0:
		zr, err := zlib.NewReader(bytes.NewReader(rest))
		if err != nil {
			return nil
		}
		x, err := io.ReadAll(io.LimitReader(zr, MaxXMPBytes+1))
		if err != nil {
			return nil
		}
		return x
	}
	return nil
}

// pngXMPChunk is the body of the uncompressed iTXt chunk that carries x: keyword, compression flag and method,
// empty language tag and translated keyword, the packet.
func pngXMPChunk(x []byte) []byte {
	b := make([]byte, 0, len(xmpPNGKeyword)+5+len(x))
	b = append(b, xmpPNGKeyword...)
	b = append(b, 0, 0, 0, 0, 0)
	return append(b, x...)
}
