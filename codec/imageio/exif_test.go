package imageio

import (
	"bytes"
	"encoding/binary"
	"image"
	"image/jpeg"
	"image/png"
	"os"
	"testing"

	"golang.org/x/image/tiff"

	"filigrane/codec/imageio/imageiotest"
)

// thumbnail is a JPEG-looking thumbnail whose body is recognisable in any file that still carries it.
var thumbnail = append(append([]byte{0xFF, 0xD8, 0xFF, 0xE0}, bytes.Repeat([]byte("UNMARKED-THUMBNAIL:"), 40)...),
	0xFF, 0xD9)

// makerNotePreview is a MakerNote holding a small JPEG preview that no IFD points at, between bytes that must
// survive.
var makerNotePreview = append(append([]byte("MAKER-HEAD"), append(append([]byte{0xFF, 0xD8, 0xFF, 0xDB},
	bytes.Repeat([]byte("UNMARKED-PREVIEW:"), 20)...), 0xFF, 0xD9)...), []byte("MAKER-TAIL")...)

func testCamera(bigEndian bool) imageiotest.Camera {
	return imageiotest.Camera{
		BigEndian:        bigEndian,
		Orientation:      6,
		Make:             "FiliCam",
		Model:            "Model 7 Mk II",
		DateTimeOriginal: "2024:05:17 10:42:07",
		GPSLatitude:      [3][2]uint32{{48, 1}, {51, 1}, {2904, 100}},
		PixelX:           32,
		PixelY:           16,
		MakerNote:        makerNotePreview,
		Thumbnail:        thumbnail,
	}
}

// checkNormalizedEXIF checks that exif is testCamera's EXIF made true of an upright w×h image: orientation 1,
// the same camera, date and GPS fields, the output's size, no IFD1 and no thumbnail or preview bytes.
func checkNormalizedEXIF(t *testing.T, exif []byte, w, h int) {
	t.Helper()
	info, err := imageiotest.ReadEXIF(exif)
	if err != nil {
		t.Fatalf("EXIF does not parse: %v", err)
	}
	if o, ok := info.Uint(info.IFD0, 0x0112); !ok || o != 1 {
		t.Errorf("orientation %d (present %v), want 1", o, ok)
	}
	if info.String(info.IFD0, 0x010F) != "FiliCam" || info.String(info.IFD0, 0x0110) != "Model 7 Mk II" ||
		info.String(info.Exif, 0x9003) != "2024:05:17 10:42:07" {
		t.Errorf("camera fields lost: make %q model %q date %q", info.String(info.IFD0, 0x010F),
			info.String(info.IFD0, 0x0110), info.String(info.Exif, 0x9003))
	}
	lat := info.GPS[0x0002]
	if lat.Type != 5 || lat.Count != 3 || info.String(info.GPS, 0x0001) != "N" {
		t.Errorf("GPS latitude lost: %+v", lat)
	} else {
		var bo binary.ByteOrder = binary.LittleEndian
		if info.BigEndian {
			bo = binary.BigEndian
		}
		if bo.Uint32(lat.Value[16:]) != 2904 || bo.Uint32(lat.Value[20:]) != 100 || bo.Uint32(lat.Value) != 48 {
			t.Errorf("GPS latitude changed: % x", lat.Value)
		}
	}
	if x, _ := info.Uint(info.Exif, 0xA002); int(x) != w {
		t.Errorf("PixelXDimension %d, want %d", x, w)
	}
	if y, _ := info.Uint(info.Exif, 0xA003); int(y) != h {
		t.Errorf("PixelYDimension %d, want %d", y, h)
	}
	if info.NextIFD != 0 {
		t.Errorf("IFD1 still linked at %d", info.NextIFD)
	}
	mn := info.Exif[0x927C].Value
	if !bytes.HasPrefix(mn, []byte("MAKER-HEAD")) || !bytes.HasSuffix(mn, []byte("MAKER-TAIL")) {
		t.Errorf("MakerNote around the preview changed: %q", mn)
	}
	for _, leak := range []string{"UNMARKED-THUMBNAIL", "UNMARKED-PREVIEW"} {
		if bytes.Contains(exif, []byte(leak)) {
			t.Errorf("%s bytes still in the EXIF", leak)
		}
	}
}

