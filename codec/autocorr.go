package codec

import "math"

// magnitudeAutocorrelation replaces the real w×h array x (powers of two, h even) by its generalised cyclic
// autocorrelation: the inverse transform of the magnitude spectrum |X| with the DC term removed. The magnitude
// (rather than the power) spectrum gives sharper peaks for a periodic mark under a broadband host.
//
// Input and output are real, so two rows share one complex row transform on the way in and on the way out, and
// only the w/2+1 non-redundant columns are transformed: half the work of a complex 2-D FFT. The output is scaled
// by w·h (unnormalised inverse), which does not matter for peak finding.
func magnitudeAutocorrelation(x []float64, w, h int) {
	half := w/2 + 1
	spec := make([]complex128, h*half)
	rows := newFFTPlan(w)
	z := make([]complex128, w)
	for r := 0; r < h; r += 2 {
		a, b := x[r*w:(r+1)*w], x[(r+1)*w:(r+2)*w]
		for k := range z {
			z[k] = complex(a[k], b[k])
		}
		rows.transform(z, false)
		sa, sb := spec[r*half:(r+1)*half], spec[(r+1)*half:(r+2)*half]
		for k := 0; k < half; k++ {
			zk := z[k]
			zc := z[(w-k)%w]
			zc = complex(real(zc), -imag(zc))
			sa[k] = (zk + zc) / 2
			d := (zk - zc) / 2
			sb[k] = complex(imag(d), -real(d)) // d / i
		}
	}
	cols := newFFTPlan(h)
	col := make([]complex128, h)
	for k := 0; k < half; k++ {
		for y := 0; y < h; y++ {
			col[y] = spec[y*half+k]
		}
		cols.transform(col, false)
		for y := range col {
			col[y] = complex(math.Hypot(real(col[y]), imag(col[y])), 0)
		}
		if k == 0 {
			col[0] = 0
		}
		cols.transform(col, true)
		for y := 0; y < h; y++ {
			spec[y*half+k] = col[y]
		}
	}
	for r := 0; r < h; r += 2 {
		ga, gb := spec[r*half:(r+1)*half], spec[(r+1)*half:(r+2)*half]
		for k := 0; k < w; k++ {
			var a, b complex128
			if k < half {
				a, b = ga[k], gb[k]
			} else {
				a, b = ga[w-k], gb[w-k]
				a, b = complex(real(a), -imag(a)), complex(real(b), -imag(b))
			}
			z[k] = a + complex(-imag(b), real(b)) // a + i·b
		}
		rows.transform(z, true)
		out0, out1 := x[r*w:(r+1)*w], x[(r+1)*w:(r+2)*w]
		for k, v := range z {
			out0[k] = real(v)
			out1[k] = imag(v)
		}
	}
}
