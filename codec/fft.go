package codec

import (
	"math"
	"math/bits"
)

// fftPlan is an in-place iterative radix-2 FFT for one power-of-two length. Plans are built per call site and
// never shared through package state.
type fftPlan struct {
	n     int
	rev   []int32
	tw    []complex128 // exp(-2πik/n), k < n/2
	twInv []complex128 // conjugates, for the inverse
}

func newFFTPlan(n int) *fftPlan {
	if n < 1 || n&(n-1) != 0 {
		panic("codec: FFT length must be a power of two")
	}
	p := &fftPlan{n: n, rev: make([]int32, n), tw: make([]complex128, n/2), twInv: make([]complex128, n/2)}
	shift := 64 - bits.Len(uint(n-1))
	for i := range p.rev {
		if n > 1 {
			p.rev[i] = int32(bits.Reverse64(uint64(i)) >> uint(shift))
		}
	}
	for k := range p.tw {
		s, c := math.Sincos(-2 * math.Pi * float64(k) / float64(n))
		p.tw[k] = complex(c, s)
		p.twInv[k] = complex(c, -s)
	}
	return p
}

// transform runs the FFT in place; inverse runs the unnormalised inverse (the caller divides by n if needed).
func (p *fftPlan) transform(x []complex128, inverse bool) {
	n := p.n
	for i := 0; i < n; i++ {
		if j := int(p.rev[i]); i < j {
			x[i], x[j] = x[j], x[i]
		}
	}
	tw := p.tw
	if inverse {
		tw = p.twInv
	}
	// The first stage has only the trivial twiddle.
	for j := 0; j+1 < n; j += 2 {
		a, b := x[j], x[j+1]
		x[j], x[j+1] = a+b, a-b
	}
	for size := 4; size <= n; size <<= 1 {
		half := size >> 1
		step := n / size
		for start := 0; start < n; start += size {
			lo := x[start : start+half : start+half]
			hi := x[start+half : start+size : start+size]
			for j := range lo {
				t := tw[j*step] * hi[j]
				hi[j] = lo[j] - t
				lo[j] += t
			}
		}
	}
}

// fft2 transforms a w×h row-major complex array in place (w and h powers of two).
func fft2(x []complex128, w, h int, inverse bool) {
	rows := newFFTPlan(w)
	for y := 0; y < h; y++ {
		rows.transform(x[y*w:(y+1)*w], inverse)
	}
	cols := rows
	if h != w {
		cols = newFFTPlan(h)
	}
	// Columns in blocks of 16 so that each pass over the rows touches whole cache lines.
	const block = 16
	cols2 := make([]complex128, block*h)
	for x0 := 0; x0 < w; x0 += block {
		nb := min(block, w-x0)
		for y := 0; y < h; y++ {
			row := x[y*w+x0 : y*w+x0+nb]
			for b, v := range row {
				cols2[b*h+y] = v
			}
		}
		for b := 0; b < nb; b++ {
			cols.transform(cols2[b*h:(b+1)*h], inverse)
		}
		for y := 0; y < h; y++ {
			row := x[y*w+x0 : y*w+x0+nb]
			for b := range row {
				row[b] = cols2[b*h+y]
			}
		}
	}
}

func nextPow2(n int) int {
	p := 1
	for p < n {
		p <<= 1
	}
	return p
}
