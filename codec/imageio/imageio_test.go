package imageio

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/color/palette"
	"image/draw"
	"image/gif"
	"image/jpeg"
	"image/png"
	"os"
	"runtime"
	"testing"

	"golang.org/x/image/bmp"
	"golang.org/x/image/tiff"

	"filigrane/codec/imageio/imageiotest"
)

// pattern returns a w x h test image: a horizontal gradient in red, a vertical one in green, a constant blue.
func pattern(w, h int) *image.NRGBA {
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			img.SetNRGBA(x, y, color.NRGBA{uint8(x * 255 / max(w-1, 1)), uint8(y * 255 / max(h-1, 1)), 90, 255})
		}
	}
	return img
}

func encodeWith(t testing.TB, enc func(*bytes.Buffer) error) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := enc(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// writePNM writes a binary P6 (or P5 when gray) or ASCII P3/P2 file.
func writePNM(img image.Image, magic byte, maxval int) []byte {
	var b bytes.Buffer
	r := img.Bounds()
	fmt.Fprintf(&b, "P%c\n# a comment\n%d %d\n%d\n", magic, r.Dx(), r.Dy(), maxval)
	gray := magic == '2' || magic == '5'
	ascii := magic == '2' || magic == '3'
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			c := color.NRGBA64Model.Convert(img.At(x, y)).(color.NRGBA64)
			vals := []uint16{c.R, c.G, c.B}
			if gray {
				vals = vals[:1]
			}
			for _, v := range vals {
				s := (int(v)*maxval + 32767) / 65535
				switch {
				case ascii:
					fmt.Fprintf(&b, "%d ", s)
				case maxval > 255:
					b.Write([]byte{byte(s >> 8), byte(s)})
				default:
					b.WriteByte(byte(s))
				}
			}
		}
	}
	return b.Bytes()
}

// maxDiff is the largest per-channel difference (8-bit scale) between two images of equal bounds.
func maxDiff(t testing.TB, a, b image.Image) int {
	t.Helper()
	if a.Bounds() != b.Bounds() {
		t.Fatalf("bounds differ: %v vs %v", a.Bounds(), b.Bounds())
	}
	worst := 0
	r := a.Bounds()
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			ca := color.NRGBAModel.Convert(a.At(x, y)).(color.NRGBA)
			cb := color.NRGBAModel.Convert(b.At(x, y)).(color.NRGBA)
			for _, d := range []int{int(ca.R) - int(cb.R), int(ca.G) - int(cb.G), int(ca.B) - int(cb.B), int(ca.A) - int(cb.A)} {
				worst = max(worst, d, -d)
			}
		}
	}
	return worst
}

