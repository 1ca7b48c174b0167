package codec

import "math"

// plane is a float32 image (luma in 0..255 units), row-major with stride equal to width.
type plane struct {
	pix  []float32
	w, h int
}

func newPlane(w, h int) plane { return plane{pix: make([]float32, w*h), w: w, h: h} }

// at returns the bilinear interpolation at continuous pixel coordinates (pixel centres on integers) and whether
// the point lies inside the plane.
func (p plane) at(x, y float64) (float32, bool) {
	if x < 0 || y < 0 || x > float64(p.w-1) || y > float64(p.h-1) {
		return 0, false
	}
	x0, y0 := int(x), int(y)
	fx, fy := float32(x-float64(x0)), float32(y-float64(y0))
	x1, y1 := min(x0+1, p.w-1), min(y0+1, p.h-1)
	r0 := p.pix[y0*p.w:]
	r1 := p.pix[y1*p.w:]
	top := r0[x0] + fx*(r0[x1]-r0[x0])
	bot := r1[x0] + fx*(r1[x1]-r1[x0])
	return top + fy*(bot-top), true
}

// half returns the 2×2 box-averaged plane (dimensions rounded down).
func (p plane) half() plane {
	q := newPlane(p.w/2, p.h/2)
	for y := 0; y < q.h; y++ {
		a := p.pix[2*y*p.w:]
		b := p.pix[(2*y+1)*p.w:]
		row := q.pix[y*q.w : (y+1)*q.w]
		for x := range row {
			row[x] = 0.25 * (a[2*x] + a[2*x+1] + b[2*x] + b[2*x+1])
		}
	}
	return q
}

// pyramid holds 2× box-downsampled copies of a plane; level i has pixels 2^i times larger than level 0.
type pyramid []plane

// dims returns the size of each level.
func (pyr pyramid) dims() [][2]int {
	d := make([][2]int, len(pyr))
	for i, p := range pyr {
		d[i] = [2]int{p.w, p.h}
	}
	return d
}

// pyramidDims returns the level sizes buildPyramid makes for a w×h plane.
func pyramidDims(w, h, minSide int) [][2]int {
	d := [][2]int{{w, h}}
	for min(w, h)/2 >= minSide {
		w, h = w/2, h/2
		d = append(d, [2]int{w, h})
	}
	return d
}

func buildPyramid(p plane, minSide int) pyramid {
	pyr := pyramid{p}
	for {
		last := pyr[len(pyr)-1]
		if min(last.w, last.h)/2 < minSide {
			return pyr
		}
		pyr = append(pyr, last.half())
	}
}

// boxBlur returns the mean over a (2r+1)² window, with the window clipped at the borders. The vertical pass keeps
// running column sums and walks whole rows, which is cache-friendly.
func boxBlur(src plane, r int) plane {
	tmp := newPlane(src.w, src.h)
	prefix := make([]float64, src.w+1)
	for y := 0; y < src.h; y++ {
		boxLine(src.pix[y*src.w:(y+1)*src.w], tmp.pix[y*src.w:(y+1)*src.w], prefix, r)
	}
	out := newPlane(src.w, src.h)
	sum := make([]float32, src.w)
	top, bottom := 0, -1
	for y := 0; y < src.h; y++ {
		for bottom < min(src.h-1, y+r) {
			bottom++
			row := tmp.pix[bottom*src.w : (bottom+1)*src.w]
			for x, v := range row {
				sum[x] += v
			}
		}
		for top < y-r {
			row := tmp.pix[top*src.w : (top+1)*src.w]
			for x, v := range row {
				sum[x] -= v
			}
			top++
		}
		inv := 1 / float32(bottom-top+1)
		dst := out.pix[y*src.w : (y+1)*src.w]
		for x, v := range sum {
			dst[x] = v * inv
		}
	}
	return out
}

// boxLine writes the mean of in over a window of radius r (clipped at the ends) to out, from prefix sums (scratch
// of length len(in)+1); the interior, where the window is complete, multiplies by a constant reciprocal.
func boxLine(in, out []float32, prefix []float64, r int) {
	n := len(in)
	var s float64
	for i, v := range in {
		s += float64(v)
		prefix[i+1] = s
	}
	inv := 1 / float64(2*r+1)
	for i := range out {
		lo, hi := i-r, i+r+1
		if lo >= 0 && hi <= n {
			out[i] = float32((prefix[hi] - prefix[lo]) * inv)
			continue
		}
		lo, hi = max(lo, 0), min(hi, n)
		out[i] = float32((prefix[hi] - prefix[lo]) / float64(hi-lo))
	}
}

func psnrFromMSE(mse float64) float64 {
	if mse <= 0 {
		return math.Inf(1)
	}
	return 10 * math.Log10(255*255/mse)
}
