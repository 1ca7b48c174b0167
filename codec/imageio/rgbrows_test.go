package imageio

import (
	"bytes"
	"context"
	"image"
	"image/color"
	"image/jpeg"
	"math/rand/v2"
	"os"
	"testing"
)

// TestDecodeRGBRows: the rows of a JPEG (4:4:4 from EncodeJPEG, 4:2:0 from image/jpeg, sizes that are not
// multiples of the chroma blocks) are byte for byte the RGB of the image Decode returns; a rotated JPEG, a
// grayscale JPEG and a PNG come back as the Picture Decode returns; limits apply as in Decode.
func TestDecodeRGBRows(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	src := image.NewNRGBA(image.Rect(0, 0, 203, 117))
	gray := image.NewGray(src.Rect)
	for y := 0; y < 117; y++ {
		for x := 0; x < 203; x++ {
			src.SetNRGBA(x, y, color.NRGBA{uint8(x), uint8(2 * y), uint8(rng.IntN(256)), 255})
			gray.SetGray(x, y, color.Gray{uint8(x + y)})
		}
	}
	ctx := context.Background()
	own := encodeWith(t, func(b *bytes.Buffer) error { return EncodeJPEG(b, src, 95, nil) })
	std := encodeWith(t, func(b *bytes.Buffer) error { return jpeg.Encode(b, src, &jpeg.Options{Quality: 80}) })
	r422, err := os.ReadFile("testdata/restart_422.jpg")
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"444": own, "420": std, "422 with restart markers": r422} {
		rows, pic, err := DecodeRGBRows(ctx, data, Limits{})
		if err != nil || rows == nil || pic != nil {
			t.Fatalf("%s: rows %v, picture %v, %v", name, rows != nil, pic != nil, err)
		}
		want, err := DecodeBytes(data, Limits{})
		if err != nil {
			t.Fatal(err)
		}
		m := want.Image.(*image.NRGBA)
		rgb := make([]uint8, 3*rows.Width)
		for y := 0; y < rows.Height; y++ {
			rows.Row(y, rgb)
			for x := 0; x < rows.Width; x++ {
				p := m.Pix[m.PixOffset(x, y):]
				if rgb[3*x] != p[0] || rgb[3*x+1] != p[1] || rgb[3*x+2] != p[2] {
					t.Fatalf("%s: pixel %d,%d: rows %v, Decode %v", name, x, y, rgb[3*x:3*x+3], p[:3])
				}
			}
		}
		if _, _, err := DecodeRGBRows(ctx, data, Limits{MaxPixels: 1000}); err == nil {
			t.Errorf("%s: pixel limit not applied", name)
		}
	}
	rotated := withJPEGSegments(std, jpegSegment(0xE1, exifOrientation(6, false)))
	grayJPEG := encodeWith(t, func(b *bytes.Buffer) error { return jpeg.Encode(b, gray, nil) })
	pngData := encodeWith(t, func(b *bytes.Buffer) error { return EncodePNG(b, src, nil) })
	for name, data := range map[string][]byte{"rotated": rotated, "gray": grayJPEG, "png": pngData} {
		rows, pic, err := DecodeRGBRows(ctx, data, Limits{})
		if err != nil || rows != nil || pic == nil {
			t.Fatalf("%s: rows %v, picture %v, %v", name, rows != nil, pic != nil, err)
		}
		want, _ := DecodeBytes(data, Limits{})
		if pic.Width != want.Width || pic.Orientation != want.Orientation || !bytes.Equal(pixels(pic.Image), pixels(want.Image)) {
			t.Errorf("%s: picture differs from Decode's", name)
		}
	}
}

func pixels(img image.Image) []uint8 {
	if m, ok := img.(*image.NRGBA); ok {
		return m.Pix
	}
	return nil
}
