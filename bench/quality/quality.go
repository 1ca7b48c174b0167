// Package quality measures how much a marked image differs from its original: PSNR over the 8-bit RGB channels
// and SSIM on luma.
package quality

import (
	"image"
	"math"
)

// PSNR returns the peak signal-to-noise ratio in dB over R, G and B of two images of equal size; +Inf when they
// are identical.
func PSNR(a, b *image.NRGBA) float64 {
	var se float64
	var n int
	r := a.Bounds()
	for y := 0; y < r.Dy(); y++ {
		pa, pb := a.Pix[y*a.Stride:], b.Pix[y*b.Stride:]
		for x := 0; x < 4*r.Dx(); x += 4 {
			for c := 0; c < 3; c++ {
				d := float64(pa[x+c]) - float64(pb[x+c])
				se += d * d
			}
			n += 3
		}
	}
	if se == 0 {
		return math.Inf(1)
	}
	return 10 * math.Log10(255*255*float64(n)/se)
}

// SSIM returns the mean structural similarity of the BT.601 luma of two images of equal size, over 8x8 windows
// placed every 4 pixels, with the usual constants (K1 = 0.01, K2 = 0.03, L = 255). A sparse window grid keeps
// it cheap on 40 MP images while differing from the Gaussian-window SSIM only in the third decimal.
func SSIM(a, b *image.NRGBA) float64 {
	const (
		win, step = 8, 4
		c1        = (0.01 * 255) * (0.01 * 255)
		c2        = (0.03 * 255) * (0.03 * 255)
	)
	r := a.Bounds()
	w, h := r.Dx(), r.Dy()
	if w < win || h < win {
		return 1
	}
	luma := func(m *image.NRGBA, x, y int) float64 {
		p := m.Pix[y*m.Stride+4*x:]
		return 0.299*float64(p[0]) + 0.587*float64(p[1]) + 0.114*float64(p[2])
	}
	var sum float64
	var count int
	for y0 := 0; y0+win <= h; y0 += step {
		for x0 := 0; x0+win <= w; x0 += step {
			var sa, sb, saa, sbb, sab float64
			for y := y0; y < y0+win; y++ {
				for x := x0; x < x0+win; x++ {
					va, vb := luma(a, x, y), luma(b, x, y)
					sa += va
					sb += vb
					saa += va * va
					sbb += vb * vb
					sab += va * vb
				}
			}
			const n = win * win
			ma, mb := sa/n, sb/n
			va, vb := saa/n-ma*ma, sbb/n-mb*mb
			cov := sab/n - ma*mb
			sum += (2*ma*mb + c1) * (2*cov + c2) / ((ma*ma + mb*mb + c1) * (va + vb + c2))
			count++
		}
	}
	return sum / float64(count)
}
