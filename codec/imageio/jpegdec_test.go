package imageio

import (
	"bytes"
	"context"
	"errors"
	"image"
	"image/jpeg"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
)

// noisyPicture is a gradient with per-pixel noise of amplitude amp: photo-like, so that blocks carry AC
// coefficients at every frequency.
func noisyPicture(w, h, amp int, seed uint64) *image.NRGBA {
	img := pattern(w, h)
	r := rand.New(rand.NewPCG(seed, 1))
	for i := range img.Pix {
		if i%4 == 3 || amp == 0 {
			continue
		}
		img.Pix[i] = uint8(min(255, max(0, int(img.Pix[i])+r.IntN(2*amp+1)-amp)))
	}
	return img
}

// fastJPEGCases are files the fast decoder must decode itself (no fallback), with what they exercise.
func fastJPEGCases(t testing.TB) map[string][]byte {
	t.Helper()
	cases := map[string][]byte{}
	for _, q := range []int{30, 90, 100} {
		img := noisyPicture(61, 37, 40, uint64(q))
		cases["image/jpeg 4:2:0 q"+strconv.Itoa(q)] = encodeWith(t, func(b *bytes.Buffer) error { return jpeg.Encode(b, img, &jpeg.Options{Quality: q}) })
	}
	gray := image.NewGray(image.Rect(0, 0, 45, 29))
	for i := range gray.Pix {
		gray.Pix[i] = uint8(i * 7)
	}
	cases["image/jpeg grey"] = encodeWith(t, func(b *bytes.Buffer) error { return jpeg.Encode(b, gray, &jpeg.Options{Quality: 95}) })
	cases["1x1"] = encodeWith(t, func(b *bytes.Buffer) error { return jpeg.Encode(b, noisyPicture(1, 1, 0, 1), nil) })
	big := noisyPicture(200, 150, 60, 7)
	cases["EncodeJPEG 4:4:4 q95"] = encodeWith(t, func(b *bytes.Buffer) error { return EncodeJPEG(b, big, 95, Metadata{}) })
	cases["EncodeJPEG 4:4:4 q40 with ICC"] = encodeWith(t, func(b *bytes.Buffer) error { return EncodeJPEG(b, big, 40, Metadata{ICC: fakeICC("RGB ", 3000)}) })
	// Saturated colours push the colour conversion to its clamps.
	sat := image.NewNRGBA(image.Rect(0, 0, 32, 32))
	for i := range sat.Pix {
		sat.Pix[i] = []uint8{255, 0, 0, 255, 0, 255, 255, 255, 0, 0, 255, 255}[i%12]
	}
	cases["saturated"] = encodeWith(t, func(b *bytes.Buffer) error { return EncodeJPEG(b, sat, 100, Metadata{}) })
	// Photoshop's Adobe segment with transform 1 (YCbCr).
	cases["Adobe APP14 YCbCr"] = withJPEGSegments(cases["image/jpeg 4:2:0 q90"],
		jpegSegment(0xEE, []byte{'A', 'd', 'o', 'b', 'e', 0, 100, 0, 0, 0, 0, 1}))
	for _, pf := range []string{"420", "422", "444"} {
		b, err := os.ReadFile("testdata/restart_" + pf + ".jpg")
		if err != nil {
			t.Fatal(err)
		}
		cases["ffmpeg restart markers "+pf] = b
	}
	return cases
}

// TestFastJPEGMatchesImageJPEG: on baseline files of every chroma layout it handles, with and without restart
// markers, the fast decoder returns image/jpeg's image type and bounds and samples within ±1 of image/jpeg's,
// and its NRGBA output is exactly the conversion of its own YCbCr (the conversion DecodeBytes used to make).
func TestFastJPEGMatchesImageJPEG(t *testing.T) {
	ctx := context.Background()
	for name, data := range fastJPEGCases(t) {
		want, err := jpeg.Decode(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("%s: image/jpeg: %v", name, err)
		}
		got, err := decodeJPEGFast(ctx, data, jpegNative)
		if err != nil {
			t.Errorf("%s: fast decoder: %v", name, err)
			continue
		}
		if d := maxSampleDiff(t, got, want); d > 1 {
			t.Errorf("%s: samples differ from image/jpeg's by up to %d", name, d)
		}
		n, err := decodeJPEGFast(ctx, data, jpegNRGBA)
		if err != nil {
			t.Fatalf("%s: fast decoder to NRGBA: %v", name, err)
		}
		b := got.Bounds()
		if conv := toNRGBA(got, image.Rect(0, 0, b.Dx(), b.Dy())); !bytes.Equal(conv.Pix, n.(*image.NRGBA).Pix) || n.Bounds() != conv.Bounds() {
			t.Errorf("%s: NRGBA output is not the conversion of the YCbCr output", name)
		}
	}
}

