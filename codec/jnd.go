package codec

import "math"

// Perceptual masking: how much luma change each region of an image hides. The eye sees noise on skies, walls,
// gradients and flat artwork at amplitudes far below what it misses in foliage, hair or gravel, and it sees it
// next to a sharp edge between two flat regions as well (an edge masks only itself). So the threshold follows
// local texture, not local contrast:
//
//  1. Activity per block (blocks of about one waxel): the mean Sobel gradient magnitude of its pixels.
//  2. Erosion: the minimum over the 3×3 neighbouring blocks. Texture is dense and survives; an isolated edge or
//     line is thinner than the window and disappears, so flat areas next to edges stay unmarked.
//  3. A 5×5 box blur of the eroded activity, so the amplitude varies slowly (no visible mask contours).
//  4. Amplitude = floor + lum(bg)·strength·maskSlope·activity, capped at strength·maskMax, where lum raises
//     it in dark textured regions (the eye is less sensitive there) and bg is the block's mean luma.
//  5. On truly flat blocks (activity below maskProfile.coarseAct) a coarse layer takes part of the floor's
//     budget (see maskProfile).
//
// The floor does not grow with the strength: it is what flat regions (skies, gradients, flat artwork) may carry
// at any strength, about ±1 level at the pattern's peaks after rounding to 8 bits (the benchmark's flat-region
// RMS target is 0.8 levels). The amplitude is held per block (1/bs² of the pixels: no full-size plane) and
// interpolated bilinearly when the mark is rendered: ΔY = pattern · amplitude. Strength 1 is the default
// operating point chosen on the benchmark's robustness/visibility curve (bench/README.md).
const (
	maskSlope = 0.3  // levels of mark per level/pixel of texture gradient, at strength 1
	maskMax   = 12.0 // levels at strength 1, whatever the texture
)

// maskProfile is how flat regions are marked. The fine layer is the tile at the nominal waxel; the coarse
// layer (see coarseFactor) is the same tile at four times the waxel, only where the image is flat: JPEG quantises a
// ±1-level pattern at the fine waxel's frequencies to nothing on a flat 8×8 block, while the coarse pattern's
// energy sits in the DC and first AC coefficients, which gradients in the host dither through the quantiser.
type maskProfile struct {
	fineFloor   float32 // fine-layer amplitude (luma levels) without texture, where there is no coarse layer
	flatFine    float32 // fine-layer floor where the coarse layer is at full amplitude (perfectly flat)
	coarseFloor float32 // coarse-layer amplitude in perfectly flat regions; 0: no coarse layer
	coarseAct   float32 // activity (levels/pixel) at which the coarse layer has faded out
	// coarseSmooth renders the coarse layer with bilinear interpolation between waxel centres, as releases before
	// the nearest-waxel coarse layer did (kept so that tests can make such marks); see renderer.coarseRowGeom.
	coarseSmooth bool
}

// profileV1 is the profile of the first perceptual codec (fine layer only): kept so that tests can make marks
// the way earlier releases did and check that they are still read.
var profileV1 = maskProfile{fineFloor: 0.6, flatFine: 0.6}

// profileCoarseV1 is the profile of the first codec with a coarse layer (bilinear, 0.3 levels): kept so that tests
// can make its marks and check that they are still read.
var profileCoarseV1 = maskProfile{fineFloor: 0.6, flatFine: 0.5, coarseFloor: 0.3, coarseAct: 0.5, coarseSmooth: true}

// profileImage is the default for still images: the coarse layer is rendered nearest-waxel (each coarse waxel a
// block of constant value) at 0.2 levels instead of profileCoarseV1's bilinear 0.3. Measured on the benchmark's
// art (bench/README.md, issue 11 fifth pass): the same survival of every attack at a slightly lower butteraugli
// distance; 0.15 was less visible still but lost JPEG 50/30 on one more artwork each and most of
// TestScreenshotChainOnFlatArt.
var profileImage = maskProfile{fineFloor: 0.6, flatFine: 0.5, coarseFloor: 0.2, coarseAct: 0.5}