func TestRoundTripFormats(t *testing.T) {
	src := pattern(48, 32)
	gray := image.NewGray(src.Bounds())
	draw.Draw(gray, gray.Bounds(), src, image.Point{}, draw.Src)
	pal := image.NewPaletted(src.Bounds(), palette.Plan9)
	draw.Draw(pal, pal.Bounds(), src, image.Point{}, draw.Src)

	cases := []struct {
		name    string
		data    []byte
		format  string
		want    image.Image
		maxDiff int
		depth   int
	}{
		{"png", encodeWith(t, func(b *bytes.Buffer) error { return png.Encode(b, src) }), "png", src, 0, 8},
		{"png-gray", encodeWith(t, func(b *bytes.Buffer) error { return png.Encode(b, gray) }), "png", gray, 0, 8},
		{"png-palette", encodeWith(t, func(b *bytes.Buffer) error { return png.Encode(b, pal) }), "png", pal, 0, 8},
		{"jpeg-baseline", encodeWith(t, func(b *bytes.Buffer) error { return jpeg.Encode(b, src, &jpeg.Options{Quality: 95}) }), "jpeg", src, 12, 8},
		{"gif", encodeWith(t, func(b *bytes.Buffer) error { return gif.Encode(b, pal, nil) }), "gif", pal, 0, 8},
		{"bmp", encodeWith(t, func(b *bytes.Buffer) error { return bmp.Encode(b, src) }), "bmp", src, 0, 8},
		{"tiff", encodeWith(t, func(b *bytes.Buffer) error { return tiff.Encode(b, src, &tiff.Options{Compression: tiff.Deflate}) }), "tiff", src, 0, 8},
		{"ppm-p6", writePNM(src, '6', 255), "pnm", src, 0, 8},
		{"pgm-p5", writePNM(gray, '5', 255), "pnm", gray, 0, 8},
		{"ppm-p3", writePNM(src, '3', 255), "pnm", src, 0, 8},
		{"pgm-p2", writePNM(gray, '2', 255), "pnm", gray, 0, 8},
		{"ppm-p6-maxval-1023", writePNM(src, '6', 1023), "pnm", src, 1, 16},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Decode(bytes.NewReader(tc.data), Limits{})
			if err != nil {
				t.Fatal(err)
			}
			if p.Format != tc.format || p.Width != 48 || p.Height != 32 || p.Depth != tc.depth || p.HasAlpha || p.Frames != 1 {
				t.Fatalf("got format %q %dx%d depth %d alpha %v frames %d", p.Format, p.Width, p.Height, p.Depth, p.HasAlpha, p.Frames)
			}
			if d := maxDiff(t, p.Image, tc.want); d > tc.maxDiff {
				t.Fatalf("pixels differ by %d, want <= %d", d, tc.maxDiff)
			}
			// And through our PNG writer and back, losslessly.
			var out bytes.Buffer
			if err := EncodePNG(&out, p.Image, Metadata{}); err != nil {
				t.Fatal(err)
			}
			q, err := Decode(&out, Limits{})
			if err != nil {
				t.Fatal(err)
			}
			if d := maxDiff(t, q.Image, p.Image); d != 0 || q.Depth != p.Depth {
				t.Fatalf("PNG round trip differs by %d, depth %d -> %d", d, p.Depth, q.Depth)
			}
		})
	}
}

