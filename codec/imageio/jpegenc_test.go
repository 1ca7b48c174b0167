package imageio

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"image"
	"image/color"
	"image/jpeg"
	"io"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"
)

// The encoder's files decode with the standard library as 4:4:4 baseline JPEGs close to the source, at sizes
// that are not multiples of 8, and carry the ICC profile through imageio's reader.
func TestEncodeJPEG444(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, size := range [][2]int{{64, 48}, {203, 117}, {1, 1}, {9, 700}} {
		src := image.NewNRGBA(image.Rect(0, 0, size[0], size[1]))
		for y := 0; y < size[1]; y++ {
			for x := 0; x < size[0]; x++ {
				src.SetNRGBA(x, y, color.NRGBA{uint8(x * 3), uint8(y * 2), uint8(128 + rng.IntN(40)), 255})
			}
		}
		for _, q := range []int{95, 50} {
			var buf bytes.Buffer
			if err := EncodeJPEG(&buf, src, q, nil); err != nil {
				t.Fatal(err)
			}
			img, err := jpeg.Decode(bytes.NewReader(buf.Bytes()))
			if err != nil {
				t.Fatalf("%v q%d: stdlib decode: %v", size, q, err)
			}
			ycc, ok := img.(*image.YCbCr)
			if !ok || ycc.SubsampleRatio != image.YCbCrSubsampleRatio444 || img.Bounds() != src.Bounds() {
				t.Fatalf("%v q%d: decoded %T %v", size, q, img, img.Bounds())
			}
			// Full chroma resolution must do at least as well as image/jpeg's 4:2:0 at the same quality.
			var ref bytes.Buffer
			if err := jpeg.Encode(&ref, src, &jpeg.Options{Quality: q}); err != nil {
				t.Fatal(err)
			}
			refImg, _ := jpeg.Decode(&ref)
			if p, pr := psnr(src, img), psnr(src, refImg); p < pr || p < 30 {
				t.Errorf("%v q%d: PSNR %.1f dB, image/jpeg 4:2:0 %.1f dB", size, q, p, pr)
			}
		}
	}
	icc := fakeICC("RGB ", 70000) // needs two APP2 segments
	var buf bytes.Buffer
	if err := EncodeJPEG(&buf, pattern(300, 200), 95, icc); err != nil {
		t.Fatal(err)
	}
	pic, err := DecodeBytes(buf.Bytes(), Limits{})
	if err != nil || pic.Format != "jpeg" || !bytes.Equal(pic.ICC, icc) || pic.Width != 300 {
		t.Fatalf("imageio read back: %v, format %q, ICC %d bytes (want %d)", err, pic.Format, len(pic.ICC), len(icc))
	}
	if err := EncodeJPEG(&buf, pattern(10, 10), 0, nil); err == nil {
		t.Error("quality 0 accepted")
	}
}

func psnr(a *image.NRGBA, b image.Image) float64 {
	var se float64
	r := a.Bounds()
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			c := a.NRGBAAt(x, y)
			r2, g2, b2, _ := b.At(x, y).RGBA()
			for _, d := range []float64{float64(c.R) - float64(r2>>8), float64(c.G) - float64(g2>>8), float64(c.B) - float64(b2>>8)} {
				se += d * d
			}
		}
	}
	return 10 * math.Log10(255*255*3*float64(r.Dx()*r.Dy())/se)
}

// Lossless WebP output decodes (through imageio's reader) to exactly the source pixels, with the ICC profile.
func TestEncodeWebPLossless(t *testing.T) {
	src := pattern(301, 157)
	icc := fakeICC("RGB ", 3001)
	for _, prof := range [][]byte{nil, icc} {
		var buf bytes.Buffer
		if err := EncodeWebP(&buf, src, prof); err != nil {
			t.Fatal(err)
		}
		pic, err := DecodeBytes(buf.Bytes(), Limits{})
		if err != nil || pic.Format != "webp" || !bytes.Equal(pic.ICC, prof) {
			t.Fatalf("read back: %v, format %q, ICC %d bytes (want %d)", err, pic.Format, len(pic.ICC), len(prof))
		}
		got, ok := pic.Image.(*image.NRGBA)
		if !ok || !bytes.Equal(got.Pix, src.Pix) {
			t.Fatalf("pixels differ after a lossless round trip (%T)", pic.Image)
		}
	}
}

// TestEncodeJPEGGolden pins the encoder's bytes (sizes that are not multiples of 8, 8 and 16-bit input, two
// qualities), so that speed work on it cannot change the files it writes unnoticed.
func TestEncodeJPEGGolden(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("golden hashes are for amd64 (other architectures fuse multiply-adds)")
	}
	rng := rand.New(rand.NewPCG(7, 8))
	src := image.NewNRGBA(image.Rect(0, 0, 203, 117))
	deep := image.NewNRGBA64(image.Rect(0, 0, 203, 117))
	for y := 0; y < 117; y++ {
		for x := 0; x < 203; x++ {
			c := color.NRGBA{uint8(x * 3), uint8(y * 2), uint8(128 + rng.IntN(40)), 255}
			src.SetNRGBA(x, y, c)
			deep.SetNRGBA64(x, y, color.NRGBA64{uint16(c.R)<<8 | uint16(x), uint16(c.G) << 8, uint16(c.B)<<8 | 0xff, 0xffff})
		}
	}
	for _, tc := range []struct {
		name string
		img  image.Image
		q    int
		want string
	}{
		{"q95", src, 95, "211cfff56ba4a1df"}, {"q40", src, 40, "7a45ec8c78635a2f"}, {"deep-q95", deep, 95, "476460ddfb4ddc29"},
	} {
		var buf bytes.Buffer
		if err := EncodeJPEG(&buf, tc.img, tc.q, nil); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(buf.Bytes())
		if got := hex.EncodeToString(sum[:8]); got != tc.want {
			t.Errorf("%s: file hash %s, want %s", tc.name, got, tc.want)
		}
	}
}

// BenchmarkEncodeJPEG12MP: go test ./codec/imageio/ -run x -bench EncodeJPEG12MP -cpu 1
func BenchmarkEncodeJPEG12MP(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	img := image.NewNRGBA(image.Rect(0, 0, 4000, 3000))
	for i := range img.Pix {
		img.Pix[i] = uint8(100 + (i/4)%4000/40 + rng.IntN(24))
	}
	for b.Loop() {
		if err := EncodeJPEG(io.Discard, img, 95, nil); err != nil {
			b.Fatal(err)
		}
	}
}
