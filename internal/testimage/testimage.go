// Package testimage makes the synthetic pictures that tests and benchmarks of several packages share, so that
// figures taken on one (gpu/cudacodec's phase times, codec's host-work benchmarks) are taken on the same pixels.
// It draws images only: no codec, no files, no randomness beyond its seed.
package testimage

import (
	"image"
	"math/rand/v2"
)

// Regions is a photo-like image with the regions the codec treats differently: texture (bilinear value noise
// plus grain), a smooth gradient (sky, the top quarter), a flat block (coarse layer, the left fifth), a
// saturated corner (clamping) and a transparent strip (alpha 0). The same seed gives the same pixels.
func Regions(w, h int, seed uint64) *image.NRGBA {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	const cell = 16
	gw, gh := w/cell+2, h/cell+2
	grid := make([]float64, gw*gh)
	for i := range grid {
		grid[i] = rng.Float64()
	}
	for y := 0; y < h; y++ {
		row := img.Pix[y*img.Stride:]
		for x := 0; x < w; x++ {
			var r, g, b float64
			switch {
			case y < h/4: // sky: a smooth gradient
				r, g, b = 90+60*float64(x)/float64(w), 140+40*float64(y)/float64(h), 220
			case x < w/5: // flat artwork
				r, g, b = 200, 180, 90
			case x > w-w/10 && y > h-h/10: // saturated
				r, g, b = 255, 255, 255
			default: // texture
				fx, fy := float64(x)/cell, float64(y)/cell
				x0, y0 := int(fx), int(fy)
				tx, ty := fx-float64(x0), fy-float64(y0)
				a := grid[y0*gw+x0] + tx*(grid[y0*gw+x0+1]-grid[y0*gw+x0])
				c := grid[(y0+1)*gw+x0] + tx*(grid[(y0+1)*gw+x0+1]-grid[(y0+1)*gw+x0])
				v := a + ty*(c-a)
				n := float64(rng.IntN(24))
				r, g, b = 40+170*v+n, 60+120*v+n, 30+90*(1-v)+n
			}
			i := 4 * x
			row[i], row[i+1], row[i+2], row[i+3] = uint8(min(r, 255)), uint8(min(g, 255)), uint8(min(b, 255)), 255
			if x >= w/2 && x < w/2+8 && y < h/3 {
				row[i+3] = 0
			}
		}
	}
	return img
}
