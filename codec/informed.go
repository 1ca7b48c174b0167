package codec

import (
	"math"
	"slices"
)

// Informed embedding: the detector's correlation for a coded bit is the mark's contribution plus the host
// image's own (accidental) correlation with the bit's chips. Embed measures both with the detector itself, at the
// geometry it embeds with, and gives each bit an amplitude that brings the weakest bits up: bits whose host
// correlation fights the mark get more energy, bits the host already helps get less, at the same total energy.
// Geometric attacks re-randomise the host part, so amplitudes stay within [informedMin, informedMax].
const (
	informedMin = 0.5
	informedMax = 2.0
	// informedMaxPixels bounds the images that get informed embedding: images above 16 MP carry so many tiles
	// that host interference averages out. (It was also a memory bound when the folds needed full-size planes;
	// moving it now would change the marks made on images above it.)
	informedMaxPixels = 16 << 20
)

// bitCorrelations folds a luma plane under the nominal geometry and returns the raw chip correlation per coded bit.
// Only the pyramid level that the fold samples is built (the detector's box pyramid, bit for bit), so an image
// with waxels of 4 pixels or more is never held at full resolution.
func (c *Codec) bitCorrelations(y rowSource) []float64 {
	a := nominalAffine(y.w, y.h)
	level := 0
	if gm, ok := gridMapFor(pyramidDims(y.w, y.h, 16), a); ok {
		level = gm.level
	}
	acc, _ := fold(whiten(sampleGrid(levelPyramid(y, 16, level), a)))
	return c.layout.bitSums(acc)
}

// bitSums returns the raw chip correlation per coded bit of a folded accumulator.
func (l *layout) bitSums(acc []float64) []float64 {
	out := make([]float64, codedBits)
	for i, v := range acc {
		if b := l.bitOf[i]; b >= 0 {
			out[b] += float64(l.chip[i]) * v
		}
	}
	return out
}

// informedAmplitudes returns per-coded-bit amplitudes (mean square 1) for the mark rendered by r at gain.
func (c *Codec) informedAmplitudes(y rowSource, r *renderer, gain float32, coded []uint8) []float32 {
	host := c.bitCorrelations(y)
	row := make([]float32, y.w)
	marked := rowSource{w: y.w, h: y.h, row: func(j int, dst []float32) {
		y.row(j, dst)
		r.row(j, gain, row)
		for i, d := range row {
			dst[i] = max(0, min(255, dst[i]+d))
		}
	}}
	return solveInformed(host, c.bitCorrelations(marked), coded)
}

// solveInformed returns the per-coded-bit amplitudes (mean square 1) from the chip correlations of the host image
// alone and of the host with the mark at unit amplitudes.
func solveInformed(host, withMark []float64, coded []uint8) []float32 {
	// Per bit: signed host help h (positive when the host already pushes toward the bit's value) and the mark's
	// response resp at amplitude 1, floored so that a bit the probe barely saw is not given infinite weight.
	h := make([]float64, codedBits)
	resp := make([]float64, codedBits)
	for b := range h {
		sign := float64(2*int(coded[b]) - 1)
		h[b] = sign * host[b]
		resp[b] = sign * (withMark[b] - host[b])
	}
	sorted := slices.Clone(resp)
	slices.Sort(sorted)
	floor := math.Max(0.5*sorted[len(sorted)/2], 1e-9)
	for b := range resp {
		resp[b] = math.Max(resp[b], floor)
	}
	amps := func(t float64) ([]float32, float64) {
		a := make([]float32, codedBits)
		var ms float64
		for b := range a {
			v := math.Max(informedMin, math.Min(informedMax, (t-h[b])/resp[b]))
			a[b] = float32(v)
			ms += v * v
		}
		return a, ms / codedBits
	}
	// Bisection on the common target margin t so that the amplitudes keep a mean square of 1.
	// At t = lo every amplitude is at informedMin (mean square < 1), at t = hi at informedMax (> 1).
	var lo, hi float64
	for b := range h {
		lo = math.Min(lo, h[b]+informedMin*resp[b])
		hi = math.Max(hi, h[b]+informedMax*resp[b])
	}
	for iter := 0; iter < 60; iter++ {
		mid := (lo + hi) / 2
		if _, ms := amps(mid); ms > 1 {
			hi = mid
		} else {
			lo = mid
		}
	}
	a, _ := amps(lo)
	return a
}