func TestProgressiveJPEG(t *testing.T) {
	// Go cannot write progressive JPEG; testdata/gen.sh made this one with PIL.
	data, err := os.ReadFile("testdata/progressive.jpg")
	if err != nil {
		t.Skip("no progressive fixture:", err)
	}
	p, err := Decode(bytes.NewReader(data), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Width != 32 || p.Height != 16 {
		t.Fatalf("got %dx%d", p.Width, p.Height)
	}
}

func TestSixteenBitAndAlpha(t *testing.T) {
	deep := image.NewNRGBA64(image.Rect(0, 0, 20, 10))
	for y := 0; y < 10; y++ {
		for x := 0; x < 20; x++ {
			deep.SetNRGBA64(x, y, color.NRGBA64{uint16(x*3000 + 7), uint16(y * 6000), 12345, uint16(65535 - x*1000)})
		}
	}
	data := encodeWith(t, func(b *bytes.Buffer) error { return png.Encode(b, deep) })
	p, err := Decode(bytes.NewReader(data), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Depth != 16 || !p.HasAlpha {
		t.Fatalf("depth %d alpha %v", p.Depth, p.HasAlpha)
	}
	got, ok := p.Image.(*image.NRGBA64)
	if !ok {
		t.Fatalf("image is %T", p.Image)
	}
	if !bytes.Equal(got.Pix, deep.Pix) {
		t.Fatal("16-bit pixels changed")
	}
	var out bytes.Buffer
	if err := EncodePNG(&out, p.Image, Metadata{}); err != nil {
		t.Fatal(err)
	}
	back, err := png.Decode(&out)
	if err != nil {
		t.Fatal(err)
	}
	if b, ok := back.(*image.NRGBA64); !ok || !bytes.Equal(b.Pix, deep.Pix) {
		t.Fatalf("PNG output is %T or differs", back)
	}

	// 16-bit TIFF (RGBA64, with a translucent pixel) keeps its values.
	rgba64 := image.NewRGBA64(image.Rect(0, 0, 6, 4))
	for y := 0; y < 4; y++ {
		for x := 0; x < 6; x++ {
			rgba64.SetRGBA64(x, y, color.RGBA64{uint16(x * 9000), uint16(y * 15000), 4242, 0xFFFF})
		}
	}
	rgba64.SetRGBA64(0, 0, color.RGBA64{0x4000, 0x2000, 0x1000, 0x8000})
	p, err = Decode(bytes.NewReader(encodeWith(t, func(b *bytes.Buffer) error { return tiff.Encode(b, rgba64, nil) })), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Depth != 16 || !p.HasAlpha {
		t.Fatalf("tiff16: depth %d alpha %v", p.Depth, p.HasAlpha)
	}
	for y := 0; y < 4; y++ {
		for x := 0; x < 6; x++ {
			want := color.NRGBA64Model.Convert(rgba64.RGBA64At(x, y)).(color.NRGBA64)
			if got := p.Image.(*image.NRGBA64).NRGBA64At(x, y); got != want {
				t.Fatalf("tiff16 (%d,%d): %v want %v", x, y, got, want)
			}
		}
	}

	// 16-bit gray, and 16-bit gray Netpbm.
	g16 := image.NewGray16(image.Rect(0, 0, 7, 5))
	for i := range g16.Pix {
		g16.Pix[i] = byte(i * 37)
	}
	for _, data := range [][]byte{encodeWith(t, func(b *bytes.Buffer) error { return png.Encode(b, g16) }), writePNM(g16, '5', 65535)} {
		p, err = Decode(bytes.NewReader(data), Limits{})
		if err != nil {
			t.Fatal(err)
		}
		m := p.Image.(*image.NRGBA64)
		for y := 0; y < 5; y++ {
			for x := 0; x < 7; x++ {
				if c, w := m.NRGBA64At(x, y), g16.Gray16At(x, y).Y; p.Depth != 16 || c.R != w || c.G != w || c.B != w || c.A != 0xFFFF {
					t.Fatalf("gray16 (%d,%d): %v want %d", x, y, c, w)
				}
			}
		}
	}

	// 8-bit with alpha, and a palette with a transparent entry.
	a8 := pattern(16, 16)
	a8.Pix[3] = 0
	a8.Pix[7] = 100
	p, err = Decode(bytes.NewReader(encodeWith(t, func(b *bytes.Buffer) error { return png.Encode(b, a8) })), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if !p.HasAlpha || p.Depth != 8 || p.Image.(*image.NRGBA).Pix[7] != 100 {
		t.Fatalf("alpha lost: %v", p.HasAlpha)
	}
	pal := image.NewPaletted(image.Rect(0, 0, 4, 4), color.Palette{color.NRGBA{0, 0, 0, 0}, color.NRGBA{255, 0, 0, 255}})
	pal.Pix[5] = 1
	p, err = Decode(bytes.NewReader(encodeWith(t, func(b *bytes.Buffer) error { return png.Encode(b, pal) })), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if !p.HasAlpha || maxDiff(t, p.Image, pal) != 0 {
		t.Fatal("palette transparency lost")
	}
}

func TestWebP(t *testing.T) {
	want := image.NewNRGBA(image.Rect(0, 0, 32, 16))
	for y := 0; y < 16; y++ {
		for x := 0; x < 32; x++ {
			c := color.NRGBA{200, 40, 40, 255}
			if x >= 16 {
				c = color.NRGBA{40, 60, 200, 255}
			}
			if x >= 2 && x < 6 && y >= 2 && y < 6 {
				c = color.NRGBA{255, 255, 255, 255}
			}
			want.SetNRGBA(x, y, c)
		}
	}
	for _, tc := range []struct {
		file  string
		tol   int
		alpha bool
	}{{"lossless.webp", 0, false}, {"lossy.webp", 40, false}, {"lossy_alpha.webp", 40, true}} {
		t.Run(tc.file, func(t *testing.T) {
			data, err := os.ReadFile("testdata/" + tc.file)
			if err != nil {
				t.Fatal(err)
			}
			p, err := Decode(bytes.NewReader(data), Limits{})
			if err != nil {
				t.Fatal(err)
			}
			if p.Format != "webp" || p.HasAlpha != tc.alpha {
				t.Fatalf("format %s alpha %v", p.Format, p.HasAlpha)
			}
			// Compare the centres of the two halves (lossy chroma bleeds at the edges).
			img := p.Image.(*image.NRGBA)
			for _, pt := range []image.Point{{8, 10}, {26, 10}} {
				g, w := img.NRGBAAt(pt.X, pt.Y), want.NRGBAAt(pt.X, pt.Y)
				if d := max(absInt(int(g.R)-int(w.R)), absInt(int(g.G)-int(w.G)), absInt(int(g.B)-int(w.B))); d > tc.tol {
					t.Fatalf("pixel %v = %v, want %v", pt, g, w)
				}
			}
			if tc.alpha && absInt(int(img.NRGBAAt(26, 10).A)-128) > 4 {
				t.Fatalf("alpha %d, want about 128", img.NRGBAAt(26, 10).A)
			}
		})
	}
	// An extended WebP with an ICCP chunk: rebuild the lossless file as VP8X + ICCP + VP8L.
	data, err := os.ReadFile("testdata/lossless.webp")
	if err != nil {
		t.Fatal(err)
	}
	icc := fakeICC("RGB ", 300)
	var body bytes.Buffer
	body.WriteString("WEBP")
	vp8x := []byte{0x20, 0, 0, 0, 31, 0, 0, 15, 0, 0}
	writeRIFFChunk(&body, "VP8X", vp8x)
	writeRIFFChunk(&body, "ICCP", icc)
	body.Write(data[12:]) // the VP8L chunk
	var file bytes.Buffer
	file.WriteString("RIFF")
	binary.Write(&file, binary.LittleEndian, uint32(body.Len()))
	file.Write(body.Bytes())
	p, err := Decode(&file, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(p.ICC, icc) {
		t.Fatal("WebP ICC profile not read")
	}
}

func writeRIFFChunk(b *bytes.Buffer, id string, data []byte) {
	b.WriteString(id)
	binary.Write(b, binary.LittleEndian, uint32(len(data)))
	b.Write(data)
	if len(data)%2 == 1 {
		b.WriteByte(0)
	}
}

// extendedWebP wraps the chunks of the simple lossless WebP lossless in a VP8X container of w×h pixels with
// flags, followed by a metadata chunk (id, data).
func extendedWebP(lossless []byte, flags byte, w, h int, id string, data []byte) []byte {
	var wb bytes.Buffer
	wb.WriteString("WEBP")
	writeRIFFChunk(&wb, "VP8X", []byte{flags, 0, 0, 0, byte(w - 1), byte((w - 1) >> 8), byte((w - 1) >> 16),
		byte(h - 1), byte((h - 1) >> 8), byte((h - 1) >> 16)})
	wb.Write(lossless[12:])
	writeRIFFChunk(&wb, id, data)
	var webp bytes.Buffer
	webp.WriteString("RIFF")
	binary.Write(&webp, binary.LittleEndian, uint32(wb.Len()))
	webp.Write(wb.Bytes())
	return webp.Bytes()
}

func absInt(v int) int {
	if v < 0 {
		return -v
	}
	return v
}

func TestCMYKJPEG(t *testing.T) {
	data, err := os.ReadFile("testdata/cmyk.jpg") // Adobe CMYK (inverted), written by testdata/gen.sh
	if err != nil {
		t.Fatal(err)
	}
	p, err := Decode(bytes.NewReader(data), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	img := p.Image.(*image.NRGBA)
	for _, c := range []struct {
		pt   image.Point
		want color.NRGBA
	}{{image.Pt(10, 10), color.NRGBA{200, 40, 40, 255}}, {image.Pt(26, 10), color.NRGBA{40, 60, 200, 255}}, {image.Pt(3, 3), color.NRGBA{255, 255, 255, 255}}} {
		g := img.NRGBAAt(c.pt.X, c.pt.Y)
		if d := max(absInt(int(g.R)-int(c.want.R)), absInt(int(g.G)-int(c.want.G)), absInt(int(g.B)-int(c.want.B))); d > 12 {
			t.Errorf("pixel %v = %v, want %v", c.pt, g, c.want)
		}
	}
}

// fakeICC returns a profile-shaped blob: correct size field and colour space, arbitrary body.
func fakeICC(space string, n int) []byte {
	icc := make([]byte, n)
	binary.BigEndian.PutUint32(icc, uint32(n))
	copy(icc[16:20], space)
	copy(icc[36:40], "acsp")
	for i := 128; i < n; i++ {
		icc[i] = byte(i * 7)
	}
	return icc
}

// withJPEGSegments inserts APPn segments right after the SOI marker of a JPEG.
func withJPEGSegments(jpg []byte, segs ...[]byte) []byte {
	out := append([]byte(nil), jpg[:2]...)
	for _, s := range segs {
		out = append(out, s...)
	}
	return append(out, jpg[2:]...)
}

func jpegSegment(marker byte, payload []byte) []byte {
	s := []byte{0xFF, marker, 0, 0}
	binary.BigEndian.PutUint16(s[2:], uint16(len(payload)+2))
	return append(s, payload...)
}

func exifOrientation(o int, bigEndian bool) []byte {
	var t []byte
	var bo binary.AppendByteOrder = binary.LittleEndian
	if bigEndian {
		bo = binary.BigEndian
		t = []byte("MM\x00*")
	} else {
		t = []byte("II*\x00")
	}
	t = bo.AppendUint32(t, 8)
	t = bo.AppendUint16(t, 2) // two entries
	// An unrelated tag first (ImageWidth), then Orientation.
	t = bo.AppendUint16(t, 0x0100)
	t = bo.AppendUint16(t, 3)
	t = bo.AppendUint32(t, 1)
	t = bo.AppendUint32(t, 0)
	t = bo.AppendUint16(t, 0x0112)
	t = bo.AppendUint16(t, 3)
	t = bo.AppendUint32(t, 1)
	t = bo.AppendUint16(t, uint16(o))
	t = bo.AppendUint16(t, 0)
	t = bo.AppendUint32(t, 0)
	return append([]byte("Exif\x00\x00"), t...)
}

func TestJPEGOrientationAndICC(t *testing.T) {
	// Stored image 32x16: four 16x8 blocks of distinct colours.
	const w, h = 32, 16
	cols := []color.NRGBA{{250, 0, 0, 255}, {0, 250, 0, 255}, {0, 0, 250, 255}, {250, 250, 250, 255}}
	src := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			src.SetNRGBA(x, y, cols[(y/8)*2+x/16])
		}
	}
	jpg := encodeWith(t, func(b *bytes.Buffer) error { return jpeg.Encode(b, src, &jpeg.Options{Quality: 100}) })
	icc := fakeICC("RGB ", 70000) // needs two APP2 chunks
	iccSegs := [][]byte{
		jpegSegment(0xE2, append([]byte("ICC_PROFILE\x00\x02\x02"), icc[60000:]...)), // out of order on purpose
		jpegSegment(0xE2, append([]byte("ICC_PROFILE\x00\x01\x02"), icc[:60000]...)),
	}
	for o := 1; o <= 8; o++ {
		for _, be := range []bool{false, true} {
			data := withJPEGSegments(jpg, append([][]byte{jpegSegment(0xE1, exifOrientation(o, be))}, iccSegs...)...)
			p, err := Decode(bytes.NewReader(data), Limits{})
			if err != nil {
				t.Fatal(err)
			}
			if p.Orientation != o || !bytes.Equal(p.ICC, icc) {
				t.Fatalf("orientation %d: got %d, icc %d bytes", o, p.Orientation, len(p.ICC))
			}
			// Expected: apply the transform to the source by coordinates.
			want := orient(src, o)
			if d := maxDiff(t, p.Image, want); d > 8 {
				t.Fatalf("orientation %d: pixels differ by %d", o, d)
			}
			if o >= 5 && (p.Width != h || p.Height != w) {
				t.Fatalf("orientation %d: size %dx%d", o, p.Width, p.Height)
			}
		}
	}
	// Spot-check the transform itself: orientation 6 (camera turned clockwise) puts the stored top-left block
	// at the top-right of the upright image.
	up := orient(src, 6).(*image.NRGBA)
	if up.Bounds().Dx() != h || up.NRGBAAt(h-1, 0) != cols[0] || up.NRGBAAt(0, 0) != cols[2] {
		t.Fatalf("orientation 6 wrong: %v %v", up.NRGBAAt(h-1, 0), up.NRGBAAt(0, 0))
	}
	up = orient(src, 8).(*image.NRGBA)
	if up.NRGBAAt(0, w-1) != cols[0] {
		t.Fatal("orientation 8 wrong")
	}

	// The profile travels into the output PNG and back.
	p, err := Decode(bytes.NewReader(withJPEGSegments(jpg, iccSegs...)), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := EncodePNG(&out, p.Image, p.Metadata); err != nil {
		t.Fatal(err)
	}
	if _, err := png.Decode(bytes.NewReader(out.Bytes())); err != nil {
		t.Fatalf("standard decoder rejects our PNG: %v", err)
	}
	q, err := Decode(&out, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(q.ICC, icc) {
		t.Fatal("ICC profile lost in PNG output")
	}
}

func TestGrayProfileAndMismatch(t *testing.T) {
	gray := image.NewGray(image.Rect(0, 0, 8, 8))
	for i := range gray.Pix {
		gray.Pix[i] = byte(i * 4)
	}
	p, err := Decode(bytes.NewReader(encodeWith(t, func(b *bytes.Buffer) error { return png.Encode(b, gray) })), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	gicc := fakeICC("GRAY", 200)
	var out bytes.Buffer
	if err := EncodePNG(&out, p.Image, Metadata{ICC: gicc}); err != nil {
		t.Fatal(err)
	}
	back, err := png.Decode(bytes.NewReader(out.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := back.(*image.Gray); !ok {
		t.Fatalf("gray image with gray profile written as %T", back)
	}
	q, _ := Decode(&out, Limits{})
	if !bytes.Equal(q.ICC, gicc) {
		t.Fatal("gray profile lost")
	}
	// A gray profile on a colour image is dropped rather than written invalidly.
	out.Reset()
	if err := EncodePNG(&out, pattern(8, 8), Metadata{ICC: gicc}); err != nil {
		t.Fatal(err)
	}
	if q, _ := Decode(&out, Limits{}); q.ICC != nil {
		t.Fatal("mismatched profile written")
	}
}

func TestAnimatedGIF(t *testing.T) {
	pal := color.Palette{color.NRGBA{0, 0, 0, 255}, color.NRGBA{255, 0, 0, 255}, color.NRGBA{0, 255, 0, 255}}
	anim := &gif.GIF{Config: image.Config{ColorModel: pal, Width: 10, Height: 6}}
	for i := 0; i < 3; i++ {
		f := image.NewPaletted(image.Rect(0, 0, 10, 6), pal)
		for k := range f.Pix {
			f.Pix[k] = uint8(i)
		}
		if i == 1 { // a smaller, offset frame
			f = image.NewPaletted(image.Rect(2, 2, 5, 5), pal)
		}
		anim.Image = append(anim.Image, f)
		anim.Delay = append(anim.Delay, 10)
	}
	data := encodeWith(t, func(b *bytes.Buffer) error { return gif.EncodeAll(b, anim) })
	p, err := Decode(bytes.NewReader(data), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Frames != 3 || p.Width != 10 || p.Height != 6 {
		t.Fatalf("frames %d size %dx%d", p.Frames, p.Width, p.Height)
	}
	if c := p.Image.(*image.NRGBA).NRGBAAt(4, 4); c != (color.NRGBA{0, 0, 0, 255}) {
		t.Fatalf("not the first frame: %v", c)
	}
	// A first frame smaller than the logical screen lands at its offset on a transparent canvas.
	anim.Image = []*image.Paletted{image.NewPaletted(image.Rect(2, 1, 6, 4), pal)}
	anim.Image[0].Pix[0] = 1
	anim.Delay = []int{0}
	p, err = Decode(bytes.NewReader(encodeWith(t, func(b *bytes.Buffer) error { return gif.EncodeAll(b, anim) })), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	img := p.Image.(*image.NRGBA)
	if img.Bounds() != image.Rect(0, 0, 10, 6) || img.NRGBAAt(2, 1) != (color.NRGBA{255, 0, 0, 255}) || img.NRGBAAt(0, 0).A != 0 || !p.HasAlpha {
		t.Fatalf("offset frame: %v %v %v", img.Bounds(), img.NRGBAAt(2, 1), img.NRGBAAt(0, 0))
	}
}

func TestLimits(t *testing.T) {
	small := pattern(20, 20)
	inputs := map[string][]byte{
		"png":  encodeWith(t, func(b *bytes.Buffer) error { return png.Encode(b, small) }),
		"jpeg": encodeWith(t, func(b *bytes.Buffer) error { return jpeg.Encode(b, small, nil) }),
		"gif":  encodeWith(t, func(b *bytes.Buffer) error { return gif.Encode(b, small, nil) }),
		"bmp":  encodeWith(t, func(b *bytes.Buffer) error { return bmp.Encode(b, small) }),
		"tiff": encodeWith(t, func(b *bytes.Buffer) error { return tiff.Encode(b, small, nil) }),
		"pnm":  writePNM(small, '6', 255),
	}
	if webp, err := os.ReadFile("testdata/lossless.webp"); err == nil {
		inputs["webp"] = webp
	}
	for name, data := range inputs {
		_, cfg, err := DecodeConfigBytes(data)
		if err != nil {
			t.Fatal(err)
		}
		px := int64(cfg.Width * cfg.Height)
		if _, err := Decode(bytes.NewReader(data), Limits{MaxPixels: px - 1}); !errors.Is(err, ErrTooManyPixels) {
			t.Errorf("%s: want ErrTooManyPixels, got %v", name, err)
		}
		if _, err := Decode(bytes.NewReader(data), Limits{MaxBytes: int64(len(data) - 1)}); !errors.Is(err, ErrTooLarge) {
			t.Errorf("%s: want ErrTooLarge, got %v", name, err)
		}
		if _, err := Decode(bytes.NewReader(data), Limits{MaxPixels: px, MaxBytes: int64(len(data))}); err != nil {
			t.Errorf("%s: at the limit: %v", name, err)
		}
	}

	// A 60000 x 60000 PNG bomb (10.8 GB of pixels) in a few dozen bytes is refused without allocating.
	bomb := imageiotest.PNGHeaderOnly(60000, 60000, 8, 2)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := Decode(bytes.NewReader(bomb), Limits{})
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrTooManyPixels) {
		t.Fatalf("bomb: %v", err)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 1<<20 {
		t.Fatalf("bomb allocated %d bytes before being refused", grew)
	}
	// A Netpbm file announcing 5000 x 5000 pixels (under the limit) with no samples is refused as corrupt
	// before its buffer is allocated.
	if _, err := Decode(bytes.NewReader([]byte("P6 5000 5000 255\n\x00\x00")), Limits{}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("short pnm: %v", err)
	}
}

func TestBadInput(t *testing.T) {
	good := encodeWith(t, func(b *bytes.Buffer) error { return png.Encode(b, pattern(30, 30)) })
	jpg := encodeWith(t, func(b *bytes.Buffer) error { return jpeg.Encode(b, pattern(30, 30), nil) })
	for _, tc := range []struct {
		name string
		data []byte
		want error
	}{
		{"empty", nil, ErrUnsupportedFormat},
		{"text", []byte("hello, this is not an image"), ErrUnsupportedFormat},
		{"pdf", []byte("%PDF-1.7\n"), ErrUnsupportedFormat},
		{"pbm", []byte("P4 8 8\n\x00\x00\x00\x00\x00\x00\x00\x00"), ErrUnsupportedFormat},
		{"truncated png", good[:len(good)/2], ErrCorrupt},
		{"truncated png header", good[:20], ErrCorrupt},
		{"truncated jpeg", jpg[:len(jpg)/2], ErrCorrupt},
		{"png bad crc", append(append([]byte(nil), good[:30]...), append([]byte{0}, good[31:]...)...), ErrCorrupt},
		{"pnm bad maxval", []byte("P5 2 2 0\n\x00\x00\x00\x00"), ErrCorrupt},
		{"pnm sample above maxval", []byte("P2 2 1 10\n3 11"), ErrCorrupt},
	} {
		_, err := Decode(bytes.NewReader(tc.data), Limits{})
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: want %v, got %v", tc.name, tc.want, err)
		}
	}
}

func FuzzDecode(f *testing.F) {
	src := pattern(12, 9)
	seeds := [][]byte{
		encodeWith(f, func(b *bytes.Buffer) error { return png.Encode(b, src) }),
		encodeWith(f, func(b *bytes.Buffer) error { return jpeg.Encode(b, src, nil) }),
		encodeWith(f, func(b *bytes.Buffer) error { return gif.Encode(b, src, nil) }),
		encodeWith(f, func(b *bytes.Buffer) error { return bmp.Encode(b, src) }),
		encodeWith(f, func(b *bytes.Buffer) error { return tiff.Encode(b, src, nil) }),
		writePNM(src, '6', 255), writePNM(src, '2', 65535),
		withJPEGSegments(encodeWith(f, func(b *bytes.Buffer) error { return jpeg.Encode(b, src, nil) }),
			jpegSegment(0xE1, exifOrientation(6, true)), jpegSegment(0xE2, append([]byte("ICC_PROFILE\x00\x01\x01"), fakeICC("RGB ", 140)...))),
		imageiotest.PNGHeaderOnly(1<<20, 1<<20, 8, 2),
		[]byte("GIF89a"), []byte("RIFF\x00\x00\x00\x00WEBPVP8X"), []byte("P6\n"), []byte("\xff\xd8\xff"),
	}
	for _, name := range []string{"lossless.webp", "lossy.webp", "lossy_alpha.webp", "cmyk.jpg"} {
		if b, err := os.ReadFile("testdata/" + name); err == nil {
			seeds = append(seeds, b)
		}
	}
	// Seeds at the structure limits: repeated JPEG scans, many PNG text chunks, a looping TIFF IFD chain.
	if prog, err := os.ReadFile("testdata/progressive.jpg"); err == nil {
		seeds = append(seeds, repeatLastScan(f, prog, 3), repeatLastScan(f, prog, MaxJPEGScans))
	}
	seeds = append(seeds, pngWithChunks(f, 40, 3), imageiotest.ScanBomb(64, 3), imageiotest.ScanBomb(64, MaxJPEGScans))
	for _, s := range seeds {
		f.Add(s)
		f.Add(s[:len(s)/2])
	}
	const maxPixels = 1 << 20
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Decode(bytes.NewReader(data), Limits{MaxPixels: maxPixels, MaxBytes: 1 << 20})
		if err != nil {
			if !errors.Is(err, ErrUnsupportedFormat) && !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrTooManyPixels) && !errors.Is(err, ErrTooLarge) &&
				!errors.Is(err, ErrTooComplex) {
				t.Fatalf("untyped error: %v", err)
			}
			return
		}
		b := p.Image.Bounds()
		if b.Min != (image.Point{}) || b.Dx() != p.Width || b.Dy() != p.Height || int64(p.Width)*int64(p.Height) > maxPixels {
			t.Fatalf("bad picture %v %dx%d", b, p.Width, p.Height)
		}
		if err := EncodePNG(discard{}, p.Image, p.Metadata); err != nil {
			t.Fatalf("cannot encode what we decoded: %v", err)
		}
	})
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
