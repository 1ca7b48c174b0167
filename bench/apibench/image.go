package apibench

import (
	"bytes"
	"fmt"
	"image"
	"image/jpeg"
	"math"
	"math/rand/v2"
)

// DefaultImageSide is the side of the generated test image: 1024x1024, the 1 MP class of the codec targets.
const DefaultImageSide = 1024

// PhotoJPEG returns a deterministic photo-like JPEG (quality 90) of w x h: smooth gradients, a dozen soft
// colour blobs and fine grain. Flat synthetic images would understate the codec's work (its JND mask and
// synchronisation behave differently on texture), and a fixed seed makes runs comparable.
func PhotoJPEG(w, h int, seed uint64) ([]byte, error) {
	if w < 1 || h < 1 {
		return nil, fmt.Errorf("image size %dx%d", w, h)
	}
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	type blob struct{ x, y, inv, cr, cg, cb float64 }
	blobs := make([]blob, 12)
	for i := range blobs {
		rad := (0.04 + 0.2*r.Float64()) * float64(max(w, h))
		blobs[i] = blob{r.Float64() * float64(w), r.Float64() * float64(h), 1 / (rad * rad),
			r.Float64()*140 - 40, r.Float64()*140 - 40, r.Float64()*140 - 40}
	}
	// A blob's exp(-(dx²+dy²)/r²) is exp(-dx²/r²)·exp(-dy²/r²): a table of the first per blob and column and one
	// value of the second per blob and row, instead of an exp per blob and pixel (which was most of this
	// function's CPU). The product differs from the single exp in the last bits at most, which no pixel's
	// rounding to 8 bits has shown (the same JPEG bytes at every size the tests and the commands use).
	ex := make([][]float64, len(blobs))
	for i, b := range blobs {
		ex[i] = make([]float64, w)
		for x := range ex[i] {
			dx := float64(x) - b.x
			ex[i][x] = math.Exp(-dx * dx * b.inv)
		}
	}
	ey := make([]float64, len(blobs))
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		fy := float64(y)
		for i, b := range blobs {
			dy := fy - b.y
			ey[i] = math.Exp(-dy * dy * b.inv)
		}
		row := img.Pix[y*img.Stride:]
		for x := 0; x < w; x++ {
			fx := float64(x)
			v := [3]float64{50 + 90*fx/float64(w), 60 + 70*fy/float64(h), 80 + 40*math.Sin(fx/97+fy/61)}
			for i, b := range blobs {
				f := ex[i][x] * ey[i]
				v[0] += f * b.cr
				v[1] += f * b.cg
				v[2] += f * b.cb
			}
			grain := r.NormFloat64() * 5
			p := row[4*x : 4*x+4]
			p[0], p[1], p[2], p[3] = clamp8(v[0]+grain), clamp8(v[1]+grain), clamp8(v[2]+grain), 255
		}
	}
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, img, &jpeg.Options{Quality: 90}); err != nil {
		return nil, fmt.Errorf("encode test JPEG: %w", err)
	}
	return buf.Bytes(), nil
}

func clamp8(v float64) uint8 {
	switch {
	case v <= 0:
		return 0
	case v >= 255:
		return 255
	}
	return uint8(v + 0.5)
}
