package codec

import "image"

// rowSource is a w×h float32 plane (luma in 0..255 units) that is read one row at a time: the embedder's passes
// read the image's luma in row order, so a source computed on the fly (from the image itself) saves the
// full-size float plane, 4 bytes per pixel. The rows must be the same at every call.
type rowSource struct {
	w, h int
	row  func(j int, out []float32) // writes row j (length w) into out
}

// planeRows reads a plane that is already in memory.
func planeRows(p plane) rowSource {
	return rowSource{w: p.w, h: p.h, row: func(j int, out []float32) { copy(out, p.pix[j*p.w:(j+1)*p.w]) }}
}

// imageRows computes the luma of img row by row, with exactly lumaOf's arithmetic.
func imageRows(img image.Image) rowSource {
	b := img.Bounds()
	return rowSource{w: b.Dx(), h: b.Dy(), row: func(j int, out []float32) { lumaRow(img, b.Min.Y+j, out) }}
}

// materialize returns the whole plane.
func (s rowSource) materialize() plane {
	p := newPlane(s.w, s.h)
	for j := 0; j < s.h; j++ {
		s.row(j, p.pix[j*s.w:(j+1)*s.w])
	}
	return p
}

// halved is the 2×2 box reduction of s, row by row, with exactly plane.half's arithmetic (so a level built
// from it equals the pyramid's level bit for bit).
func (s rowSource) halved() rowSource {
	a, b := make([]float32, s.w), make([]float32, s.w)
	return rowSource{w: s.w / 2, h: s.h / 2, row: func(j int, out []float32) {
		s.row(2*j, a)
		s.row(2*j+1, b)
		for x := range out {
			out[x] = 0.25 * (a[2*x] + a[2*x+1] + b[2*x] + b[2*x+1])
		}
	}}
}

// levelPyramid returns a pyramid of s (minimum side minSide) in which only level holds pixels: the other levels
// have their sizes (for gridMapFor) and no pixels. sampleGrid reads one level, so a fold at a known geometry
// needs no more; the full-resolution plane is not held when level > 0.
func levelPyramid(s rowSource, minSide, level int) pyramid {
	dims := pyramidDims(s.w, s.h, minSide)
	pyr := make(pyramid, len(dims))
	for i, d := range dims {
		pyr[i] = plane{w: d[0], h: d[1]}
	}
	src := s
	for i := 0; i < level; i++ {
		src = src.halved()
	}
	pyr[level] = src.materialize()
	return pyr
}
