package codec

import (
	"math"

	"filigrane/codec/accel"
)

// The eight dihedral transforms (rotations by multiples of 90° and their mirror images) as 2×2 matrices acting on
// waxel-centre coordinates. Lattice estimation cannot tell them apart (the tile is square); the pilot can.
var dihedral = [8][4]float64{
	{1, 0, 0, 1}, {0, -1, 1, 0}, {-1, 0, 0, -1}, {0, 1, -1, 0},
	{-1, 0, 0, 1}, {1, 0, 0, -1}, {0, 1, 1, 0}, {0, -1, -1, 0},
}

// pilotSpectrum returns conj(FFT(pilot tile)), used for cyclic correlation.
func (l *layout) pilotSpectrum() []complex128 {
	x := make([]complex128, tileWaxels)
	for i, v := range l.pilot {
		x[i] = complex(float64(v), 0)
	}
	fft2(x, tileSide, tileSide, false)
	for i, v := range x {
		x[i] = complex(real(v), -imag(v))
	}
	return x
}

// alignment is the best dihedral transform and cyclic shift of a folded accumulator against the pilot.
type alignment struct {
	d      int
	sx, sy float64 // shift in waxels, with sub-waxel refinement
	z      float64
}

// searchDihedral correlates the accumulator, under each dihedral transform, with the pilot at every cyclic shift.
func (c *Codec) searchDihedral(acc []float64) alignment {
	norm, ok := c.pilotNorm(acc)
	if !ok {
		return alignment{}
	}
	var sums [len(dihedral)][]float64
	buf := make([]complex128, tileWaxels)
	for d := range dihedral {
		// accD[u] = acc[D(u)]: dihedralIndex(d) lists D(u) for every u.
		for u, k := range dihedralIndex(d) {
			buf[u] = complex(acc[k], 0)
		}
		fft2(buf, tileSide, tileSide, false)
		for i := range buf {
			buf[i] *= c.pilotFFT[i]
		}
		fft2(buf, tileSide, tileSide, true)
		sums[d] = make([]float64, tileWaxels)
		for i := range buf {
			sums[d][i] = real(buf[i]) / tileWaxels
		}
	}
	return pickAlignment(sums, norm)
}

// pilotNorm is the pilot correlation's standard deviation on an accumulator without a mark; false when the
// accumulator is empty.
func (c *Codec) pilotNorm(acc []float64) (float64, bool) {
	var power float64
	for _, v := range acc {
		power += v * v
	}
	power /= float64(len(acc))
	if power <= 0 {
		return 0, false
	}
	return math.Sqrt(float64(c.layout.pilotN) * power), true
}

// dihedralIndex returns, for transform d, the accumulator index D(u) = M·(u+0.5) - 0.5 (mod the tile) of every
// tile waxel u.
func dihedralIndex(d int) []int32 {
	m := dihedral[d]
	idx := make([]int32, tileWaxels)
	for uy := 0; uy < tileSide; uy++ {
		for ux := 0; ux < tileSide; ux++ {
			cx, cy := float64(ux)+0.5, float64(uy)+0.5
			dx := int(math.Round(m[0]*cx + m[1]*cy - 0.5))
			dy := int(math.Round(m[2]*cx + m[3]*cy - 0.5))
			idx[uy*tileSide+ux] = int32(mod(dy, tileSide)*tileSide + mod(dx, tileSide))
		}
	}
	return idx
}

// pickAlignment returns the best transform and shift from the cyclic pilot correlation sums of each transform
// (sums[d][s] = Σ_u pilot[u]·accD[u+s]), divided by norm, with sub-waxel refinement of the peak.
func pickAlignment(sums [len(dihedral)][]float64, norm float64) alignment {
	return alignmentOf(pilotPeaks(sums, tileSide, norm))
}

// pilotPeaks is each dihedral transform's peak of the correlation sums/norm on a tile of the given side (the
// accel.PilotPeak a device's PilotPeaks returns for the same sums).
func pilotPeaks(sums [len(dihedral)][]float64, side int, norm float64) [len(dihedral)]accel.PilotPeak {
	var peaks [len(dihedral)]accel.PilotPeak
	corr := make([]float64, side*side)
	for d := range dihedral {
		for i, v := range sums[d] {
			corr[i] = v / norm
		}
		k := 0
		for i, v := range corr {
			if v > corr[k] {
				k = i
			}
		}
		kx, ky := k%side, k/side
		at := func(x, y int) float64 { return corr[mod(y, side)*side+mod(x, side)] }
		peaks[d] = accel.PilotPeak{Index: k, Z: corr[k], Left: at(kx-1, ky), Right: at(kx+1, ky), Up: at(kx, ky-1),
			Down: at(kx, ky+1)}
	}
	return peaks
}