// maxSampleDiff compares two images of the same type (*image.YCbCr with the same ratio, or *image.Gray) sample
// by sample over their bounds.
func maxSampleDiff(t *testing.T, got, want image.Image) int {
	t.Helper()
	if got.Bounds() != want.Bounds() {
		t.Fatalf("bounds %v, image/jpeg %v", got.Bounds(), want.Bounds())
	}
	diff := 0
	cmp := func(a, b uint8) {
		diff = max(diff, int(a)-int(b), int(b)-int(a))
	}
	r := got.Bounds()
	switch w := want.(type) {
	case *image.YCbCr:
		g, ok := got.(*image.YCbCr)
		if !ok || g.SubsampleRatio != w.SubsampleRatio {
			t.Fatalf("got %T, image/jpeg %T %v", got, want, w.SubsampleRatio)
		}
		for y := r.Min.Y; y < r.Max.Y; y++ {
			for x := r.Min.X; x < r.Max.X; x++ {
				cmp(g.Y[g.YOffset(x, y)], w.Y[w.YOffset(x, y)])
				cmp(g.Cb[g.COffset(x, y)], w.Cb[w.COffset(x, y)])
				cmp(g.Cr[g.COffset(x, y)], w.Cr[w.COffset(x, y)])
			}
		}
	case *image.Gray:
		g, ok := got.(*image.Gray)
		if !ok {
			t.Fatalf("got %T, image/jpeg %T", got, want)
		}
		for y := r.Min.Y; y < r.Max.Y; y++ {
			for x := r.Min.X; x < r.Max.X; x++ {
				cmp(g.GrayAt(x, y).Y, w.GrayAt(x, y).Y)
			}
		}
	default:
		t.Fatalf("image/jpeg gave %T", want)
	}
	return diff
}

