package codec

import "math"

// affine maps continuous waxel coordinates c (waxel q has its centre at c = q + 0.5) to pixel coordinates of
// level 0 (pixel centres on integers): p = M·c + t.
type affine struct {
	m      [4]float64 // row-major 2×2
	tx, ty float64
}

func (a affine) apply(cx, cy float64) (float64, float64) {
	return a.m[0]*cx + a.m[1]*cy + a.tx, a.m[2]*cx + a.m[3]*cy + a.ty
}

// waxel returns the waxel size in pixels (square root of the area scale).
func (a affine) waxel() float64 { return math.Sqrt(math.Abs(a.m[0]*a.m[3] - a.m[1]*a.m[2])) }

func (a affine) inverse() (affine, bool) {
	det := a.m[0]*a.m[3] - a.m[1]*a.m[2]
	if !(math.Abs(det) >= 1e-6) || math.IsInf(det, 0) || math.IsNaN(a.tx+a.ty) || math.IsInf(a.tx+a.ty, 0) {
		return affine{}, false
	}
	inv := affine{m: [4]float64{a.m[3] / det, -a.m[1] / det, -a.m[2] / det, a.m[0] / det}}
	inv.tx = -(inv.m[0]*a.tx + inv.m[1]*a.ty)
	inv.ty = -(inv.m[2]*a.tx + inv.m[3]*a.ty)
	return inv, true
}

// mul returns a·[[m0 m1][m2 m3]] applied to c first (p = a.M·(B·c + s) + a.t).
func (a affine) compose(b [4]float64, sx, sy float64) affine {
	out := affine{m: [4]float64{
		a.m[0]*b[0] + a.m[1]*b[2], a.m[0]*b[1] + a.m[1]*b[3],
		a.m[2]*b[0] + a.m[3]*b[2], a.m[2]*b[1] + a.m[3]*b[3],
	}}
	out.tx = a.m[0]*sx + a.m[1]*sy + a.tx
	out.ty = a.m[2]*sx + a.m[3]*sy + a.ty
	return out
}

// nominalAffine is the geometry Embed uses for a w×h image: square waxels of waxelSize(w, h) pixels, tile grid
// anchored at the top-left corner.
func nominalAffine(w, h int) affine {
	return scaledAffine(waxelSize(w, h))
}

// scaledAffine is a grid of square waxels of ws pixels anchored at the top-left corner.
func scaledAffine(ws float64) affine {
	return affine{m: [4]float64{ws, 0, 0, ws}, tx: -0.5, ty: -0.5}
}

// waxelSize is the resolution normalisation: a 1024-pixel short side or smaller gets 2-pixel waxels, larger images
// get proportionally larger ones so that a tile is a quarter of the short side.
func waxelSize(w, h int) float64 { return math.Max(2, float64(min(w, h))/512) }

// waxelGrid is the image sampled at waxel centres: value at waxel (qx0+i, qy0+j) in val[j*w+i].
type waxelGrid struct {
	qx0, qy0 int
	w, h     int
	val      []float32
	ok       []bool
}

// sampleGrid samples the image at every waxel centre that falls inside it, from the pyramid level where a waxel
// spans 2 to 4 pixels (the box pyramid does the low-pass filtering).
func sampleGrid(pyr pyramid, a affine) waxelGrid {
	gm, ok := gridMapFor(pyr.dims(), a)
	if !ok {
		return waxelGrid{}
	}
	g := waxelGrid{qx0: gm.qx0, qy0: gm.qy0, w: gm.w, h: gm.h}
	g.val = make([]float32, g.w*g.h)
	g.ok = make([]bool, g.w*g.h)
	lp, la := pyr[gm.level], gm.la
	for j := 0; j < g.h; j++ {
		x, y := gm.rowStart(j)
		for i := 0; i < g.w; i++ {
			if v, in := lp.at(x, y); in {
				g.val[j*g.w+i] = v
				g.ok[j*g.w+i] = true
			}
			x += la.m[0]
			y += la.m[2]
		}
	}
	return g
}

// gridMap is where sampleGrid samples: the pyramid level, the map from waxel centres to that level's pixel
// coordinates, and the waxel rectangle that covers the image.
type gridMap struct {
	level    int
	la       affine
	qx0, qy0 int
	w, h     int
}

// rowStart returns the level coordinates of the first waxel centre of grid row j; the next waxel of the row is
// (la.m[0], la.m[2]) further (sampleGrid adds it, in that order, which devices must do too).
func (gm gridMap) rowStart(j int) (float64, float64) {
	return gm.la.apply(float64(gm.qx0)+0.5, float64(gm.qy0+j)+0.5)
}

