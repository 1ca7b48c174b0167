package imageio

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"encoding/xml"
	"image"
	"image/jpeg"
	"image/png"
	"strconv"
	"strings"
	"testing"

	"filigrane/codec/imageio/imageiotest"
)

const (
	xmpTIFF = "http://ns.adobe.com/tiff/1.0/ "
	xmpEXIF = "http://ns.adobe.com/exif/1.0/ "
)

// checkNormalizedXMP checks that x is PhotoXMP's packet made true of an upright w×h image: the rights, creator,
// usage terms, credit and camera raw settings byte for byte, orientation 1, the output's size, and no
// thumbnail or extended-XMP pointer.
func checkNormalizedXMP(t *testing.T, x []byte, w, h int) {
	t.Helper()
	if x == nil {
		t.Fatal("no XMP")
	}
	for _, keep := range []string{imageiotest.XMPCreator, imageiotest.XMPRights, imageiotest.XMPUsageTerms,
		imageiotest.XMPCredit, imageiotest.XMPCameraRaw, imageiotest.XMPPacketHead, imageiotest.XMPPacketTail} {
		if !bytes.Contains(x, []byte(keep)) {
			t.Errorf("XMP lost %q", keep)
		}
	}
	for _, gone := range []string{imageiotest.XMPThumbnailMark, "Thumbnails", "xmpGImg:", "g:image", "HasExtendedXMP"} {
		if bytes.Contains(x, []byte(gone)) {
			t.Errorf("XMP still holds %q", gone)
		}
	}
	props, err := imageiotest.XMPProps(x)
	if err != nil {
		t.Fatalf("XMP does not parse: %v\n%s", err, x)
	}
	want := map[string]string{
		xmpTIFF + "Orientation": "1", xmpTIFF + "ImageWidth": strconv.Itoa(w), xmpTIFF + "ImageLength": strconv.Itoa(h),
		xmpEXIF + "PixelXDimension": strconv.Itoa(w), xmpEXIF + "PixelYDimension": strconv.Itoa(h),
		"http://ns.adobe.com/xap/1.0/ CreatorTool":   "Adobe Photoshop Lightroom Classic 13.0 (Macintosh)",
		"http://ns.adobe.com/xap/1.0/rights/ Marked": "True",
	}
	for k, v := range want {
		if got := props[k]; len(got) != 1 || got[0] != v {
			t.Errorf("%s = %q, want [%q]", k, got, v)
		}
	}
}

func TestNormalizeXMP(t *testing.T) {
	for _, elem := range []bool{false, true} {
		in := imageiotest.PhotoXMP(imageiotest.XMPPhoto{Orientation: 6, Width: 384, Height: 256,
			OrientationElement: elem, Padding: 2000})
		orig := bytes.Clone(in)
		out := normalizeXMP(in, 256, 384)
		if !bytes.Equal(in, orig) {
			t.Fatal("the input was modified")
		}
		checkNormalizedXMP(t, out, 256, 384)
		if again := normalizeXMP(out, 256, 384); !bytes.Equal(again, out) {
			t.Fatalf("element %v: normalising twice changes the XMP again", elem)
		}
		// The padding and everything around the edits is where it was: the packet was edited, not rewritten.
		if !bytes.HasSuffix(out, append(bytes.Repeat([]byte(" "), 2000), imageiotest.XMPPacketTail...)) {
			t.Error("the padding before the closing xpacket changed")
		}
	}
	// A property holding more than text (a qualified value) is removed rather than set.
	x := strings.Replace(string(imageiotest.PhotoXMP(imageiotest.XMPPhoto{Orientation: 6, Width: 2, Height: 3})),
		"<tiff:ImageLength>3</tiff:ImageLength>",
		`<tiff:ImageLength rdf:parseType="Resource"><rdf:value>3</rdf:value></tiff:ImageLength>`, 1)
	out := normalizeXMP([]byte(x), 3, 2)
	if props, err := imageiotest.XMPProps(out); err != nil || props[xmpTIFF+"ImageLength"] != nil ||
		props["http://www.w3.org/1999/02/22-rdf-syntax-ns# value"] != nil {
		t.Errorf("qualified ImageLength kept: %v %q", err, props[xmpTIFF+"ImageLength"])
	}
	// Prefixes are the packet's own: a property is found by its namespace, whatever the prefix.
	renamed := strings.ReplaceAll(string(imageiotest.PhotoXMP(imageiotest.XMPPhoto{Orientation: 8, Width: 2, Height: 3})),
		"tiff:", "T:")
	renamed = strings.ReplaceAll(renamed, "xmlns:tiff=", "xmlns:T=")
	out = normalizeXMP([]byte(renamed), 3, 2)
	if props, err := imageiotest.XMPProps(out); err != nil || strings.Join(props[xmpTIFF+"Orientation"], ",") != "1" ||
		!bytes.Contains(out, []byte(`xmlns:T="http://ns.adobe.com/tiff/1.0/"`)) {
		t.Errorf("renamed prefix: %v %q", err, props[xmpTIFF+"Orientation"])
	}
}

