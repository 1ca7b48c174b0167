package quality

import (
	"image"
	"math"
	"testing"
)

func TestPSNRAndSSIM(t *testing.T) {
	a := image.NewNRGBA(image.Rect(0, 0, 32, 32))
	for i := range a.Pix {
		a.Pix[i] = uint8(i * 13)
	}
	b := image.NewNRGBA(a.Rect)
	copy(b.Pix, a.Pix)
	if !math.IsInf(PSNR(a, b), 1) || math.Abs(SSIM(a, b)-1) > 1e-9 {
		t.Fatal("identical images")
	}
	// Every R, G and B value off by 1: MSE 1, PSNR 20 log10(255) = 48.13 dB.
	for i := range b.Pix {
		if i%4 != 3 {
			if b.Pix[i] < 255 {
				b.Pix[i]++
			} else {
				b.Pix[i]--
			}
		}
	}
	if p := PSNR(a, b); math.Abs(p-48.13) > 0.01 {
		t.Fatalf("PSNR %.3f", p)
	}
	if s := SSIM(a, b); s >= 1 || s < 0.9 {
		t.Fatalf("SSIM %.4f", s)
	}
}