// mask is a per-pixel visibility threshold (luma levels) stored on a grid of bs×bs-pixel blocks.
type mask struct {
	bs      int
	w, h    int // blocks
	v       []float32
	c       []float32 // coarse-layer amplitude per block; nil without a coarse layer
	cRow    []bool    // per block row: some block of it has a coarse amplitude (rows without are skipped)
	cSmooth bool      // the coarse layer is interpolated bilinearly (maskProfile.coarseSmooth)
}

// maskBlock is the block size for an image whose waxel is ws pixels: one block per waxel, at least 2 pixels.
func maskBlock(ws float64) int { return max(2, int(math.Round(ws))) }

// newMask computes the mark amplitude of a luma plane for a mark of waxel ws at a perceptual strength, with the
// flat-region floor of the first codec and no coarse layer (video frames).
func newMask(y plane, ws, strength float64) *mask {
	return newMaskProfile(planeRows(y), ws, strength, profileV1)
}

// newMaskProfile is newMask with the flat-region profile pr.
func newMaskProfile(y rowSource, ws, strength float64, pr maskProfile) *mask {
	m := newMaskGrid(y.w, y.h, ws)
	act, bg := blockStats(y, m)
	m.finish(act, bg, strength, pr)
	return m
}

// newMaskGrid returns an empty mask (its block grid only) for a w×h image with waxels of ws pixels.
func newMaskGrid(w, h int, ws float64) *mask {
	bs := maskBlock(ws)
	return &mask{bs: bs, w: (w + bs - 1) / bs, h: (h + bs - 1) / bs}
}

// blockStats is step 1 of the masking model: per block of m's grid, the mean Sobel gradient magnitude (act) and
// the mean luma (bg). A device that runs this pass must add in the same order (rows, then columns, within a block)
// to give the same values. It reads the rows in order and holds three of them.
func blockStats(y rowSource, m *mask) (act, bg plane) {
	bs := m.bs
	act = newPlane(m.w, m.h)
	bg = newPlane(m.w, m.h)
	cnt := make([]float32, m.w*m.h)
	up, mid, down := make([]float32, y.w), make([]float32, y.w), make([]float32, y.w)
	y.row(0, mid)
	copy(up, mid)
	y.row(min(1, y.h-1), down)
	for row := 0; row < y.h; row++ {
		if row > 0 {
			up, mid, down = mid, down, up
			y.row(min(row+1, y.h-1), down)
		}
		brow := (row / bs) * m.w
		for x := 0; x < y.w; x++ {
			xl, xr := max(x-1, 0), min(x+1, y.w-1)
			gx := (up[xr] - up[xl] + 2*(mid[xr]-mid[xl]) + down[xr] - down[xl]) / 8
			gy := (down[xl] - up[xl] + 2*(down[x]-up[x]) + down[xr] - up[xr]) / 8
			k := brow + x/bs
			act.pix[k] += float32(math.Sqrt(float64(gx*gx + gy*gy)))
			bg.pix[k] += mid[x]
			cnt[k]++
		}
	}
	for k, n := range cnt {
		act.pix[k] /= n
		bg.pix[k] /= n
	}
	return act, bg
}

// finish is steps 2 to 5 of the masking model, on the block statistics of blockStats.
func (m *mask) finish(act, bg plane, strength float64, pr maskProfile) {
	act = boxBlur(erode3(act), 2)
	if pr.coarseFloor > 0 {
		m.c = make([]float32, len(act.pix))
		m.cRow = make([]bool, m.h)
		m.cSmooth = pr.coarseSmooth
	}
	m.v = act.pix
	s := float32(strength)
	for k, a := range act.pix {
		floor := pr.fineFloor
		if m.c != nil {
			// flat is 1 on perfectly flat blocks and 0 from coarseAct on: the coarse layer takes over part of
			// the fine floor there, and leaves textured regions (photo skies have grain) to the fine layer.
			flat := max(0, 1-a/pr.coarseAct)
			m.c[k] = pr.coarseFloor * flat
			if flat > 0 {
				m.cRow[k/m.w] = true
			}
			floor -= (pr.fineFloor - pr.flatFine) * flat
		}
		m.v[k] = min(s*maskMax, floor+luminanceFactor(bg.pix[k])*s*maskSlope*a)
	}
}