func TestNormalizeEXIF(t *testing.T) {
	for _, be := range []bool{false, true} {
		in := imageiotest.CameraEXIF(testCamera(be))
		orig := bytes.Clone(in)
		out := normalizeEXIF(in, 16, 32)
		if out == nil {
			t.Fatalf("big endian %v: a well-formed EXIF was dropped", be)
		}
		if !bytes.Equal(in, orig) {
			t.Fatal("the input was modified")
		}
		if len(out) != len(in) {
			t.Fatalf("length %d -> %d: the structure was re-serialised", len(in), len(out))
		}
		checkNormalizedEXIF(t, out, 16, 32)
		// Offsets stay valid because nothing moves: the Make string is where it was.
		if i := bytes.Index(in, []byte("FiliCam\x00")); i < 0 || !bytes.Equal(out[i:i+8], in[i:i+8]) {
			t.Fatal("Make moved")
		}
		if again := normalizeEXIF(out, 16, 32); !bytes.Equal(again, out) {
			t.Fatal("normalising twice changes the EXIF again")
		}
	}
	// A pixel dimension stored as SHORT becomes a LONG when the output is wider than a SHORT holds.
	out := normalizeEXIF(imageiotest.CameraEXIF(testCamera(false)), 70000, 12)
	info, err := imageiotest.ReadEXIF(out)
	if err != nil {
		t.Fatal(err)
	}
	if x, _ := info.Uint(info.Exif, 0xA002); x != 70000 {
		t.Fatalf("PixelXDimension %d", x)
	}
	if y, _ := info.Uint(info.Exif, 0xA003); y != 12 || info.Exif[0xA003].Type != 3 {
		t.Fatalf("PixelYDimension %d type %d, want SHORT 12", y, info.Exif[0xA003].Type)
	}
}

