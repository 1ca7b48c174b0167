package imageio

import (
	"bytes"
	"image"
	"image/color"
	"image/png"
	"io"
	"math/rand/v2"
	"testing"

	"filigrane/codec/imageio/imageiotest"
	"filigrane/codec/pardeflate"
)

// EncodePNGRows writes a file any decoder reads back to the same pixels (rows filtered with type 0 here; the
// GPU's filtered rows are checked against EncodePNG's bytes in gpu/cudacodec on a machine with a GPU).
func TestEncodePNGRowsRoundTrip(t *testing.T) {
	for _, alpha := range []bool{false, true} {
		w, h := 37, 23
		img := image.NewNRGBA(image.Rect(0, 0, w, h))
		for i := range img.Pix {
			img.Pix[i] = uint8(i * 7)
			if i%4 == 3 && !alpha {
				img.Pix[i] = 255
			}
		}
		bpp := 3
		if alpha {
			bpp = 4
		}
		var rows []byte
		for y := 0; y < h; y++ {
			rows = append(rows, 0)
			for x := 0; x < w; x++ {
				rows = append(rows, img.Pix[img.PixOffset(x, y):][:bpp]...)
			}
		}
		var buf bytes.Buffer
		if err := EncodePNGRows(&buf, w, h, alpha, rows, Metadata{}); err != nil {
			t.Fatal(err)
		}
		got, err := png.Decode(&buf)
		if err != nil {
			t.Fatalf("alpha %v: %v", alpha, err)
		}
		for y := 0; y < h; y++ {
			for x := 0; x < w; x++ {
				r, g, b, a := got.At(x, y).RGBA()
				want := img.NRGBAAt(x, y)
				wr, wg, wb, wa := want.RGBA()
				if r != wr || g != wg || b != wb || a != wa {
					t.Fatalf("alpha %v: pixel %d,%d is %v, want %v", alpha, x, y, got.At(x, y), want)
				}
			}
		}
	}
	if err := EncodePNGRows(&bytes.Buffer{}, 4, 4, false, make([]byte, 10), Metadata{}); err == nil {
		t.Fatal("rows of the wrong length were accepted")
	}
}

// pngTestImages: noise (photo-like after marking), a large noisy picture with a flat band, a smooth ramp, a flat picture with a few edges, translucent
// pixels, and widths of one and two pixels.
func pngTestImages() map[string]*image.NRGBA {
	rng := rand.New(rand.NewPCG(9, 10))
	mk := func(w, h int, f func(x, y int) color.NRGBA) *image.NRGBA {
		m := image.NewNRGBA(image.Rect(0, 0, w, h))
		for y := 0; y < h; y++ {
			for x := 0; x < w; x++ {
				m.SetNRGBA(x, y, f(x, y))
			}
		}
		return m
	}
	return map[string]*image.NRGBA{
		"noise": mk(331, 167, func(x, y int) color.NRGBA {
			return color.NRGBA{uint8(100 + x/4 + rng.IntN(9)), uint8(80 + y/2 + rng.IntN(9)), uint8(40 + rng.IntN(9)), 255}
		}),
		"ramp": mk(300, 40, func(x, y int) color.NRGBA { return color.NRGBA{uint8(x), uint8(x + y), uint8(255 - x), 255} }),
		"flat": mk(640, 120, func(x, y int) color.NRGBA {
			if (x/80+y/40)%2 == 0 {
				return color.NRGBA{30, 60, 200, 255}
			}
			return color.NRGBA{250, 250, 250, 255}
		}),
		"alpha": mk(57, 33, func(x, y int) color.NRGBA {
			return color.NRGBA{uint8(x * 4), uint8(rng.IntN(256)), uint8(y * 7), uint8(x * y)}
		}),
		"large": mk(700, 330, func(x, y int) color.NRGBA { // over 600 KB of rows: many deflate blocks
			if x > 500 {
				return color.NRGBA{uint8(y), 20, 30, 255}
			}
			return color.NRGBA{uint8(x/3 + rng.IntN(9)), uint8(80 + y/2 + rng.IntN(9)), uint8(40 + rng.IntN(9)), 255}
		}),
		"w1": mk(1, 50, func(x, y int) color.NRGBA { return color.NRGBA{uint8(y * 5), uint8(rng.IntN(256)), 9, 255} }),
		"w2": mk(2, 50, func(x, y int) color.NRGBA { return color.NRGBA{uint8(y * 5), uint8(rng.IntN(256)), 9, 255} }),
	}
}