// TestFastJPEGFallsBack: files outside the fast decoder's subset (progressive, CMYK, more Huffman tables than
// maxJPEGHuffTables, RGB declared by an Adobe segment) go to image/jpeg and decode as before.
func TestFastJPEGFallsBack(t *testing.T) {
	ctx := context.Background()
	for _, name := range []string{"progressive.jpg", "cmyk.jpg"} {
		data, err := os.ReadFile("testdata/" + name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := decodeJPEGFast(ctx, data, jpegNRGBA); !errors.Is(err, errJPEGFallback) {
			t.Errorf("%s: fast decoder gave %v, want the fallback", name, err)
		}
		p, err := DecodeBytes(data, Limits{})
		if err != nil || p.Width != 32 || p.Height != 16 {
			t.Errorf("%s: DecodeBytes: %v", name, err)
		}
	}
	// More table definitions than a real file has: image/jpeg's business.
	dht := encodeWith(t, func(b *bytes.Buffer) error { return jpeg.Encode(b, noisyPicture(16, 16, 9, 2), nil) })
	i := bytes.Index(dht, []byte{0xFF, 0xC4})
	n := int(dht[i+2])<<8 | int(dht[i+3])
	var many []byte
	for range maxJPEGHuffTables {
		many = append(many, dht[i:i+2+n]...)
	}
	many = append(append(append([]byte(nil), dht[:i]...), many...), dht[i:]...)
	if _, err := decodeJPEGFast(ctx, many, jpegNRGBA); !errors.Is(err, errJPEGFallback) {
		t.Errorf("%d table definitions: fast decoder gave %v, want the fallback", maxJPEGHuffTables*4+4, err)
	}
	if _, err := DecodeBytes(many, Limits{}); err != nil {
		t.Errorf("%d table definitions: DecodeBytes: %v", maxJPEGHuffTables*4+4, err)
	}
	// An Adobe segment with transform 0 makes image/jpeg read the three components as R, G and B.
	rgb := withJPEGSegments(fastJPEGCases(t)["image/jpeg 4:2:0 q90"], jpegSegment(0xEE, []byte{'A', 'd', 'o', 'b', 'e', 0, 100, 0, 0, 0, 0, 0}))
	if _, err := decodeJPEGFast(ctx, rgb, jpegNRGBA); !errors.Is(err, errJPEGFallback) {
		t.Errorf("Adobe RGB: fast decoder gave %v, want the fallback", err)
	}
	want, err := jpeg.Decode(bytes.NewReader(rgb))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := want.(*image.RGBA); !ok {
		t.Fatalf("image/jpeg gave %T for the Adobe RGB file; the test needs RGB", want)
	}
	p, err := DecodeBytes(rgb, Limits{})
	if err != nil || !bytes.Equal(p.Image.(*image.NRGBA).Pix, toNRGBA(want, want.Bounds()).Pix) {
		t.Errorf("Adobe RGB: DecodeBytes differs from image/jpeg's RGB (%v)", err)
	}
}

// TestFastJPEGTruncatedAndCorrupt: every prefix of a file with restart markers, and the file with single bytes
// changed, is accepted by DecodeBytes exactly when image/jpeg accepts it; what the fast decoder accepts decodes
// within ±1 of image/jpeg.
func TestFastJPEGTruncatedAndCorrupt(t *testing.T) {
	data, err := os.ReadFile("testdata/restart_420.jpg")
	if err != nil {
		t.Fatal(err)
	}
	var variants [][]byte
	for n := 0; n <= len(data); n++ {
		variants = append(variants, data[:n])
	}
	r := rand.New(rand.NewPCG(3, 4))
	for range 3000 {
		v := bytes.Clone(data)
		v[r.IntN(len(v))] = uint8(r.IntN(256))
		variants = append(variants, v)
	}
	for _, v := range variants {
		checkFastJPEGAgainstImageJPEG(t, v)
	}
}

// checkFastJPEGAgainstImageJPEG fails t when the fast decoder accepts what image/jpeg refuses, decodes to
// samples more than 1 away from image/jpeg's, when DecodeBytes or DecodeLumaRows and image/jpeg disagree on
// accepting data, or when the luma rows differ from DecodeForAnalysis' Y plane (checkLumaRows).
func checkFastJPEGAgainstImageJPEG(t *testing.T, data []byte) {
	t.Helper()
	want, werr := jpeg.Decode(bytes.NewReader(data))
	got, gerr := decodeJPEGFast(context.Background(), data, jpegNative)
	if gerr == nil {
		if werr != nil {
			t.Fatalf("fast decoder accepts a file image/jpeg refuses (%v): %x", werr, data)
		}
		if d := maxSampleDiff(t, got, want); d > 1 {
			t.Fatalf("samples differ by %d from image/jpeg: %x", d, data)
		}
	} else if !errors.Is(gerr, errJPEGFallback) {
		t.Fatalf("fast decoder: %v", gerr)
	}
	lim := Limits{MaxPixels: 1 << 20}
	if _, _, err := checkAll(data, lim); err != nil {
		return // refused before decoding
	}
	_, _, lerr := DecodeLumaRows(context.Background(), data, lim)
	if werr != nil {
		if lerr == nil {
			t.Fatalf("DecodeLumaRows accepts a file image/jpeg refuses (%v): %x", werr, data)
		}
		return
	}
	if _, err := DecodeBytes(data, lim); err != nil {
		t.Fatalf("DecodeBytes refuses what image/jpeg accepts (%v): %x", err, data)
	}
	checkLumaRows(t, data, lim)
}

// checkLumaRows fails t when DecodeLumaRows refuses a file that image/jpeg accepts, or when its rows differ from
// the Y (or grey) plane of the image DecodeForAnalysis returns.
func checkLumaRows(t *testing.T, data []byte, lim Limits) {
	t.Helper()
	rows, other, err := DecodeLumaRows(context.Background(), data, lim)
	if err != nil {
		t.Fatalf("DecodeLumaRows refuses what image/jpeg accepts (%v): %x", err, data)
	}
	img, _, err := DecodeForAnalysis(context.Background(), data, lim)
	if err != nil {
		t.Fatalf("DecodeForAnalysis refuses what image/jpeg accepts (%v): %x", err, data)
	}
	if rows == nil {
		if other == nil {
			t.Fatalf("DecodeLumaRows returned neither rows nor an image: %x", data)
		}
		return
	}
	b := img.Bounds()
	var plane []uint8
	var stride int
	switch m := img.(type) {
	case *image.YCbCr:
		plane, stride = m.Y[m.YOffset(b.Min.X, b.Min.Y):], m.YStride
	case *image.Gray:
		plane, stride = m.Pix[m.PixOffset(b.Min.X, b.Min.Y):], m.Stride
	default:
		t.Fatalf("DecodeLumaRows gave rows of a %T: %x", img, data)
	}
	if rows.Width != b.Dx() || rows.Height != b.Dy() {
		t.Fatalf("luma rows %dx%d, image %v: %x", rows.Width, rows.Height, b, data)
	}
	row := make([]uint8, rows.Width)
	for y := 0; y < rows.Height; y++ {
		rows.Row(y, row)
		if !bytes.Equal(row, plane[y*stride:y*stride+rows.Width]) {
			t.Fatalf("luma row %d differs from DecodeForAnalysis' Y plane: %x", y, data)
		}
	}
}

// FuzzFastJPEG compares the fast decoder with image/jpeg on arbitrary bytes (seeded with the files it handles):
// same accept/reject through DecodeBytes, samples within ±1 where the fast decoder decodes.
func FuzzFastJPEG(f *testing.F) {
	for _, data := range fastJPEGCases(f) {
		if len(data) < 4096 { // small seeds keep each execution (and minimisation) short
			f.Add(data)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if f, err := sniff(data); err != nil || f.name != "jpeg" {
			return // other formats are FuzzDecode's
		}
		if _, cfg, err := checkAll(data, Limits{MaxPixels: 1 << 16}); err != nil || cfg.Width*cfg.Height > 1<<16 {
			return // big headers cost time, not coverage
		}
		checkFastJPEGAgainstImageJPEG(t, data)
	})
}

// TestFastJPEGCancel: a cancelled context stops the fast decoder with the context's error.
func TestFastJPEGCancel(t *testing.T) {
	data := fastJPEGCases(t)["EncodeJPEG 4:4:4 q95"]
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := decodeJPEGFast(ctx, data, jpegNRGBA); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	if _, err := DecodeBytesContext(ctx, data, Limits{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("DecodeBytesContext: got %v, want context.Canceled", err)
	}
}

// BenchmarkDecodeJPEG12MP: DecodeBytes of a 12 MP photo-like JPEG (image/jpeg q90 4:2:0, and this package's
// q95 4:4:4 as markfile's read-back check decodes it), with the fast decoder and with image/jpeg plus the
// conversion to NRGBA that DecodeBytes made before it.
//
//	go test ./codec/imageio -run x -bench DecodeJPEG12MP -cpu 1 -benchtime 5x
func BenchmarkDecodeJPEG12MP(b *testing.B) {
	img := noisyPicture(4000, 3000, 12, 1)
	files := map[string][]byte{
		"420q90": encodeWith(b, func(w *bytes.Buffer) error { return jpeg.Encode(w, img, &jpeg.Options{Quality: 90}) }),
		"444q95": encodeWith(b, func(w *bytes.Buffer) error { return EncodeJPEG(w, img, 95, Metadata{}) }),
	}
	for _, name := range []string{"420q90", "444q95"} {
		data := files[name]
		b.Run(name+"/fast", func(b *testing.B) {
			cpu := cpuTime()
			for b.Loop() {
				if _, err := DecodeBytes(data, Limits{}); err != nil {
					b.Fatal(err)
				}
			}
			reportCPU(b, cpu)
		})
		b.Run(name+"/image-jpeg", func(b *testing.B) {
			cpu := cpuTime()
			for b.Loop() {
				m, err := jpeg.Decode(bytes.NewReader(data))
				if err != nil {
					b.Fatal(err)
				}
				toNRGBA(m, m.Bounds())
			}
			reportCPU(b, cpu)
		})
	}
}