// XMP that is not a well-formed packet we can check is dropped (nil), never half-edited, never a panic.
func TestNormalizeXMPDropsMalformed(t *testing.T) {
	good := string(imageiotest.PhotoXMP(imageiotest.XMPPhoto{Orientation: 6, Width: 20, Height: 10}))
	// A packet exactly MaxXMPBytes long is kept; one whose width grows from 1 to 5 digits when set is over the
	// limit after the edits.
	bare := `<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">` +
		`<rdf:Description xmlns:tiff="http://ns.adobe.com/tiff/1.0/" tiff:ImageWidth="1"/></rdf:RDF></x:xmpmeta>`
	full := bare + strings.Repeat(" ", MaxXMPBytes-len(bare))
	if out := normalizeXMP([]byte(full), 1, 10); !bytes.Equal(out, []byte(full)) {
		t.Fatalf("a packet of exactly %d bytes was not kept as it is (%d bytes)", MaxXMPBytes, len(out))
	}
	if out := normalizeXMP([]byte(full), 12345, 10); out != nil {
		t.Fatalf("a packet grown past the limit was kept (%d bytes)", len(out))
	}
	cases := map[string]string{
		"empty":           "",
		"truncated":       good[:len(good)/2],
		"mismatched tags": strings.Replace(good, "</dc:rights>", "</dc:right>", 1),
		"oversized":       strings.Replace(good, "</x:xmpmeta>", "</x:xmpmeta>"+strings.Repeat(" ", MaxXMPBytes), 1),
		"doctype": strings.Replace(good, imageiotest.XMPPacketHead,
			imageiotest.XMPPacketHead+`<!DOCTYPE x:xmpmeta [<!ENTITY a "aaaaaaaaaa">]>`, 1),
		"external entity": strings.Replace(good, imageiotest.XMPPacketHead,
			imageiotest.XMPPacketHead+`<!DOCTYPE x:xmpmeta [<!ENTITY e SYSTEM "file:///etc/passwd">]>`, 1),
		"undeclared entity": strings.Replace(good, "All rights reserved.", "&copy; reserved.", 1),
		"not UTF-8":         strings.Replace(good, "©", "\xa9", 1),
		"no rdf:RDF":        `<x:xmpmeta xmlns:x="adobe:ns:meta/"><a/></x:xmpmeta>`,
		"two roots":         good + "<x:xmpmeta xmlns:x=\"adobe:ns:meta/\"/>",
		"text outside":      good + "trailing text",
		// A thumbnail under a prefix that is not declared would escape the rules that go by namespace.
		"undeclared prefix": strings.Replace(good, "<dc:subject>",
			`<img:image>/9j/`+imageiotest.XMPThumbnailMark+`</img:image><dc:subject>`, 1),
		"undeclared attribute prefix": strings.Replace(good, "xmpRights:Marked=", "img:image=\"/9j/\" xmpRights:Marked=", 1),
		"encoding":                    `<?xml version="1.0" encoding="ISO-8859-1"?>` + good[len(imageiotest.XMPPacketHead):],
	}
	for name, x := range cases {
		if out := normalizeXMP([]byte(x), 20, 10); out != nil {
			t.Errorf("%s: kept %d bytes", name, len(out))
		}
	}
}