// pngImageData returns the decompressed image data (the filtered rows) of a PNG file.
func pngImageData(t *testing.T, file []byte) []byte {
	t.Helper()
	_, rows, err := imageiotest.PNGImageData(file)
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// EncodePNG filters every row as image/png does (the same filter type and bytes, which the GPU's filter also
// mirrors), writes files that decode to the source pixels, and EncodePNGRows writes the same file from those
// rows (one Write of all rows rather than one per row), with and without an ICC profile.
func TestEncodePNGFiltersAsImagePNG(t *testing.T) {
	icc := fakeICC("RGB ", 900)
	for name, img := range pngTestImages() {
		var ref bytes.Buffer
		if err := (&png.Encoder{CompressionLevel: png.BestSpeed}).Encode(&ref, img); err != nil {
			t.Fatal(err)
		}
		want := pngImageData(t, ref.Bytes())
		for _, prof := range [][]byte{nil, icc} {
			var got bytes.Buffer
			if err := EncodePNG(&got, img, Metadata{ICC: prof}); err != nil {
				t.Fatal(err)
			}
			if rows := pngImageData(t, got.Bytes()); !bytes.Equal(rows, want) {
				t.Fatalf("%s: filtered rows differ from image/png's", name)
			}
			back, err := DecodeBytes(got.Bytes(), Limits{})
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if m, ok := back.Image.(*image.NRGBA); !ok || !bytes.Equal(m.Pix, img.Pix) || !bytes.Equal(back.ICC, prof) {
				t.Fatalf("%s: read back %T, ICC %d bytes (want %d): not the source", name, back.Image, len(back.ICC), len(prof))
			}
			var fromRows bytes.Buffer
			if err := EncodePNGRows(&fromRows, img.Rect.Dx(), img.Rect.Dy(), !isOpaque(img), want, Metadata{ICC: prof}); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(fromRows.Bytes(), got.Bytes()) {
				t.Fatalf("%s: EncodePNGRows wrote %d bytes, EncodePNG %d: not the same file", name, fromRows.Len(), got.Len())
			}
		}
	}
}

// 16-bit and grayscale images (a 16-bit input's marked output; a gray picture with a GRAY profile) take the
// same filter-and-deflate path as 8-bit colour: the file has image/png's layout (bit depth and colour type) and
// filtered rows, decodes to the very pixels, and keeps the profile and EXIF.
func TestEncodePNGDeepAndGray(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	opaque16 := image.NewNRGBA64(image.Rect(0, 0, 203, 61))
	alpha16 := image.NewNRGBA64(image.Rect(0, 0, 97, 40))
	gray8 := image.NewGray(image.Rect(0, 0, 151, 77))
	gray16 := image.NewGray16(image.Rect(0, 0, 64, 90))
	for y := 0; y < 90; y++ {
		for x := 0; x < 203; x++ {
			v := uint16(300*x + 100*y + rng.IntN(700))
			opaque16.SetNRGBA64(x, y, color.NRGBA64{v, v / 2, 65535 - v, 65535})
			alpha16.SetNRGBA64(x, y, color.NRGBA64{v, uint16(rng.IntN(65536)), 9, uint16(x * y * 40)})
			gray8.SetGray(x, y, color.Gray{uint8(x + y/3 + rng.IntN(5))})
			gray16.SetGray16(x, y, color.Gray16{v})
		}
	}
	exif := imageiotest.CameraEXIF(imageiotest.Camera{Orientation: 1, Make: "Deep"})
	for _, c := range []struct {
		name string
		img  image.Image
		icc  []byte
		want color.Model // the decoded image's model: image/png's choice of layout
	}{
		{"opaque16", opaque16, fakeICC("RGB ", 700), color.RGBA64Model},
		{"alpha16", alpha16, nil, color.NRGBA64Model},
		{"gray8", gray8, fakeICC("GRAY", 500), color.GrayModel},
		{"gray16", gray16, nil, color.Gray16Model},
	} {
		var ref, got bytes.Buffer
		if err := (&png.Encoder{CompressionLevel: png.BestSpeed}).Encode(&ref, c.img); err != nil {
			t.Fatal(err)
		}
		if err := EncodePNG(&got, c.img, Metadata{ICC: c.icc, EXIF: exif}); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if !bytes.Equal(pngImageData(t, got.Bytes()), pngImageData(t, ref.Bytes())) {
			t.Errorf("%s: filtered rows differ from image/png's", c.name)
		}
		back, err := png.Decode(bytes.NewReader(got.Bytes()))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if back.ColorModel() != c.want {
			t.Errorf("%s: decoded as %T, want the model image/png gives", c.name, back)
		}
		b := c.img.Bounds()
		for y := b.Min.Y; y < b.Max.Y; y++ {
			for x := b.Min.X; x < b.Max.X; x++ {
				if g, w := color.NRGBA64Model.Convert(back.At(x, y)), color.NRGBA64Model.Convert(c.img.At(x, y)); g != w {
					t.Fatalf("%s: pixel (%d,%d) is %v, want %v", c.name, x, y, g, w)
				}
			}
		}
		pic, err := DecodeBytes(got.Bytes(), Limits{})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if !bytes.Equal(pic.ICC, c.icc) || !bytes.Contains(pic.EXIF, []byte("Deep")) {
			t.Errorf("%s: read back ICC %d bytes (want %d), EXIF %d bytes", c.name, len(pic.ICC), len(c.icc), len(pic.EXIF))
		}
	}
}

// The deflate mode follows the content: a noisy (marked-photo-like) image compresses at least 5% better than at
// image/png's fastest level, and flat artwork and a ramp, where LZ77 matters, stay within 10% of it.
func TestEncodePNGSize(t *testing.T) {
	imgs := pngTestImages()
	for _, name := range []string{"noise", "flat", "ramp"} {
		var ref, got bytes.Buffer
		if err := (&png.Encoder{CompressionLevel: png.BestSpeed}).Encode(&ref, imgs[name]); err != nil {
			t.Fatal(err)
		}
		if err := EncodePNG(&got, imgs[name], Metadata{}); err != nil {
			t.Fatal(err)
		}
		limit := ref.Len() * 11 / 10
		if name == "noise" {
			limit = ref.Len() * 95 / 100 // Huffman coding alone: 11% smaller here
		}
		if got.Len() > limit {
			t.Errorf("%s: %d bytes, image/png at its fastest level %d", name, got.Len(), ref.Len())
		}
	}
}

// Each deflate mode is chosen where it pays: Huffman coding alone on noise (LZ77 gains under 10%), klauspost's
// fast LZ77 where it compresses about as well as the standard library's BestSpeed (a ramp; photo on one side of
// the large image), the standard library's on long runs (flat artwork), where klauspost's fast levels come out
// larger. The file written is never larger than with the other LZ77 mode by more than the 3% allowed.
func TestChooseDeflate(t *testing.T) {
	imgs := pngTestImages()
	for name, want := range map[string]deflateMode{"noise": huffmanOnly, "ramp": fastLZ, "large": fastLZ, "flat": runsLZ} {
		var b bytes.Buffer
		if err := EncodePNG(&b, imgs[name], Metadata{}); err != nil {
			t.Fatal(err)
		}
		rows := pngImageData(t, b.Bytes())
		if got := chooseDeflate(rows); got != want {
			t.Errorf("%s: mode %d, want %d", name, got, want)
		}
		if chosen, other := deflatedSize(want, rows), deflatedSize(fastLZ+runsLZ-want, rows); want != huffmanOnly && 100*chosen > 103*other {
			t.Errorf("%s: %d bytes in the chosen mode, %d in the other LZ77 mode", name, chosen, other)
		}
	}
}

// BenchmarkEncodePNG12MP: go test ./codec/imageio/ -run x -bench EncodePNG12MP -cpu 1 (a photo-like ramp with
// noise, as a marked photo is).
func BenchmarkEncodePNG12MP(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	img := image.NewNRGBA(image.Rect(0, 0, 4000, 3000))
	for i := range img.Pix {
		img.Pix[i] = uint8(100 + (i/4)%4000/40 + rng.IntN(24))
		if i%4 == 3 {
			img.Pix[i] = 255
		}
	}
	cpu := cpuTime()
	for b.Loop() {
		if err := EncodePNG(io.Discard, img, Metadata{}); err != nil {
			b.Fatal(err)
		}
	}
	reportCPU(b, cpu)
}

// BenchmarkEncodePNG16bit12MP compares EncodePNG on a 16-bit 12 MP noisy ramp (a marked 16-bit photo) with
// image/png at its fastest level, which EncodePNG used for 16-bit images before:
// go test ./codec/imageio/ -run x -bench EncodePNG16bit12MP -cpu 1 -benchtime 3x
func BenchmarkEncodePNG16bit12MP(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	img := image.NewNRGBA64(image.Rect(0, 0, 4000, 3000))
	for i := 0; i < len(img.Pix); i += 2 {
		v := uint16(20000 + (i/8)%4000*8 + rng.IntN(24*256))
		if i%8 == 6 {
			v = 65535
		}
		img.Pix[i], img.Pix[i+1] = byte(v>>8), byte(v)
	}
	for _, c := range []struct {
		name   string
		encode func(io.Writer) error
	}{
		{"image-png", func(w io.Writer) error { return (&png.Encoder{CompressionLevel: png.BestSpeed}).Encode(w, img) }},
		{"EncodePNG", func(w io.Writer) error { return EncodePNG(w, img, Metadata{}) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			var out countWriter
			cpu := cpuTime()
			for b.Loop() {
				out = countWriter{}
				if err := c.encode(&out); err != nil {
					b.Fatal(err)
				}
			}
			reportCPU(b, cpu)
			b.ReportMetric(float64(out.n)/1e6, "MB")
		})
	}
}

// The eight-bytes-at-a-time sums equal the byte-by-byte ones, on random bytes and on extremes (differences of
// exactly ±128, long rows that make the 16-bit lanes flush).
func TestSWARSums(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, n := range []int{8, 64, 1024, 8 * 300} {
		for _, pick := range []func() byte{
			func() byte { return byte(rng.IntN(256)) },
			func() byte { return []byte{0, 0x80, 0xFF, 0x7F}[rng.IntN(4)] },
		} {
			c, l, u := make([]byte, n), make([]byte, n), make([]byte, n)
			for i := range c {
				c[i], l[i], u[i] = pick(), pick(), pick()
			}
			var want [4]int
			for i := range c {
				want[0] += abs8(c[i] - u[i])
				want[1] += abs8(c[i])
				want[2] += abs8(c[i] - l[i])
				want[3] += abs8(c[i] - uint8((uint(l[i])+uint(u[i]))/2))
			}
			up, none, sub, avg := swarSums(c, l, u)
			if got := [4]int{up, none, sub, avg}; got != want {
				t.Fatalf("%d bytes: sums %v, want %v", n, got, want)
			}
		}
	}
}

// BenchmarkFilterRow: one 4000-pixel RGB row of a noisy ramp (the PNG filter of a marked 12 MP photo is 3000 of
// these).
func BenchmarkFilterRow(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 4))
	prev, cur, out := make([]byte, 12000), make([]byte, 12000), make([]byte, 12001)
	for i := range cur {
		prev[i] = uint8(100 + i/120 + rng.IntN(24))
		cur[i] = uint8(100 + i/120 + rng.IntN(24))
	}
	cpu := cpuTime()
	for b.Loop() {
		filterRow(out, cur, prev, 3)
	}
	reportCPU(b, cpu)
}