// luminanceFactor raises the threshold in dark regions, where the eye needs a larger change to notice it
// (Weber-like behaviour below about 60 levels); mid-tones and highlights keep 1.
func luminanceFactor(bg float32) float32 {
	if bg >= 60 {
		return 1
	}
	d := (60 - bg) / 60
	return 1 + 0.8*d*d
}

// erode3 returns the minimum over each sample's 3×3 neighbourhood (clipped at the borders).
func erode3(p plane) plane {
	tmp := newPlane(p.w, p.h)
	for y := 0; y < p.h; y++ {
		src := p.pix[y*p.w : (y+1)*p.w]
		dst := tmp.pix[y*p.w : (y+1)*p.w]
		for x := range dst {
			v := src[x]
			if x > 0 {
				v = min(v, src[x-1])
			}
			if x+1 < p.w {
				v = min(v, src[x+1])
			}
			dst[x] = v
		}
	}
	out := newPlane(p.w, p.h)
	for y := 0; y < p.h; y++ {
		a := tmp.pix[max(y-1, 0)*p.w:]
		b := tmp.pix[y*p.w:]
		c := tmp.pix[min(y+1, p.h-1)*p.w:]
		dst := out.pix[y*p.w : (y+1)*p.w]
		for x := range dst {
			dst[x] = min(a[x], b[x], c[x])
		}
	}
	return out
}

// rowInto writes the per-pixel threshold of image row y (bilinear between block centres) into out, using the
// per-column block indices and weights cx0, cx1, cf precomputed by columns.
func (m *mask) rowInto(y int, cx0, cx1 []int32, cf, out []float32) {
	m.rowOf(m.v, y, cx0, cx1, cf, out)
}

// coarseRow reports whether image row y has any coarse amplitude (the block rows it interpolates between).
func (m *mask) coarseRow(y int) bool {
	if m.c == nil {
		return false
	}
	j0 := int(math.Floor((float64(y)+0.5)/float64(m.bs) - 0.5))
	return m.cRow[min(max(j0, 0), m.h-1)] || m.cRow[min(max(j0+1, 0), m.h-1)]
}

// rowOf is rowInto for any per-block array of the mask's grid (the fine or the coarse amplitude).
func (m *mask) rowOf(vals []float32, y int, cx0, cx1 []int32, cf, out []float32) {
	o0, o1, fy := m.rowGeom(y)
	r0 := vals[o0:]
	r1 := vals[o1:]
	for x := range out {
		a, b := cx0[x], cx1[x]
		top := r0[a] + cf[x]*(r0[b]-r0[a])
		bot := r1[a] + cf[x]*(r1[b]-r1[a])
		out[x] = top + fy*(bot-top)
	}
}

// rowGeom returns, for image row y, the offsets of the block rows above and below it in the mask's arrays and
// the lower one's weight.
func (m *mask) rowGeom(y int) (o0, o1 int, fy float32) {
	v := (float64(y)+0.5)/float64(m.bs) - 0.5
	j0 := int(math.Floor(v))
	fy = float32(v - float64(j0))
	return min(max(j0, 0), m.h-1) * m.w, min(max(j0+1, 0), m.h-1) * m.w, fy
}

// columns precomputes, for an image width, each column's left and right block and the right block's weight.
func (m *mask) columns(width int) (cx0, cx1 []int32, cf []float32) {
	cx0, cx1, cf = make([]int32, width), make([]int32, width), make([]float32, width)
	for x := range cx0 {
		u := (float64(x)+0.5)/float64(m.bs) - 0.5
		i0 := math.Floor(u)
		cx0[x] = int32(min(max(int(i0), 0), m.w-1))
		cx1[x] = int32(min(max(int(i0)+1, 0), m.w-1))
		cf[x] = float32(u - i0)
	}
	return cx0, cx1, cf
}