// Malformed EXIF is dropped (nil), never half-patched and never a panic.
func TestNormalizeEXIFDropsMalformed(t *testing.T) {
	good := imageiotest.CameraEXIF(testCamera(false))
	le := binary.LittleEndian
	mod := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	// The Exif IFD pointer is IFD0's fourth entry (8 + 2 + 3*12), its value 8 bytes further.
	const exifPtr = 8 + 2 + 3*12 + 8
	exifIFD := int(le.Uint32(good[exifPtr:]))
	loopSelf := &imageiotest.IFD{Entries: []imageiotest.Entry{{Tag: 0x010F, ASCII: "x"}}}
	loopSelf.Next = loopSelf
	cases := map[string][]byte{
		"empty":            nil,
		"header only":      good[:8],
		"truncated IFD0":   good[:30],
		"truncated values": good[:exifIFD+10],
		"bad byte order":   mod(func(b []byte) []byte { copy(b, "XX"); return b }),
		"bad magic":        mod(func(b []byte) []byte { b[2] = 43; return b }),
		"no IFD0":          mod(func(b []byte) []byte { le.PutUint32(b[4:], 0); return b }),
		"IFD0 past end":    mod(func(b []byte) []byte { le.PutUint32(b[4:], uint32(len(b))); return b }),
		"Exif IFD loops to IFD0": mod(func(b []byte) []byte {
			le.PutUint32(b[exifPtr:], 8)
			return b
		}),
		"Exif IFD points at itself": imageiotest.TIFF(false, func() *imageiotest.IFD {
			d := &imageiotest.IFD{Entries: []imageiotest.Entry{{Tag: 0x9003, ASCII: "2024:01:01 00:00:00"}}}
			d.Entries = append(d.Entries, imageiotest.Entry{Tag: 0x8769, Sub: d})
			return &imageiotest.IFD{Entries: []imageiotest.Entry{{Tag: 0x8769, Sub: d}}}
		}()),
		"next IFD loop": imageiotest.TIFF(true, &imageiotest.IFD{
			Entries: []imageiotest.Entry{{Tag: 0x0112, Shorts: []uint16{6}}}, Next: loopSelf}),
		"huge count": mod(func(b []byte) []byte {
			le.PutUint32(b[8+2+4:], 0xFFFFFFFF) // Make: 4 G characters
			return b
		}),
		"value offset past end": mod(func(b []byte) []byte {
			le.PutUint32(b[8+2+8:], uint32(len(b)-3)) // Make's 8 bytes start 3 bytes before the end
			return b
		}),
		"too many entries": mod(func(b []byte) []byte {
			le.PutUint16(b[8:], maxEXIFEntries+1)
			return append(b, make([]byte, 12*maxEXIFEntries)...)
		}),
		"Exif pointer is ASCII": mod(func(b []byte) []byte {
			le.PutUint16(b[exifPtr-6:], 2)
			return b
		}),
		"SubIFDs": imageiotest.TIFF(false, &imageiotest.IFD{Entries: []imageiotest.Entry{
			{Tag: 0x014A, Sub: &imageiotest.IFD{Entries: []imageiotest.Entry{{Tag: 0x0100, Longs: []uint32{4000}}}}}}}),
		"too large": imageiotest.TIFF(false, &imageiotest.IFD{Entries: []imageiotest.Entry{
			{Tag: 0x927C, Undefined: make([]byte, MaxEXIFBytes)}}}),
	}
	// Too deep: IFD0 -> Exif -> Interop -> Interop -> Interop.
	deep := &imageiotest.IFD{Entries: []imageiotest.Entry{{Tag: 0x0001, ASCII: "R98"}}}
	for i := 0; i < maxEXIFDepth+1; i++ {
		deep = &imageiotest.IFD{Entries: []imageiotest.Entry{{Tag: 0xA005, Sub: deep}}}
	}
	cases["too deep"] = imageiotest.TIFF(false, deep)
	// Too many IFDs: a chain of maxEXIFIFDs+1 thumbnails.
	var chain *imageiotest.IFD
	for i := 0; i <= maxEXIFIFDs; i++ {
		chain = &imageiotest.IFD{Entries: []imageiotest.Entry{{Tag: 0x0103, Shorts: []uint16{6}}}, Next: chain}
	}
	cases["too many IFDs"] = imageiotest.TIFF(false, chain)

	for name, b := range cases {
		if out := normalizeEXIF(b, 10, 10); out != nil {
			t.Errorf("%s: kept %d bytes, want dropped", name, len(out))
		}
	}
	// The control: the same structures, well formed, are kept.
	for name, b := range map[string][]byte{
		"good": good,
		"just under the limit": imageiotest.TIFF(false, &imageiotest.IFD{Entries: []imageiotest.Entry{
			{Tag: 0x927C, Undefined: make([]byte, MaxEXIFBytes-8-2-12-4-1)}}}), // 65526 bytes: the value is padded to even
		"deep as allowed":        imageiotest.TIFF(false, deepIFD(maxEXIFDepth)),
		"thumbnail past the end": mod(func(b []byte) []byte { return b[:len(b)-len(thumbnail)/2] }),
	} {
		if out := normalizeEXIF(b, 10, 10); out == nil {
			t.Errorf("%s: dropped", name)
		}
	}
}

// deepIFD is an IFD0 with a chain of depth Interoperability pointers below it.
func deepIFD(depth int) *imageiotest.IFD {
	d := &imageiotest.IFD{Entries: []imageiotest.Entry{{Tag: 0x0001, ASCII: "R98"}}}
	for i := 0; i < depth; i++ {
		d = &imageiotest.IFD{Entries: []imageiotest.Entry{{Tag: 0xA005, Sub: d}}}
	}
	return d
}

