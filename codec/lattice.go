package codec

import (
	"math"
	"slices"
)

const latticeMaxSide = 1100

// latticeLevel is the pyramid level the lattice search works on.
func latticeLevel(pyr pyramid) int {
	level := 0
	for level+1 < len(pyr) && min(pyr[level].w, pyr[level].h) > latticeMaxSide {
		level++
	}
	return level
}

// latticeCandidates estimates the tile lattice (period and rotation) from the autocorrelation of the whitened
// image (Kutter 1998): a tiled mark makes the autocorrelation peak at the tile period vectors. It returns up to
// maxCandidates maps from waxel coordinates to pixels, strongest first; the dihedral ambiguity is left to the pilot search.
// scan is the index in that list of the scale scan's lattice (or of the candidate it duplicates), -1 if none: the
// one whose period no prior predicted, worth probing at nearby scales (tryScaled).
func latticeCandidates(pyr pyramid, maxCandidates int, expected []float64) (out []affine, scan int) {
	scan = -1
	// Work on the finest pyramid level whose short side is at most latticeMaxSide: coarser levels blur 2-pixel
	// waxels away and lose the lattice on textured photos.
	level := latticeLevel(pyr)
	p := pyr[level]
	if min(p.w, p.h) < 48 {
		return nil, -1
	}

	// Whiten: remove the local mean, equalise the local residual power, clip outliers.
	blur := boxBlur(p, 1)
	res := newPlane(p.w, p.h)
	for i := range res.pix {
		res.pix[i] = p.pix[i] - blur.pix[i]
	}
	sq := newPlane(p.w, p.h)
	for i, v := range res.pix {
		sq.pix[i] = v * v
	}
	ms := boxBlur(sq, 4)

	nw, nh := nextPow2(p.w), nextPow2(p.h)
	buf := make([]float64, nw*nh)
	taper := func(i, n int) float64 {
		edge := float64(n) * 0.06
		d := math.Min(float64(i), float64(n-1-i))
		if d >= edge {
			return 1
		}
		return 0.5 - 0.5*math.Cos(math.Pi*d/edge)
	}
	tx := make([]float32, p.w)
	for x := range tx {
		tx[x] = float32(taper(x, p.w))
	}
	for y := 0; y < p.h; y++ {
		ty := float32(taper(y, p.h))
		rr := res.pix[y*p.w : (y+1)*p.w]
		mr := ms.pix[y*p.w : (y+1)*p.w]
		out := buf[y*nw : y*nw+p.w]
		for x := range out {
			v := rr[x] / float32(math.Sqrt(float64(mr[x]+0.25)))
			v = max(-3, min(3, v))
			out[x] = float64(v * ty * tx[x])
		}
	}
	magnitudeAutocorrelation(buf, nw, nh)
	if step := 8 >> level; step >= 2 && blocky(res, step) {
		// JPEG block edges (staircases in smooth areas) make sharp autocorrelation peaks at every lag that is a
		// multiple of the block size in both directions, and on a strongly compressed image they outnumber the
		// tile lattice. Those lags are replaced by the mean of their four neighbours: the block peaks are one lag
		// wide, the tile peaks are a waxel wide and survive.
		inpaintGridLags(buf, nw, nh, step)
	}
	s := float64(min(p.w, p.h))
	rmin, rmax := 0.2*s, 0.75*s
	score := func(dx, dy int) float64 {
		return buf[mod(dy, nh)*nw+mod(dx, nw)] * overlapWeight(p.w, nw, dx) * overlapWeight(p.h, nh, dy)
	}
	var peaks []peak
	r := int(math.Ceil(rmax))
	// Scores of the half plane dy >= -1 in a table (one extra row and column around the search area) so that the
	// local-maximum test is table lookups: the search covers about a million lags on a 1 MP image.
	cx := make([]float64, 2*r+3)
	for i := range cx {
		cx[i] = overlapWeight(p.w, nw, i-r-1)
	}
	tw := 2*r + 3
	table := make([]float64, tw*(r+3))
	for dy := -1; dy <= r+1; dy++ {
		wy := overlapWeight(p.h, nh, dy)
		row := table[(dy+1)*tw : (dy+2)*tw]
		src := mod(dy, nh) * nw
		for i := range row {
			dx := i - r - 1
			row[i] = buf[src+mod(dx, nw)] * cx[i] * wy
		}
	}
	at := func(dx, dy int) float64 { return table[(dy+1)*tw+dx+r+1] }
	for dy := 0; dy <= r; dy++ {
		for dx := -r; dx <= r; dx++ {
			if dy == 0 && dx <= 0 {
				continue
			}
			d2 := float64(dx*dx + dy*dy)
			if d2 < rmin*rmin || d2 > rmax*rmax || abs(dx) > p.w-16 || dy > p.h-16 {
				continue
			}
			v := at(dx, dy)
			if v > at(dx-1, dy) && v >= at(dx+1, dy) && v > at(dx, dy-1) && v >= at(dx, dy+1) &&
				v > at(dx-1, dy-1) && v >= at(dx+1, dy+1) && v > at(dx+1, dy-1) && v >= at(dx-1, dy+1) {
				peaks = keepTop(peaks, peak{dx, dy, v}, 12)
			}
		}
	}
	slices.SortFunc(peaks, func(a, b peak) int {
		if a.v > b.v {
			return -1
		}
		if a.v < b.v {
			return 1
		}
		return 0
	})
	if len(peaks) > 12 {
		peaks = peaks[:12]
	}
	sub := func(dx, dy int) (float64, float64) {
		c := score(dx, dy)
		return float64(dx) + parabolicPeak(score(dx-1, dy), c, score(dx+1, dy)),
			float64(dy) + parabolicPeak(score(dx, dy-1), c, score(dx, dy+1))
	}
	// latticeSum adds the (interpolated) autocorrelation at every point of the lattice with the given period and
	// rotation inside the search radius: many peaks pin period and angle down far better than two.
	interp := func(x, y float64) float64 {
		x0, y0 := math.Floor(x), math.Floor(y)
		fx, fy := x-x0, y-y0
		ix, iy := int(x0), int(y0)
		return (1-fy)*((1-fx)*at(ix, iy)+fx*at(ix+1, iy)) + fy*((1-fx)*at(ix, iy+1)+fx*at(ix+1, iy+1))
	}
	latticeScore := func(period, theta float64) (float64, int) {
		c, sn := math.Cos(theta), math.Sin(theta)
		kmax := int(rmax/period) + 1
		var sum float64
		n := 0
		for k := -kmax; k <= kmax; k++ {
			for l := -kmax; l <= kmax; l++ {
				x := period * (float64(k)*c - float64(l)*sn)
				y := period * (float64(k)*sn + float64(l)*c)
				if y < 0 || (y == 0 && x <= 0) {
					continue
				}
				if d2 := x*x + y*y; d2 < 0.25*period*period || d2 > rmax*rmax || y > float64(r) {
					continue
				}
				sum += interp(x, y)
				n++
			}
		}
		return sum, n
	}
	latticeSum := func(period, theta float64) float64 {
		sum, _ := latticeScore(period, theta)
		return sum
	}
	// refineLattice searches period (±2%) and rotation (±0.6°) for the largest lattice sum, coarse then fine.
	refineLattice := func(period, theta float64) (float64, float64) {
		best := latticeSum(period, theta)
		bp, bt := period, theta
		for _, st := range [][2]float64{{0.001, 0.0005}, {0.0002, 0.0001}} {
			p0, t0 := bp, bt
			for i := -20; i <= 20; i++ {
				for j := -20; j <= 20; j++ {
					if st[0] < 0.001 && (abs(i) > 5 || abs(j) > 5) {
						continue
					}
					pp, tt := p0*(1+st[0]*float64(i)), t0+st[1]*float64(j)
					if v := latticeSum(pp, tt); v > best {
						best, bp, bt = v, pp, tt
					}
				}
			}
		}
		return bp, reduceQuarter(bt)
	}
	type lattice struct {
		period, theta, v float64
		scan             bool // from the scale scan
	}
	var lats []lattice
	for _, pk := range peaks {
		// The perpendicular period vector should also peak; look for it around rot90.
		ex, ey := -pk.dy, pk.dx
		rad := int(math.Max(2, 0.04*math.Hypot(float64(ex), float64(ey))))
		bx, by, bv := ex, ey, math.Inf(-1)
		for dy := ey - rad; dy <= ey+rad; dy++ {
			for dx := ex - rad; dx <= ex+rad; dx++ {
				if v := score(dx, dy); v > bv {
					bx, by, bv = dx, dy, v
				}
			}
		}
		x1, y1 := sub(pk.dx, pk.dy)
		x2, y2 := sub(bx, by)
		period := (math.Hypot(x1, y1) + math.Hypot(x2, y2)) / 2
		t1 := math.Atan2(y1, x1)
		t2 := math.Atan2(y2, x2) - math.Pi/2
		theta := reduceQuarter(t1 + 0.5*reduceQuarter(t2-t1))
		period, theta = refineLattice(period, theta)
		lats = append(lats, lattice{period: period, theta: theta, v: pk.v + bv})
	}
	// Every lattice vector of the tile peaks, and with a circular (unpadded) transform the long ones are about as
	// strong as the fundamental. So among the lattices within half of the best score, the one with the shortest
	// period comes first; weaker ones follow by score.
	slices.SortFunc(lats, func(a, b lattice) int {
		if a.v > b.v {
			return -1
		}
		if a.v < b.v {
			return 1
		}
		return 0
	})
	if len(lats) > 0 {
		strong := 0
		for strong < len(lats) && lats[strong].v >= 0.5*lats[0].v {
			strong++
		}
		slices.SortStableFunc(lats[:strong], func(a, b lattice) int {
			if a.period < b.period {
				return -1
			}
			if a.period > b.period {
				return 1
			}
			return 0
		})
	}
	// Ring search: for each expected waxel size (the geometries Embed would have used if the image was only
	// rotated, or downscaled and rotated), the best rotation on the circle of that period. A prior on the period
	// finds the lattice where JPEG artefacts or texture push its peaks out of the strongest few.
	half := func(x, y float64) float64 {
		if y < 0 {
			x, y = -x, -y
		}
		return interp(x, y)
	}
	var rings []lattice
	for _, ws := range expected {
		period := ws * tileSide / math.Pow(2, float64(level))
		if period < rmin || period > rmax-2 {
			continue
		}
		bestT, bestV := 0.0, math.Inf(-1)
		for t := -math.Pi / 4; t < math.Pi/4; t += 0.5 / period {
			c, sn := math.Cos(t), math.Sin(t)
			if v := half(period*c, period*sn) + half(-period*sn, period*c); v > bestV {
				bestT, bestV = t, v
			}
		}
		pr, th := refineLattice(period, bestT)
		rings = append(rings, lattice{period: pr, theta: th, v: bestV})
	}
	// Scale scan without rotation: every period from rmin to rmax in steps of 0.05% at rotations within ±0.3°,
	// scored by the lattice sum over its point count's square root (the lattice's own z-score; multiples and
	// fractions of the true period score lower). Periods with fewer than four lattice points in range are left to
	// the peak search: their score is too noisy to compare. It finds images that were rescaled and cropped, whose period
	// no prior predicts and whose peaks are too weak to stand out one by one.
	bestZ, bestP, bestT := math.Inf(-1), 0.0, 0.0
	for period := rmin; period <= rmax-2; period *= 1.0005 {
		for _, t := range [...]float64{0, 0.0026, -0.0026, 0.0052, -0.0052} {
			if sum, n := latticeScore(period, t); n >= 4 {
				if z := sum / math.Sqrt(float64(n)); z > bestZ {
					bestZ, bestP, bestT = z, period, t
				}
			}
		}
	}
	if bestP > 0 {
		pr, th := refineLattice(bestP, bestT)
		rings = append(rings, lattice{period: pr, theta: th, v: bestZ, scan: true})
	}
	lats = append(rings, lats...)
	var kept []lattice
	base := pyr[0]
	for _, l := range lats {
		dup := -1
		for i, k := range kept {
			if math.Abs(l.period-k.period) < 0.02*k.period && math.Abs(reduceQuarter(l.theta-k.theta)) < 0.02 {
				dup = i
			}
		}
		if dup >= 0 {
			if l.scan {
				scan = dup
			}
			continue
		}
		if l.scan {
			scan = len(out)
		}
		kept = append(kept, l)
		ws := l.period * math.Pow(2, float64(level)) / tileSide
		cs, sn := math.Cos(l.theta), math.Sin(l.theta)
		out = append(out, affine{m: [4]float64{ws * cs, -ws * sn, ws * sn, ws * cs},
			tx: float64(base.w) / 2, ty: float64(base.h) / 2})
		if len(out) == maxCandidates {
			break
		}
	}
	return out, scan
}