// gridMapFor returns the sampling geometry of a on a pyramid with levels of the given sizes; false when a is
// degenerate (not invertible, or more than 16M waxels).
func gridMapFor(levels [][2]int, a affine) (gridMap, bool) {
	base := levels[0]
	level := 0
	for level+1 < len(levels) && a.waxel()/math.Pow(2, float64(level+1)) >= 2 {
		level++
	}
	scale := math.Pow(2, float64(level))
	inv, okInv := a.inverse()
	if !okInv {
		return gridMap{}, false
	}
	// Bounding box of the image in waxel coordinates.
	minX, minY, maxX, maxY := math.Inf(1), math.Inf(1), math.Inf(-1), math.Inf(-1)
	for _, c := range [4][2]float64{{-0.5, -0.5}, {float64(base[0]) - 0.5, -0.5}, {-0.5, float64(base[1]) - 0.5},
		{float64(base[0]) - 0.5, float64(base[1]) - 0.5}} {
		x, y := inv.apply(c[0], c[1])
		minX, minY, maxX, maxY = math.Min(minX, x), math.Min(minY, y), math.Max(maxX, x), math.Max(maxY, y)
	}
	gm := gridMap{level: level, qx0: int(math.Floor(minX)) - 1, qy0: int(math.Floor(minY)) - 1}
	gm.w = int(math.Ceil(maxX)) + 1 - gm.qx0
	gm.h = int(math.Ceil(maxY)) + 1 - gm.qy0
	// More than 16M waxels (a 48 MP image at 2-pixel waxels needs 12M) means a degenerate hypothesis.
	if gm.w <= 0 || gm.h <= 0 || gm.w*gm.h > 1<<24 {
		return gridMap{}, false
	}
	// Level coordinates: pl = (p + 0.5)/scale - 0.5, applied to the affine map.
	gm.la = affine{m: [4]float64{a.m[0] / scale, a.m[1] / scale, a.m[2] / scale, a.m[3] / scale},
		tx: (a.tx+0.5)/scale - 0.5, ty: (a.ty+0.5)/scale - 0.5}
	return gm, true
}

// whiten turns the sampled grid into a normalised residual: each waxel minus the mean of its 8 neighbours
// (removing the smooth host image and keeping most of the white chip pattern), divided by the local residual RMS
// (so that textured regions do not dominate), clipped to ±3. Waxels without a full neighbourhood become invalid.
func whiten(g waxelGrid) waxelGrid {
	out := waxelGrid{qx0: g.qx0, qy0: g.qy0, w: g.w, h: g.h, val: make([]float32, len(g.val)), ok: make([]bool, len(g.ok))}
	if g.w < 3 || g.h < 3 {
		return out
	}
	res := make([]float32, len(g.val))
	for j := 1; j < g.h-1; j++ {
		for i := 1; i < g.w-1; i++ {
			k := j*g.w + i
			if !(g.ok[k] && g.ok[k-1] && g.ok[k+1] && g.ok[k-g.w] && g.ok[k+g.w] && g.ok[k-g.w-1] && g.ok[k-g.w+1] &&
				g.ok[k+g.w-1] && g.ok[k+g.w+1]) {
				continue
			}
			n := g.val[k-1] + g.val[k+1] + g.val[k-g.w] + g.val[k+g.w] + g.val[k-g.w-1] + g.val[k-g.w+1] +
				g.val[k+g.w-1] + g.val[k+g.w+1]
			res[k] = g.val[k] - n/8
			out.ok[k] = true
		}
	}
	// Local mean square over a 9×9 window of valid residuals.
	const r = 4
	sq := plane{pix: make([]float32, len(res)), w: g.w, h: g.h}
	cnt := plane{pix: make([]float32, len(res)), w: g.w, h: g.h}
	for k, v := range res {
		if out.ok[k] {
			sq.pix[k] = v * v
			cnt.pix[k] = 1
		}
	}
	msq := boxBlur(sq, r)
	mcnt := boxBlur(cnt, r)
	// eps keeps flat areas (no texture, no mark) from being amplified: a residual RMS below ~0.5 luma levels is
	// treated as noise floor.
	const eps = 0.25
	for k, v := range res {
		if !out.ok[k] {
			continue
		}
		ms := msq.pix[k] / max(mcnt.pix[k], 1e-6)
		x := v / float32(math.Sqrt(float64(ms)+eps))
		out.val[k] = max(-3, min(3, x))
	}
	return out
}

// fold sums the whitened grid over all tiles into one tile-sized accumulator indexed by waxel coordinates mod
// tileSide; n counts contributions.
func fold(g waxelGrid) (acc []float64, n []int32) {
	acc = make([]float64, tileWaxels)
	n = make([]int32, tileWaxels)
	for j := 0; j < g.h; j++ {
		ty := mod(g.qy0+j, tileSide) * tileSide
		tx := mod(g.qx0, tileSide)
		for i := 0; i < g.w; i++ {
			k := j*g.w + i
			if g.ok[k] {
				acc[ty+tx] += float64(g.val[k])
				n[ty+tx]++
			}
			tx++
			if tx == tileSide {
				tx = 0
			}
		}
	}
	return acc, n
}

func mod(a, m int) int {
	r := a % m
	if r < 0 {
		r += m
	}
	return r
}