// The EXIF of a JPEG, PNG or WebP input is read, normalised for the upright picture, and written back by every
// encoder (JPEG APP1, PNG eXIf on the 8-bit, rows and 16-bit paths, WebP EXIF), where this package and the
// standard decoders read it back.
func TestEXIFThroughEncoders(t *testing.T) {
	src := pattern(32, 16)
	exif := imageiotest.CameraEXIF(testCamera(true))
	icc := fakeICC("RGB ", 500)
	jpg := encodeWith(t, func(b *bytes.Buffer) error { return jpeg.Encode(b, src, &jpeg.Options{Quality: 95}) })
	jpg = withJPEGSegments(jpg, jpegSegment(0xE1, append([]byte("Exif\x00\x00"), exif...)),
		jpegSegment(0xE1, append([]byte("Exif\x00\x00"), imageiotest.CameraEXIF(imageiotest.Camera{Make: "Second"})...)))
	p, err := DecodeBytes(jpg, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Orientation != 6 || p.Width != 16 || p.Height != 32 {
		t.Fatalf("orientation %d, %dx%d", p.Orientation, p.Width, p.Height)
	}
	checkNormalizedEXIF(t, p.EXIF, 16, 32)

	md := Metadata{ICC: icc, EXIF: p.EXIF}
	deep := image.NewNRGBA64(p.Image.Bounds())
	for y := 0; y < deep.Rect.Dy(); y++ {
		for x := 0; x < deep.Rect.Dx(); x++ {
			deep.Set(x, y, p.Image.At(x, y))
		}
	}
	nrgba := p.Image.(*image.NRGBA)
	rows := filteredRows(nrgba)
	outputs := map[string][]byte{
		"jpeg":      encodeWith(t, func(b *bytes.Buffer) error { return EncodeJPEG(b, p.Image, 95, md) }),
		"png":       encodeWith(t, func(b *bytes.Buffer) error { return EncodePNG(b, p.Image, md) }),
		"png16":     encodeWith(t, func(b *bytes.Buffer) error { return EncodePNG(b, deep, md) }),
		"pngrows":   encodeWith(t, func(b *bytes.Buffer) error { return EncodePNGRows(b, 16, 32, false, rows, md) }),
		"webp":      encodeWith(t, func(b *bytes.Buffer) error { return EncodeWebP(b, p.Image, md) }),
		"webp-exif": encodeWith(t, func(b *bytes.Buffer) error { return EncodeWebP(b, p.Image, Metadata{EXIF: p.EXIF}) }),
	}
	if !bytes.Equal(outputs["png"], outputs["pngrows"]) {
		t.Error("EncodePNGRows and EncodePNG write different files with EXIF")
	}
	for name, data := range outputs {
		q, err := DecodeBytes(data, Limits{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !bytes.Equal(q.EXIF, p.EXIF) {
			t.Errorf("%s: EXIF read back differs (%d bytes, want %d)", name, len(q.EXIF), len(p.EXIF))
		}
		if q.Orientation != 1 || q.Width != 16 || q.Height != 32 {
			t.Errorf("%s: read back orientation %d, %dx%d", name, q.Orientation, q.Width, q.Height)
		}
		if name != "webp-exif" && !bytes.Equal(q.ICC, icc) {
			t.Errorf("%s: ICC lost", name)
		}
		if bytes.Contains(data, []byte("UNMARKED-")) {
			t.Errorf("%s: thumbnail or preview bytes in the file", name)
		}
		switch name {
		case "jpeg":
			_, err = jpeg.Decode(bytes.NewReader(data))
		case "png", "png16", "pngrows":
			_, err = png.Decode(bytes.NewReader(data)) // also checks every chunk's CRC
		}
		if err != nil {
			t.Errorf("%s: the standard decoder rejects it: %v", name, err)
		}
	}
	// The WebP container: VP8X says EXIF (and ICC), the chunk sizes add up to the RIFF size.
	for name, flags := range map[string]byte{"webp": 0x28, "webp-exif": 0x08} {
		w := outputs[name]
		if string(w[12:16]) != "VP8X" || w[20] != flags || int(binary.LittleEndian.Uint32(w[4:]))+8 != len(w) {
			t.Errorf("%s: container %q flags %#x size %d of %d", name, w[12:16], w[20], binary.LittleEndian.Uint32(w[4:]), len(w))
		}
	}

	// PNG eXIf and WebP EXIF inputs (with and without the "Exif\0\0" header some writers put in): read,
	// normalised (their orientation is not applied to the pixels, so it is set to 1 and the size is the stored one).
	for _, prefix := range []string{"", "Exif\x00\x00"} {
		body := append([]byte(prefix), exif...)
		plain := encodeWith(t, func(b *bytes.Buffer) error { return png.Encode(b, src) })
		withEXIF := append(bytes.Clone(plain[:pngHeaderLen]), pngChunk(nil, "eXIf", body)...)
		withEXIF = append(withEXIF, plain[pngHeaderLen:]...)
		lossless, err := os.ReadFile("testdata/lossless.webp")
		if err != nil {
			t.Fatal(err)
		}
		webp := extendedWebP(lossless, 0x08, 32, 16, "EXIF", body)
		for name, data := range map[string][]byte{"png": withEXIF, "webp": webp} {
			q, err := DecodeBytes(data, Limits{})
			if err != nil {
				t.Fatalf("%s input: %v", name, err)
			}
			if q.Orientation != 1 {
				t.Errorf("%s input: orientation %d applied", name, q.Orientation)
			}
			checkNormalizedEXIF(t, q.EXIF, q.Width, q.Height)
		}
	}

	// A TIFF input's IFD0 describes the TIFF image, not a camera's EXIF: it is not carried.
	tf := encodeWith(t, func(b *bytes.Buffer) error { return tiff.Encode(b, src, nil) })
	if q, err := DecodeBytes(tf, Limits{}); err != nil || q.Format != "tiff" || q.EXIF != nil {
		t.Fatalf("a TIFF input: %v, EXIF %d bytes", err, len(q.EXIF))
	}
	// Broken EXIF is dropped, the image still decodes.
	broken := withJPEGSegments(encodeWith(t, func(b *bytes.Buffer) error { return jpeg.Encode(b, src, nil) }),
		jpegSegment(0xE1, append([]byte("Exif\x00\x00"), exif[:40]...)))
	if q, err := DecodeBytes(broken, Limits{}); err != nil || q.EXIF != nil {
		t.Fatalf("truncated EXIF: %v, EXIF %d bytes", err, len(q.EXIF))
	}
	// Encoders refuse EXIF that no reader could take.
	for _, bad := range [][]byte{[]byte("not a TIFF structure"), append([]byte("II*\x00"), make([]byte, MaxEXIFBytes)...)} {
		if err := EncodeJPEG(&bytes.Buffer{}, src, 90, Metadata{EXIF: bad}); err == nil {
			t.Errorf("EncodeJPEG wrote EXIF of %d bytes starting %q", len(bad), bad[:4])
		}
		if err := EncodePNG(&bytes.Buffer{}, src, Metadata{EXIF: bad}); err == nil {
			t.Errorf("EncodePNG wrote EXIF of %d bytes starting %q", len(bad), bad[:4])
		}
		if err := EncodeWebP(&bytes.Buffer{}, src, Metadata{EXIF: bad}); err == nil {
			t.Errorf("EncodeWebP wrote EXIF of %d bytes starting %q", len(bad), bad[:4])
		}
	}
}

// filteredRows filters an opaque NRGBA image's rows as image/png would (what the GPU's filter pass returns).
func filteredRows(m *image.NRGBA) []byte {
	b := m.Bounds()
	n := 3 * b.Dx()
	var out []byte
	prev, cur, f := make([]byte, n), make([]byte, n), make([]byte, 1+n)
	for y := 0; y < b.Dy(); y++ {
		for x := 0; x < b.Dx(); x++ {
			copy(cur[3*x:3*x+3], m.Pix[m.PixOffset(x, y):])
		}
		filterRow(f, cur, prev, 3)
		out = append(out, f...)
		prev, cur = cur, prev
	}
	return out
}

// FuzzNormalizeEXIF: on any bytes, normalizeEXIF does not panic and returns nil or a blob of the same length
// that an independent reader parses, whose orientation reads 1, with no IFD1, and that normalising again leaves
// as it is.
func FuzzNormalizeEXIF(f *testing.F) {
	for _, be := range []bool{false, true} {
		f.Add(imageiotest.CameraEXIF(testCamera(be)))
		f.Add(imageiotest.CameraEXIF(imageiotest.Camera{BigEndian: be, Orientation: 8, Make: "m"}))
		f.Add(exifOrientation(5, be)[6:])
	}
	f.Add(imageiotest.TIFF(false, deepIFD(maxEXIFDepth)))
	f.Fuzz(func(t *testing.T, b []byte) {
		out := normalizeEXIF(b, 640, 480)
		if out == nil {
			return
		}
		if len(out) != len(b) {
			t.Fatalf("length %d -> %d", len(b), len(out))
		}
		if o, _ := tiffMeta(out, false); o != 1 {
			t.Fatalf("orientation reads %d", o)
		}
		info, err := imageiotest.ReadEXIF(out)
		if err != nil {
			t.Fatalf("kept EXIF does not parse: %v", err)
		}
		if o, ok := info.Uint(info.IFD0, 0x0112); ok && o != 1 {
			t.Fatalf("orientation %d", o)
		}
		if info.NextIFD != 0 {
			t.Fatal("IFD1 still linked")
		}
		if again := normalizeEXIF(out, 640, 480); !bytes.Equal(again, out) {
			t.Fatal("not idempotent")
		}
	})
}