// xmpInputs returns a w×h stored image with XMP packet x as a JPEG (APP1 Exif saying orientation 6, APP1 XMP,
// then an extended-XMP APP1 and a second XMP APP1 that must not be carried), a PNG (iTXt before the image data),
// a PNG with a compressed iTXt after the image data and a WebP (VP8X with the XMP flag, VP8L, "XMP ").
func xmpInputs(t *testing.T, src *image.NRGBA, x []byte) map[string][]byte {
	t.Helper()
	jpg := encodeWith(t, func(b *bytes.Buffer) error { return jpeg.Encode(b, src, &jpeg.Options{Quality: 95}) })
	ext := append([]byte(xmpExtJPEGHeader), bytes.Repeat([]byte("EXTENDED-XMP-PART"), 50)...)
	second := append([]byte(xmpJPEGHeader), []byte(`<x:xmpmeta xmlns:x="adobe:ns:meta/">SECOND-PACKET</x:xmpmeta>`)...)
	jpg = withJPEGSegments(jpg, jpegSegment(0xE1, exifOrientation(6, false)),
		jpegSegment(0xE1, append([]byte(xmpJPEGHeader), x...)), jpegSegment(0xE1, ext), jpegSegment(0xE1, second))

	plain := encodeWith(t, func(b *bytes.Buffer) error { return png.Encode(b, src) })
	pngFile := append(bytes.Clone(plain[:pngHeaderLen]), pngChunk(nil, "iTXt", pngXMPChunk(x))...)
	pngFile = append(pngFile, plain[pngHeaderLen:]...)
	var z bytes.Buffer
	z.WriteString(xmpPNGKeyword + "\x00\x01\x00en\x00XMP\x00")
	zw := zlib.NewWriter(&z)
	zw.Write(x)
	zw.Close()
	iend := len(plain) - 12
	late := append(bytes.Clone(plain[:iend]), pngChunk(nil, "iTXt", z.Bytes())...)
	late = append(late, plain[iend:]...)

	lossless := encodeWith(t, func(b *bytes.Buffer) error { return EncodeWebP(b, src, Metadata{}) })
	b := src.Bounds()
	webp := extendedWebP(lossless, 0x04, b.Dx(), b.Dy(), "XMP ", x)
	return map[string][]byte{"jpeg": jpg, "png": pngFile, "png-late-compressed": late, "webp": webp}
}

