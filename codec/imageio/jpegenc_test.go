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
			if err := EncodeJPEG(&buf, src, q, Metadata{}); err != nil {
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
	if err := EncodeJPEG(&buf, pattern(300, 200), 95, Metadata{ICC: icc}); err != nil {
		t.Fatal(err)
	}
	pic, err := DecodeBytes(buf.Bytes(), Limits{})
	if err != nil || pic.Format != "jpeg" || !bytes.Equal(pic.ICC, icc) || pic.Width != 300 {
		t.Fatalf("imageio read back: %v, format %q, ICC %d bytes (want %d)", err, pic.Format, len(pic.ICC), len(icc))
	}
	if err := EncodeJPEG(&buf, pattern(10, 10), 0, Metadata{}); err == nil {
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
		if err := EncodeWebP(&buf, src, Metadata{ICC: prof}); err != nil {
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
// qualities), so that speed work on it cannot change the files it writes unnoticed. The q95 hashes changed once,
// deliberately, with the AAN DCT and round-half-to-even quantisation (a handful of coefficients that sit within
// float32 error of a half step round the other way; TestEncodeJPEGCoefficients bounds that against the exact
// transform); q40 came out the same.
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
		{"q95", src, 95, "4fbe2db9b45ffef4"}, {"q40", src, 40, "7a45ec8c78635a2f"}, {"deep-q95", deep, 95, "1c344eee31b7b713"},
	} {
		var buf bytes.Buffer
		if err := EncodeJPEG(&buf, tc.img, tc.q, Metadata{}); err != nil {
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
	cpu := cpuTime()
	for b.Loop() {
		if err := EncodeJPEG(io.Discard, img, 95, Metadata{}); err != nil {
			b.Fatal(err)
		}
	}
	reportCPU(b, cpu)
}

// The fast transform (table colour conversion, AAN DCT with the quantiser folded in) quantises like the exact
// one: every coefficient of a noise image and of a colour ramp, at three qualities, is within one step of the exactly
// computed (float64, direct DCT formula) and rounded one, and almost all are equal; only values within float32
// rounding error of a half step may fall the other way.
func TestEncodeJPEGCoefficients(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	noise := image.NewNRGBA(image.Rect(0, 0, 203, 117))
	for i := range noise.Pix {
		noise.Pix[i] = uint8(rng.IntN(256))
	}
	ramp := image.NewNRGBA(image.Rect(0, 0, 203, 117)) // the golden test's image: many exact half steps
	for y := 0; y < 117; y++ {
		for x := 0; x < 203; x++ {
			ramp.SetNRGBA(x, y, color.NRGBA{uint8(x * 3), uint8(y * 2), uint8(128 + rng.IntN(40)), 255})
		}
	}
	for _, src := range []*image.NRGBA{noise, ramp} {
		w, h := src.Bounds().Dx(), src.Bounds().Dy()
		for _, q := range []int{100, 95, 50} {
			e := newJPEGEncoder(w, h, q)
			e.transform(src, new([4][257]int64))
			var got []int16 // expanded: per block 64 coefficients in zigzag order
			for _, row := range e.rows {
				for _, v := range row {
					if v < runLimit {
						got = append(got, make([]int16, v-runMark)...)
					} else {
						got = append(got, v)
					}
				}
			}
			if len(got) != e.bw*e.bh*3*64 {
				t.Fatalf("q%d: %d coefficients, want %d", q, len(got), e.bw*e.bh*3*64)
			}
			differ, i := 0, 0
			for by := 0; by < e.bh; by++ {
				for bx := 0; bx < e.bw; bx++ {
					for c := 0; c < 3; c++ {
						want := exactBlock(src, bx, by, c, &e.quant[min(c, 1)])
						for zi := 0; zi < 64; zi++ {
							d := int(got[i]) - int(want[zi])
							if d < -1 || d > 1 {
								t.Fatalf("q%d block (%d,%d) component %d zigzag %d: %d, exact %d", q, bx, by, c, zi, got[i], want[zi])
							}
							if d != 0 {
								differ++
							}
							i++
						}
					}
				}
			}
			t.Logf("q%d: %d of %d coefficients differ from the exact ones by one step", q, differ, len(got))
			if differ*1000 > len(got) {
				t.Errorf("q%d: %d of %d coefficients differ from the exact ones by one step", q, differ, len(got))
			}
		}
	}
}

// exactBlock quantises block (bx, by) of component c (0 Y, 1 Cb, 2 Cr) of img in float64 by the definitions of
// JFIF and T.81 (edge pixels repeated), in zigzag order.
func exactBlock(img *image.NRGBA, bx, by, c int, quant *[64]int32) [64]int16 {
	b := img.Bounds()
	var f [8][8]float64
	for y := 0; y < 8; y++ {
		for x := 0; x < 8; x++ {
			p := img.NRGBAAt(min(bx*8+x, b.Dx()-1), min(by*8+y, b.Dy()-1))
			r, g, bl := float64(p.R), float64(p.G), float64(p.B)
			switch c {
			case 0:
				f[y][x] = 0.299*r + 0.587*g + 0.114*bl - 128
			case 1:
				f[y][x] = -0.168736*r - 0.331264*g + 0.5*bl
			default:
				f[y][x] = 0.5*r - 0.418688*g - 0.081312*bl
			}
		}
	}
	var cos [8][8]float64 // cos[u][x] = C(u)·cos((2x+1)uπ/16)
	for u := 0; u < 8; u++ {
		for x := 0; x < 8; x++ {
			cos[u][x] = math.Cos(float64(2*x+1) * float64(u) * math.Pi / 16)
			if u == 0 {
				cos[u][x] /= math.Sqrt2
			}
		}
	}
	var out [64]int16
	for zi, ni := range zigzag {
		u, v := ni%8, ni/8
		s := 0.0
		for y := 0; y < 8; y++ {
			for x := 0; x < 8; x++ {
				s += f[y][x] * cos[u][x] * cos[v][y]
			}
		}
		s /= 4 * float64(quant[ni])
		out[zi] = int16(math.Round(s))
	}
	return out
}
