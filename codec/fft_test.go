package codec

import (
	"math"
	"math/cmplx"
	"math/rand/v2"
	"testing"
)

func TestFFTMatchesDFT(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{1, 2, 8, 64} {
		x := make([]complex128, n)
		for i := range x {
			x[i] = complex(rng.NormFloat64(), rng.NormFloat64())
		}
		got := append([]complex128(nil), x...)
		newFFTPlan(n).transform(got, false)
		for k := 0; k < n; k++ {
			var want complex128
			for j := 0; j < n; j++ {
				want += x[j] * cmplx.Exp(complex(0, -2*math.Pi*float64(j*k)/float64(n)))
			}
			if cmplx.Abs(want-got[k]) > 1e-9 {
				t.Fatalf("n=%d k=%d: %v want %v", n, k, got[k], want)
			}
		}
		newFFTPlan(n).transform(got, true)
		for i := range got {
			if cmplx.Abs(got[i]/complex(float64(n), 0)-x[i]) > 1e-9 {
				t.Fatalf("inverse mismatch at %d", i)
			}
		}
	}
}

func BenchmarkFFT2D1024(b *testing.B) {
	x := make([]complex128, 1024*1024)
	for i := range x {
		x[i] = complex(float64(i%7), 0)
	}
	for b.Loop() {
		fft2(x, 1024, 1024, false)
	}
}

func TestMagnitudeAutocorrelationMatchesComplex(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	const w, h = 16, 8
	x := make([]float64, w*h)
	ref := make([]complex128, w*h)
	for i := range x {
		x[i] = rng.NormFloat64()
		ref[i] = complex(x[i], 0)
	}
	fft2(ref, w, h, false)
	for i, v := range ref {
		ref[i] = complex(cmplx.Abs(v), 0)
	}
	ref[0] = 0
	fft2(ref, w, h, true)
	magnitudeAutocorrelation(x, w, h)
	for i := range x {
		if math.Abs(x[i]-real(ref[i])) > 1e-9*math.Max(1, math.Abs(real(ref[i]))) {
			t.Fatalf("at %d: %v want %v", i, x[i], real(ref[i]))
		}
	}
}