// A photo's XMP, from a JPEG (orientation 6 in the EXIF and the XMP), a PNG or a WebP, reaches every output
// (JPEG, PNG on the three PNG paths, WebP) normalised: rights and creator byte for byte, orientation 1, the
// output's size, no thumbnail bytes anywhere in the file, no extended XMP; and reads back the same.
func TestXMPThroughEncoders(t *testing.T) {
	src := pattern(48, 24)
	for _, elem := range []bool{false, true} {
		x := imageiotest.PhotoXMP(imageiotest.XMPPhoto{Orientation: 6, Width: 48, Height: 24, OrientationElement: elem})
		for in, data := range xmpInputs(t, src, x) {
			p, err := DecodeBytes(data, Limits{})
			if err != nil {
				t.Fatalf("%s: %v", in, err)
			}
			w, h := 48, 24
			if in == "jpeg" {
				w, h = 24, 48
			}
			if p.Width != w || p.Height != h {
				t.Fatalf("%s: %dx%d, want %dx%d", in, p.Width, p.Height, w, h)
			}
			checkNormalizedXMP(t, p.XMP, w, h)
			nrgba := p.Image.(*image.NRGBA)
			rows := filteredRows(nrgba)
			var z bytes.Buffer
			zw, _ := zlib.NewWriterLevel(&z, zlib.BestSpeed)
			zw.Write(rows)
			zw.Close()
			outputs := map[string][]byte{
				"jpeg":    encodeWith(t, func(b *bytes.Buffer) error { return EncodeJPEG(b, p.Image, 90, p.Metadata) }),
				"png":     encodeWith(t, func(b *bytes.Buffer) error { return EncodePNG(b, p.Image, p.Metadata) }),
				"pngrows": encodeWith(t, func(b *bytes.Buffer) error { return EncodePNGRows(b, w, h, false, rows, p.Metadata) }),
				"pngzlib": encodeWith(t, func(b *bytes.Buffer) error {
					return EncodePNGZlib(b, w, h, false, z.Bytes(), p.Metadata)
				}),
				"webp": encodeWith(t, func(b *bytes.Buffer) error { return EncodeWebP(b, p.Image, p.Metadata) }),
				"png-image/png": encodeWith(t, func(b *bytes.Buffer) error { // a type the own encoder does not take
					return EncodePNG(b, image.NewRGBA(image.Rect(0, 0, w, h)), p.Metadata)
				}),
			}
			for out, file := range outputs {
				name := in + "->" + out
				if got := imageiotest.XMPOf(file); !bytes.Equal(got, p.XMP) {
					t.Errorf("%s: the file carries %d bytes of XMP, want %d", name, len(got), len(p.XMP))
				}
				for _, leak := range []string{imageiotest.XMPThumbnailMark, "EXTENDED-XMP-PART", "SECOND-PACKET"} {
					if bytes.Contains(file, []byte(leak)) {
						t.Errorf("%s: %s in the file", name, leak)
					}
				}
				q, err := DecodeBytes(file, Limits{})
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				if !bytes.Equal(q.XMP, p.XMP) {
					t.Errorf("%s: XMP read back differs", name)
				}
				if strings.HasPrefix(out, "png") {
					if _, err := png.Decode(bytes.NewReader(file)); err != nil { // checks every chunk's CRC
						t.Errorf("%s: image/png rejects it: %v", name, err)
					}
					if i, d := bytes.Index(file, []byte("iTXt")), bytes.Index(file, []byte("IDAT")); i < 0 || i > d {
						t.Errorf("%s: iTXt at %d, IDAT at %d", name, i, d)
					}
				}
				if out == "jpeg" && p.EXIF != nil { // JFIF APP0, Exif APP1, then XMP APP1
					if e, x := bytes.Index(file, []byte("Exif\x00\x00")), bytes.Index(file, []byte(xmpJPEGHeader)); e < 0 || x < e {
						t.Errorf("%s: Exif at %d, XMP at %d", name, e, x)
					}
				}
				if out == "webp" { // VP8X says XMP, the chunk sizes add up to the RIFF size
					flags := byte(0x04)
					if p.EXIF != nil {
						flags |= 0x08
					}
					if string(file[12:16]) != "VP8X" || file[20] != flags || int(binary.LittleEndian.Uint32(file[4:]))+8 != len(file) {
						t.Errorf("%s: container %q flags %#x (want %#x) size %d of %d", name, file[12:16], file[20], flags,
							binary.LittleEndian.Uint32(file[4:]), len(file))
					}
				}
			}
		}
	}

	// Broken XMP is dropped and the image still decodes; the second XMP segment of the JPEG is not taken instead.
	x := imageiotest.PhotoXMP(imageiotest.XMPPhoto{Orientation: 6, Width: 48, Height: 24})
	for in, data := range xmpInputs(t, src, x[:len(x)-200]) {
		if q, err := DecodeBytes(data, Limits{}); err != nil || q.XMP != nil {
			t.Errorf("%s with truncated XMP: %v, XMP %d bytes", in, err, len(q.XMP))
		}
	}
	// Encoders refuse XMP that one JPEG segment cannot hold, or that is not UTF-8.
	for _, bad := range [][]byte{make([]byte, MaxXMPBytes+1), []byte("\xff\xfe<x/>")} {
		md := Metadata{XMP: bad}
		for name, err := range map[string]error{
			"jpeg":    EncodeJPEG(&bytes.Buffer{}, src, 90, md),
			"png":     EncodePNG(&bytes.Buffer{}, src, md),
			"pngrows": EncodePNGRows(&bytes.Buffer{}, 48, 24, false, filteredRows(src), md),
			"webp":    EncodeWebP(&bytes.Buffer{}, src, md),
		} {
			if err == nil {
				t.Errorf("%s wrote XMP of %d bytes", name, len(bad))
			}
		}
	}
}