// alignmentOf is the alignment of the strongest of the transforms' peaks (the first on a tie), its shift refined
// to a sub-waxel one by a parabola through the peak and its neighbours.
func alignmentOf(peaks [len(dihedral)]accel.PilotPeak) alignment {
	best := alignment{z: math.Inf(-1)}
	for d, p := range peaks {
		if p.Z > best.z {
			kx, ky := p.Index%tileSide, p.Index/tileSide
			fx := parabolicPeak(p.Left, p.Z, p.Right)
			fy := parabolicPeak(p.Up, p.Z, p.Down)
			sx, sy := float64(kx)+fx, float64(ky)+fy
			if sx > tileSide/2 {
				sx -= tileSide
			}
			if sy > tileSide/2 {
				sy -= tileSide
			}
			best = alignment{d: d, sx: sx, sy: sy, z: p.Z}
		}
	}
	return best
}

// parabolicPeak returns the offset in (-0.5, 0.5) of the vertex of the parabola through three samples.
func parabolicPeak(l, c, r float64) float64 {
	den := l - 2*c + r
	if den >= 0 {
		return 0
	}
	return math.Max(-0.5, math.Min(0.5, 0.5*(l-r)/den))
}

// aligned returns the affine map of canonical waxel coordinates given the map a0 used for folding and the
// alignment found on its accumulator: canonical centre c sits at grid centre M·(c + s).
func (al alignment) aligned(a0 affine) affine {
	m := dihedral[al.d]
	sx := m[0]*al.sx + m[1]*al.sy
	sy := m[2]*al.sx + m[3]*al.sy
	return a0.compose(m, sx, sy)
}

// refineBlocks is the block grid of refinement over a whitened grid: the tile-sized blocks bx0..bx0+nx-1 by
// by0..by0+ny-1 (in waxels of the tile grid, block b covering waxels b·tileSide to (b+1)·tileSide-1) that the
// grid touches.
type refineBlocks struct{ bx0, by0, nx, ny int }

func newRefineBlocks(qx0, qy0, w, h int) refineBlocks {
	b := refineBlocks{bx0: floorDiv(qx0, tileSide), by0: floorDiv(qy0, tileSide)}
	b.nx = floorDiv(qx0+w-1, tileSide) + 1 - b.bx0
	b.ny = floorDiv(qy0+h-1, tileSide) + 1 - b.by0
	return b
}

// blockScores is refineOn's measurement, the part a device may compute (accel.BlockScorer): for each block of
// newRefineBlocks in row-major order, 2+(2r+1)² values: the power Σ float64(v·v) and the count n of the valid
// waxels at least radius from the grid's border, then for each offset (dy, dx) in -r..r (dy outer) the pilot
// correlation Σ float64(p·val[k + dy·w + dx]) over those of them under a pilot chip p ≠ 0. Every sum runs over
// the block's waxels in order (rows, then columns), so a device that keeps the order gets the same values.
func (l *layout) blockScores(g waxelGrid, radius int) []float64 {
	b := newRefineBlocks(g.qx0, g.qy0, g.w, g.h)
	side := 2*radius + 1
	stride := 2 + side*side
	out := make([]float64, b.nx*b.ny*stride)
	for iy := range b.ny {
		by := b.by0 + iy
		for ix := range b.nx {
			bx := b.bx0 + ix
			o := out[(iy*b.nx+ix)*stride:][:stride]
			scores := o[2:]
			var power float64
			var n int
			for qy := by * tileSide; qy < (by+1)*tileSide; qy++ {
				j := qy - g.qy0
				if j-radius < 0 || j+radius >= g.h {
					continue
				}
				prow := l.pilot[mod(qy, tileSide)*tileSide:][:tileSide]
				for qx := bx * tileSide; qx < (bx+1)*tileSide; qx++ {
					i := qx - g.qx0
					if i-radius < 0 || i+radius >= g.w {
						continue
					}
					k := j*g.w + i
					if !g.ok[k] {
						continue
					}
					v := g.val[k]
					power += float64(v * v)
					n++
					p := prow[mod(qx, tileSide)]
					if p == 0 {
						continue
					}
					s := 0
					for dy := -radius; dy <= radius; dy++ {
						row := g.val[k+dy*g.w-radius : k+dy*g.w+radius+1]
						for _, w := range row {
							scores[s] += float64(p * w)
							s++
						}
					}
				}
			}
			o[0], o[1] = power, float64(n)
		}
	}
	return out
}