// EncodePNGZlib writes a file around a stream compressed elsewhere (codec/pardeflate's, as a GPU writes it):
// it decodes to the source pixels with the profile kept, and is, but for the image data, EncodePNGRows's file;
// the parallel stream stays within 10% of EncodePNG's size (or 512 bytes on a tiny image: each 16 KiB segment
// learns its matches afresh) on noise, flat artwork and a ramp.
func TestEncodePNGZlib(t *testing.T) {
	icc := fakeICC("RGB ", 900)
	for name, img := range pngTestImages() {
		var rowsFile bytes.Buffer
		if err := EncodePNG(&rowsFile, img, Metadata{ICC: icc}); err != nil {
			t.Fatal(err)
		}
		rows := pngImageData(t, rowsFile.Bytes())
		var got bytes.Buffer
		if err := EncodePNGZlib(&got, img.Rect.Dx(), img.Rect.Dy(), !isOpaque(img), pardeflate.Compress(rows), Metadata{ICC: icc}); err != nil {
			t.Fatal(err)
		}
		back, err := DecodeBytes(got.Bytes(), Limits{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if m, ok := back.Image.(*image.NRGBA); !ok || !bytes.Equal(m.Pix, img.Pix) || !bytes.Equal(back.ICC, icc) {
			t.Fatalf("%s: read back %T, ICC %d bytes: not the source", name, back.Image, len(back.ICC))
		}
		if !bytes.Equal(pngImageData(t, got.Bytes()), rows) {
			t.Fatalf("%s: the image data does not inflate to the rows", name)
		}
		if got.Len() > max(rowsFile.Len()*11/10, rowsFile.Len()+512) {
			t.Errorf("%s: %d bytes with the parallel stream, %d with EncodePNG", name, got.Len(), rowsFile.Len())
		}
	}
	if err := EncodePNGZlib(io.Discard, 3, 3, false, []byte{0x78}, Metadata{}); err == nil {
		t.Error("a 1-byte stream was written")
	}
}
