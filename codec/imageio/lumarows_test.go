package imageio

import (
	"bytes"
	"context"
	"errors"
	"image"
	"image/color"
	"image/jpeg"
	"testing"
)

// lumaPlane returns the Y (or grey) samples of the image DecodeForAnalysis returns, row by row, and its size.
func lumaPlane(t *testing.T, data []byte) ([]uint8, int, int) {
	t.Helper()
	img, _, err := DecodeForAnalysis(context.Background(), data, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	b := img.Bounds()
	out := make([]uint8, 0, b.Dx()*b.Dy())
	for y := b.Min.Y; y < b.Max.Y; y++ {
		switch m := img.(type) {
		case *image.YCbCr:
			out = append(out, m.Y[m.YOffset(b.Min.X, y):][:b.Dx()]...)
		case *image.Gray:
			out = append(out, m.Pix[m.PixOffset(b.Min.X, y):][:b.Dx()]...)
		default:
			t.Fatalf("DecodeForAnalysis returned %T", img)
		}
	}
	return out, b.Dx(), b.Dy()
}

// TestLumaRows: the luma rows of a JPEG (4:2:0, 4:2:2 and 4:4:4, restart markers, saturated colours, grey,
// sizes that are not multiples of the MCU) are byte for byte the Y samples of the image DecodeForAnalysis
// returns (what the detector reads from it), read in order, again from the top, out of order and as a prefix
// of each row; a YCbCr JPEG is decoded on demand; a file cut short is refused by DecodeLumaRows itself; a PNG
// comes back as DecodeForAnalysis' image; limits apply.
func TestLumaRows(t *testing.T) {
	ctx := context.Background()
	for name, data := range fastJPEGCases(t) {
		rows, img, err := DecodeLumaRows(ctx, data, Limits{})
		if err != nil || rows == nil || img != nil {
			t.Fatalf("%s: rows %v, image %v, %v", name, rows != nil, img != nil, err)
		}
		if (rows.lazy != nil) != (name != "image/jpeg grey") {
			t.Errorf("%s: decoded on demand: %v", name, rows.lazy != nil)
		}
		want, w, h := lumaPlane(t, data)
		if rows.Width != w || rows.Height != h {
			t.Fatalf("%s: rows %dx%d, DecodeForAnalysis %dx%d", name, rows.Width, rows.Height, w, h)
		}
		order := make([]int, 0, 3*h)
		for y := 0; y < h; y++ {
			order = append(order, y)
		}
		order = append(order, order...)
		for y := h - 1; y >= 0; y -= 7 {
			order = append(order, y)
		}
		row := make([]uint8, w)
		for _, y := range order {
			rows.Row(y, row)
			if !bytes.Equal(row, want[y*w:(y+1)*w]) {
				t.Fatalf("%s: row %d: %v, DecodeForAnalysis %v", name, y, row, want[y*w:(y+1)*w])
			}
		}
		if w > 1 {
			rows.Row(h-1, row[:w/2])
			if !bytes.Equal(row[:w/2], want[(h-1)*w:(h-1)*w+w/2]) {
				t.Errorf("%s: prefix of the last row differs", name)
			}
		}
		if _, _, err := DecodeLumaRows(ctx, data, Limits{MaxPixels: int64(w*h) - 1}); w*h > 1 && !errors.Is(err, ErrTooManyPixels) {
			t.Errorf("%s: pixel limit: %v", name, err)
		}
	}
	data := fastJPEGCases(t)["EncodeJPEG 4:4:4 q95"]
	cut := append(bytes.Clone(data[:len(data)-40]), 0xFF, 0xD9)
	if _, err := jpeg.Decode(bytes.NewReader(cut)); err == nil {
		t.Fatal("image/jpeg accepts the cut file; the test needs one it refuses")
	}
	if _, _, err := DecodeLumaRows(ctx, cut, Limits{}); !errors.Is(err, ErrCorrupt) {
		t.Errorf("cut file: DecodeLumaRows gave %v, want ErrCorrupt", err)
	}
	src := image.NewNRGBA(image.Rect(0, 0, 20, 10))
	for i := range src.Pix {
		src.Pix[i] = uint8(i)
	}
	src.SetNRGBA(0, 0, color.NRGBA{1, 2, 3, 4})
	pngData := encodeWith(t, func(b *bytes.Buffer) error { return EncodePNG(b, src, Metadata{}) })
	rows, img, err := DecodeLumaRows(ctx, pngData, Limits{})
	if err != nil || rows != nil || img == nil {
		t.Fatalf("png: rows %v, image %v, %v", rows != nil, img != nil, err)
	}
	if want, _, _ := DecodeForAnalysis(ctx, pngData, Limits{}); img.Bounds() != want.Bounds() || img.At(0, 0) != want.At(0, 0) {
		t.Errorf("png: image differs from DecodeForAnalysis'")
	}
}
