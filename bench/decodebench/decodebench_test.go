package decodebench

import (
	"bytes"
	"errors"
	"image"
	"image/jpeg"
	"testing"

	"filigrane/codec"
	"filigrane/codec/imageio"
)

// scanBomb builds a side×side gray progressive JPEG whose AC scans each skip every block with a few
// end-of-band runs: 18 bytes a scan, while image/jpeg walks every block in each.
func scanBomb(side, scans int) []byte {
	var b bytes.Buffer
	seg := func(m byte, p []byte) {
		b.Write([]byte{0xFF, m, byte((len(p) + 2) >> 8), byte(len(p) + 2)})
		b.Write(p)
	}
	b.Write([]byte{0xFF, 0xD8})
	q := bytes.Repeat([]byte{1}, 65)
	q[0] = 0
	seg(0xDB, q)
	seg(0xC2, []byte{8, byte(side >> 8), byte(side), byte(side >> 8), byte(side), 1, 1, 0x11, 0})
	seg(0xC4, append([]byte{0x00, 1}, append(make([]byte, 15), 0x00)...))
	seg(0xC4, append([]byte{0x10, 1}, append(make([]byte, 15), 0xE0)...))
	blocks := (side / 8) * (side / 8)
	seg(0xDA, []byte{1, 1, 0x00, 0, 0, 0})
	b.Write(make([]byte, (blocks+7)/8))
	for s := 0; s < scans; s++ {
		seg(0xDA, []byte{1, 1, 0x00, 1, 63, 0})
		bits := 15 * ((blocks + 16383) / 16384)
		d := make([]byte, (bits+7)/8)
		if r := bits % 8; r != 0 {
			d[len(d)-1] = byte(0xFF >> r)
		}
		b.Write(d)
	}
	b.Write([]byte{0xFF, 0xD9})
	return b.Bytes()
}

// BenchmarkScanBomb: a 2048×2048 progressive JPEG with 1000 scans (26 kB), decoded by image/jpeg (the
// baseline) and refused by imageio.
func BenchmarkScanBomb(b *testing.B) {
	data := scanBomb(2048, 1000)
	b.Run("image-jpeg", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := jpeg.Decode(bytes.NewReader(data)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("imageio", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := imageio.DecodeBytes(data, imageio.Limits{}); !errors.Is(err, imageio.ErrTooComplex) {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkDetectStrip: detection on a 40000×256 gray strip (10 MP), on the whole image (the baseline) and on
// codec.DetectRegion's 1024×256; B/op is the detector's allocation.
func BenchmarkDetectStrip(b *testing.B) {
	img := image.NewGray(image.Rect(0, 0, 40000, 256))
	for i := range img.Pix {
		img.Pix[i] = byte(100 + i*7%31)
	}
	c, err := codec.New([]byte(codec.DevelopmentKey))
	if err != nil {
		b.Fatal(err)
	}
	b.Run("whole", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			c.Detect(img)
		}
	})
	b.Run("region", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			c.Detect(img.SubImage(codec.DetectRegion(img.Bounds())))
		}
	})
}
