package decodebench

import (
	"bytes"
	"errors"
	"image"
	"image/jpeg"
	"testing"

	"filigrane/codec"
	"filigrane/codec/imageio"
	"filigrane/codec/imageio/imageiotest"
)

// BenchmarkScanBomb: a 2048×2048 progressive JPEG with 1000 scans (26 kB), decoded by image/jpeg (the
// baseline) and refused by imageio.
func BenchmarkScanBomb(b *testing.B) {
	data := imageiotest.ScanBomb(2048, 1000)
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
