package imageio

import (
	"bytes"
	"image"
	"image/png"
	"testing"
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
		if err := EncodePNGRows(&buf, w, h, alpha, rows, nil); err != nil {
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
	if err := EncodePNGRows(&bytes.Buffer{}, 4, 4, false, make([]byte, 10), nil); err == nil {
		t.Fatal("rows of the wrong length were accepted")
	}
}