// reduceQuarter maps an angle to (-π/4, π/4].
func reduceQuarter(t float64) float64 {
	q := math.Pi / 2
	t = math.Mod(t, q)
	if t > q/2 {
		t -= q
	} else if t <= -q/2 {
		t += q
	}
	return t
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}

// overlapWeight is 1/sqrt of the overlap of a side of length n, zero-padded to the transform length nPad, with
// itself cyclically shifted by d: the direct overlap n-|d| plus what wraps around, |d|-(nPad-n). It puts long and
// short lags on the same noise scale (with no padding every lag overlaps fully).
func overlapWeight(n, nPad, d int) float64 {
	d = abs(d)
	ov := max(0, n-d) + max(0, d-(nPad-n))
	if ov <= 0 {
		return 0
	}
	return 1 / math.Sqrt(float64(ov))
}

// blocky reports whether a residual plane shows block-coding artefacts on a grid of the given step: the mean
// absolute difference across grid lines clearly exceeds that between other neighbouring pixels.
func blocky(res plane, step int) bool {
	var edge, inner float64
	var ne, ni int
	for y := 0; y < res.h; y++ {
		row := res.pix[y*res.w : (y+1)*res.w]
		for x := 1; x < res.w; x++ {
			d := math.Abs(float64(row[x] - row[x-1]))
			if x%step == 0 {
				edge += d
				ne++
			} else {
				inner += d
				ni++
			}
		}
	}
	if ne == 0 || ni == 0 {
		return false
	}
	return edge/float64(ne) > 1.1*inner/float64(ni)
}

