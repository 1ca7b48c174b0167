package codec

import (
	"math"
	"math/bits"
)

// fftPlan is an in-place iterative radix-2 FFT for one power-of-two length. Plans are built per call site and
// never shared through package state.
type fftPlan struct {
	n   int
	rev []int32
	tw  []complex128 // exp(-2πik/n), k < n/2
}

func newFFTPlan(n int) *fftPlan {
	if n < 1 || n&(n-1) != 0 {
		panic("codec: FFT length must be a power of two")
	}
	p := &fftPlan{n: n, rev: make([]int32, n), tw: make([]complex128, n/2)}
	shift := 64 - bits.Len(uint(n-1))
	for i := range p.rev {
		if n > 1 {
			p.rev[i] = int32(bits.Reverse64(uint64(i)) >> uint(shift))
		}
	}
	for k := range p.tw {
		s, c := math.Sincos(-2 * math.Pi * float64(k) / float64(n))
		p.tw[k] = complex(c, s)
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
	for size := 2; size <= n; size <<= 1 {
		half := size >> 1
		step := n / size
		for start := 0; start < n; start += size {
			k := 0
			for j := start; j < start+half; j++ {
				w := p.tw[k]
				if inverse {
					w = complex(real(w), -imag(w))
				}
				t := w * x[j+half]
				x[j+half] = x[j] - t
				x[j] += t
				k += step
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
	col := make([]complex128, h)
	for xi := 0; xi < w; xi++ {
		for y := 0; y < h; y++ {
			col[y] = x[y*w+xi]
		}
		cols.transform(col, inverse)
		for y := 0; y < h; y++ {
			x[y*w+xi] = col[y]
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