// refineScoresOf is blockScores of g with its blocks, nil scores when g is empty.
func (l *layout) refineScoresOf(g waxelGrid, radius int) (refineBlocks, []float64) {
	if g.w == 0 {
		return refineBlocks{}, nil
	}
	return newRefineBlocks(g.qx0, g.qy0, g.w, g.h), l.blockScores(g, radius)
}

// refineOn measures the residual pilot offset in each tile-sized block of a whitened grid, from the grid's
// blockScores (b its blocks, all nil when the grid is empty), and fits an affine correction to the map a the
// grid was sampled under by weighted least squares, which removes the small scale and rotation errors left by
// lattice estimation. radius is the largest offset searched, in waxels. It also returns the largest correction
// it applied, in waxels.
func (c *Codec) refineOn(b refineBlocks, all []float64, a affine, radius int) (affine, float64) {
	if all == nil {
		return a, 0
	}
	type meas struct{ cx, cy, dx, dy, w float64 }
	var ms []meas
	side := 2*radius + 1
	stride := 2 + side*side
	for iy := range b.ny {
		by := b.by0 + iy
		for ix := range b.nx {
			bx := b.bx0 + ix
			o := all[(iy*b.nx+ix)*stride:][:stride]
			power, n, scores := o[0], int(o[1]), o[2:]
			if n < tileWaxels/4 {
				continue
			}
			norm := math.Sqrt(float64(n) * float64(pilotWaxels) / tileWaxels * power / float64(n))
			kb := 0
			for i, v := range scores {
				if v > scores[kb] {
					kb = i
				}
			}
			z := scores[kb] / norm
			if !(z >= 4) { // also rejects NaN from an all-zero block
				continue
			}
			kx, ky := kb%side, kb/side
			at := func(x, y int) float64 {
				if x < 0 || y < 0 || x >= side || y >= side {
					return scores[kb] // flat edge: no sub-waxel shift toward the border
				}
				return scores[y*side+x]
			}
			fx := parabolicPeak(at(kx-1, ky), scores[kb], at(kx+1, ky))
			fy := parabolicPeak(at(kx, ky-1), scores[kb], at(kx, ky+1))
			ms = append(ms, meas{
				cx: float64(bx*tileSide + tileSide/2), cy: float64(by*tileSide + tileSide/2),
				dx: float64(kx-radius) + fx, dy: float64(ky-radius) + fy, w: z * z,
			})
		}
	}
	if len(ms) == 0 {
		return a, 0
	}
	// Weighted centroid, then an affine fit around it when there are enough spread-out blocks.
	var sw, mx, my, mdx, mdy float64
	for _, m := range ms {
		sw += m.w
		mx += m.w * m.cx
		my += m.w * m.cy
		mdx += m.w * m.dx
		mdy += m.w * m.dy
	}
	mx, my, mdx, mdy = mx/sw, my/sw, mdx/sw, mdy/sw
	var e [4]float64
	if len(ms) >= 3 {
		var sxx, sxy, syy, bxx, bxy, byx, byy float64
		for _, m := range ms {
			x, y := m.cx-mx, m.cy-my
			sxx += m.w * x * x
			sxy += m.w * x * y
			syy += m.w * y * y
			bxx += m.w * x * (m.dx - mdx)
			bxy += m.w * y * (m.dx - mdx)
			byx += m.w * x * (m.dy - mdy)
			byy += m.w * y * (m.dy - mdy)
		}
		det := sxx*syy - sxy*sxy
		if det > 1e-9*(sxx*syy+1) {
			e = [4]float64{
				(bxx*syy - bxy*sxy) / det, (bxy*sxx - bxx*sxy) / det,
				(byx*syy - byy*sxy) / det, (byy*sxx - byx*sxy) / det,
			}
		}
	}
	// d(c) = E·(c - m) + md; new map p = A·(c + d(c)) + t. The largest correction over the measured blocks tells
	// the caller whether another pass is worth it.
	var shift float64
	for _, m := range ms {
		x, y := m.cx-mx, m.cy-my
		shift = math.Max(shift, math.Hypot(e[0]*x+e[1]*y+mdx, e[2]*x+e[3]*y+mdy))
	}
	corr := [4]float64{1 + e[0], e[1], e[2], 1 + e[3]}
	sx := mdx - (e[0]*mx + e[1]*my)
	sy := mdy - (e[2]*mx + e[3]*my)
	return a.compose(corr, sx, sy), shift
}