// Attribute values in single quotes, white space around '=' and a self-closing rdf:Description: only the values
// change.
func TestNormalizeXMPQuotesAndWhitespace(t *testing.T) {
	x := `<x:xmpmeta xmlns:x='adobe:ns:meta/'><rdf:RDF xmlns:rdf='http://www.w3.org/1999/02/22-rdf-syntax-ns#'>` +
		"<rdf:Description rdf:about='' xmlns:tiff='http://ns.adobe.com/tiff/1.0/'\n\ttiff:Orientation = '3'" +
		` tiff:ImageWidth="1"/></rdf:RDF></x:xmpmeta>`
	want := `<x:xmpmeta xmlns:x='adobe:ns:meta/'><rdf:RDF xmlns:rdf='http://www.w3.org/1999/02/22-rdf-syntax-ns#'>` +
		"<rdf:Description rdf:about='' xmlns:tiff='http://ns.adobe.com/tiff/1.0/'\n\ttiff:Orientation = '1'" +
		` tiff:ImageWidth="640"/></rdf:RDF></x:xmpmeta>`
	if got := normalizeXMP([]byte(x), 640, 480); string(got) != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	// A NUL after the packet, as some writers end it, is left out; the packet is kept.
	if got := normalizeXMP([]byte(x+"\x00\x00"), 640, 480); string(got) != want {
		t.Errorf("with trailing NULs: got\n%q", got)
	}
	// A byte order mark, an XML declaration and CRLF line ends around it are kept too.
	for _, wrap := range [][2]string{{"\uFEFF", ""}, {`<?xml version="1.0" encoding="UTF-8"?>` + "\r\n", "\r\n"}} {
		crlf := strings.ReplaceAll(x, "\n", "\r\n")
		got := normalizeXMP([]byte(wrap[0]+crlf+wrap[1]), 640, 480)
		if w := wrap[0] + strings.ReplaceAll(want, "\n", "\r\n") + wrap[1]; string(got) != w {
			t.Errorf("got\n%q\nwant\n%q", got, w)
		}
	}
}

// FuzzNormalizeXMP: on any bytes, normalizeXMP does not panic and returns nil or a packet of at most
// MaxXMPBytes that an independent reader parses, with orientation 1 and the output's size wherever they are
// simple properties, no thumbnail, and that normalising again leaves as it is.
func FuzzNormalizeXMP(f *testing.F) {
	f.Add(imageiotest.PhotoXMP(imageiotest.XMPPhoto{Orientation: 6, Width: 4000, Height: 3000}))
	f.Add(imageiotest.PhotoXMP(imageiotest.XMPPhoto{Orientation: 8, Width: 1, Height: 2, OrientationElement: true}))
	f.Add([]byte(`<x:xmpmeta xmlns:x='adobe:ns:meta/'><rdf:RDF xmlns:rdf='http://www.w3.org/1999/02/22-rdf-syntax-ns#'>` +
		`<rdf:Description xmlns:tiff='http://ns.adobe.com/tiff/1.0/' tiff:Orientation='3'/></rdf:RDF></x:xmpmeta>`))
	f.Fuzz(func(t *testing.T, b []byte) {
		out := normalizeXMP(b, 640, 480)
		if out == nil {
			return
		}
		if len(out) > MaxXMPBytes {
			t.Fatalf("%d bytes", len(out))
		}
		props, err := imageiotest.XMPProps(out)
		if err != nil {
			t.Fatalf("kept XMP does not parse: %v", err)
		}
		for k, want := range map[string]string{xmpTIFF + "Orientation": "1", xmpTIFF + "ImageWidth": "640",
			xmpEXIF + "PixelXDimension": "640", xmpTIFF + "ImageLength": "480", xmpEXIF + "PixelYDimension": "480"} {
			for _, v := range props[k] {
				if v != want {
					t.Fatalf("%s = %q", k, v)
				}
			}
		}
		d := xml.NewDecoder(bytes.NewReader(out))
		for {
			tok, err := d.Token()
			if err != nil {
				break
			}
			if se, ok := tok.(xml.StartElement); ok {
				for _, n := range append([]xml.Name{se.Name}, attrNames(se.Attr)...) {
					if n.Space == nsXMPGImg || n == (xml.Name{Space: nsXMP, Local: "Thumbnails"}) ||
						n == (xml.Name{Space: nsXMPNote, Local: "HasExtendedXMP"}) {
						t.Fatalf("%v kept", n)
					}
				}
			}
		}
		if again := normalizeXMP(out, 640, 480); !bytes.Equal(again, out) {
			t.Fatal("not idempotent")
		}
	})
}

func attrNames(attrs []xml.Attr) []xml.Name {
	var out []xml.Name
	for _, a := range attrs {
		out = append(out, a.Name)
	}
	return out
}