// inpaintGridLags replaces the cyclic autocorrelation in the 3×3 lags around every multiple of step (both
// coordinates; except around lag 0) by the mean of the ring of 16 lags around them: JPEG's block peaks are about
// a lag wide, so their direct neighbours are raised too and would become local maxima themselves.
func inpaintGridLags(a []float64, w, h, step int) {
	for y := 0; y < h; y += step {
		for x := 0; x < w; x += step {
			if x == 0 && y == 0 {
				continue
			}
			var ring float64
			for d := -2; d <= 2; d++ {
				ring += a[mod(y-2, h)*w+mod(x+d, w)] + a[mod(y+2, h)*w+mod(x+d, w)]
				if d > -2 && d < 2 {
					ring += a[mod(y+d, h)*w+mod(x-2, w)] + a[mod(y+d, h)*w+mod(x+2, w)]
				}
			}
			ring /= 16
			for dy := -1; dy <= 1; dy++ {
				for dx := -1; dx <= 1; dx++ {
					a[mod(y+dy, h)*w+mod(x+dx, w)] = ring
				}
			}
		}
	}
}

type peak struct {
	dx, dy int
	v      float64
}

// keepTop inserts p into list (sorted by decreasing v) and keeps at most n entries.
func keepTop(list []peak, p peak, n int) []peak {
	if len(list) == n && p.v <= list[n-1].v {
		return list
	}
	i := len(list)
	for i > 0 && list[i-1].v < p.v {
		i--
	}
	list = slices.Insert(list, i, p)
	if len(list) > n {
		list = list[:n]
	}
	return list
}
