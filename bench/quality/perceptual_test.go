package quality

import (
	"context"
	"errors"
	"image"
	"image/color"
	"math"
	"testing"
)

func TestParseButteraugli(t *testing.T) {
	b, err := parseButteraugli([]byte("1.8815099001\n3-norm: 0.590802\n"))
	if err != nil || b.Max != 1.8815099001 || b.Norm3 != 0.590802 {
		t.Fatalf("%+v %v", b, err)
	}
	if _, err := parseButteraugli([]byte("1.2\n")); err == nil {
		t.Fatal("output without a 3-norm accepted")
	}
}

// FlatRMS looks only at the flattest tenth of the blocks: a change confined to a textured half does not count,
// a uniform change of 1 level everywhere gives exactly 1.
func TestFlatRMS(t *testing.T) {
	a := image.NewNRGBA(image.Rect(0, 0, 320, 320))
	for y := 0; y < 320; y++ {
		for x := 0; x < 320; x++ {
			v := uint8(100)
			if x >= 160 && (x+y)%2 == 0 {
				v = 200 // checkerboard texture on the right half
			}
			a.SetNRGBA(x, y, color.NRGBA{v, v, v, 255})
		}
	}
	texOnly := image.NewNRGBA(a.Rect)
	copy(texOnly.Pix, a.Pix)
	everywhere := image.NewNRGBA(a.Rect)
	copy(everywhere.Pix, a.Pix)
	for y := 0; y < 320; y++ {
		for x := 0; x < 320; x++ {
			i := everywhere.PixOffset(x, y)
			for c := 0; c < 3; c++ {
				everywhere.Pix[i+c]++
				if x >= 160 {
					texOnly.Pix[i+c] += 5
				}
			}
		}
	}
	if v, p := FlatRMS(a, texOnly); v != 0 || p.X >= 160 {
		t.Fatalf("change in texture only: flat RMS %.3f at %v", v, p)
	}
	if v, _ := FlatRMS(a, everywhere); math.Abs(v-1) > 1e-9 {
		t.Fatalf("uniform change of 1: flat RMS %.3f", v)
	}
	panel := SideBySide(a, everywhere, image.Pt(300, 300), 64, 8)
	if panel.Bounds().Dx() != 3*20+16 || panel.Bounds().Dy() != 20 {
		t.Fatalf("panel clipped to the image: %v", panel.Bounds())
	}
	if got := panel.NRGBAAt(2*(20+8)+1, 1).R; got != 136 { // 128 + 8·1
		t.Fatalf("difference x8 pixel %d, want 136", got)
	}
}

func TestButteraugliDistance(t *testing.T) {
	a := image.NewNRGBA(image.Rect(0, 0, 64, 64))
	for i := range a.Pix {
		a.Pix[i] = 128
	}
	b, err := ButteraugliDistance(context.Background(), a, a)
	if errors.Is(err, ErrNoButteraugli) {
		t.Skip(err)
	}
	if err != nil || b.Max != 0 || b.Norm3 != 0 {
		t.Fatalf("identical images: %+v %v", b, err)
	}
}
