package imageiotest_test

import (
	"bytes"
	"image"
	"image/png"
	"testing"

	"filigrane/codec/imageio/imageiotest"
)

// TestStripedGrayPNG: the file decodes to the size asked, every row the same stripes.
func TestStripedGrayPNG(t *testing.T) {
	img, err := png.Decode(bytes.NewReader(imageiotest.StripedGrayPNG(37, 5)))
	if err != nil {
		t.Fatal(err)
	}
	g, ok := img.(*image.Gray)
	if !ok || g.Bounds() != image.Rect(0, 0, 37, 5) {
		t.Fatalf("decoded %T %v, want a 37x5 *image.Gray", img, img.Bounds())
	}
	for y := range 5 {
		for x := range 37 {
			if v := g.GrayAt(x, y).Y; v != byte(100+x%7) {
				t.Fatalf("pixel (%d,%d) = %d, want %d", x, y, v, 100+x%7)
			}
		}
	}
}
