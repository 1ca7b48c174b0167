package codec

import (
	"errors"
	"fmt"
	"math"
)

// Minimum image size Embed accepts: a short side of MinEmbedSide pixels holds one full tile (128 waxels of 2
// pixels). Smaller images cannot carry the 912 coded bits with useful redundancy.
const MinEmbedSide = 256

// ErrTooSmall is returned (wrapped) by Embed for images whose short side is below MinEmbedSide, and by
// NewVideoMarker for video frames CheckVideoSize refuses.
var ErrTooSmall = errors.New("codec: image too small to carry a watermark")

// psnrAim is how far above the PSNR floor the gain aims when the floor limits it, so that the measured PSNR
// lands at or above the floor on the first try in most images.
const psnrAim = 0.1

// markCap bounds the luma change at each pixel to this many thresholds, whatever the strength and the informed
// amplitudes.
const markCap = 3

// renderer produces the luma delta of one embedding row by row, so that no full-size delta plane is needed.
type renderer struct {
	ws   float64   // waxel size in pixels
	w, h int       // image size
	mask *mask     // visibility threshold
	tile []float32 // waxel values of one tile (chips × amplitudes)
	xi0  []int32   // per column: tile column of the left waxel and of its right neighbour
	xi1  []int32
	xf   []float32 // per column: weight of the right waxel
	mx0  []int32   // per column: mask block on the left and on the right, and the right one's weight
	mx1  []int32
	mf   []float32
	thr  []float32 // scratch: thresholds of the current row
	// The coarse layer (mask.c != nil): the same tile at coarseFactor times the waxel, without informed
	// amplitudes (they are fitted to the fine layer's geometry; for the coarse one they would only spread the
	// energy unevenly), per column its tile columns and weight, and scratch for its amplitudes.
	ctile    []float32
	cx0, cx1 []int32
	cxf      []float32
	cthr     []float32
}

// coarseFactor is the coarse layer's waxel in fine waxels: at 2-pixel waxels a coarse waxel is an 8×8 JPEG
// block, so most of the coarse pattern's energy lands in the DC and first AC coefficients, which JPEG quantises
// most finely and which gradients in the host dither through the quantiser. Measured on the benchmark's art
// (bench/README.md): 2 survived JPEG 50/30 less often at the same visibility, 3 in between.
const coarseFactor = 4

// tileColumns precomputes, for waxels of ws pixels, each pixel column's tile column on the left and on the right
// of it and the right one's weight (bilinear interpolation between waxel centres).
func tileColumns(w int, ws float64) (i0s, i1s []int32, fs []float32) {
	i0s, i1s, fs = make([]int32, w), make([]int32, w), make([]float32, w)
	for x := range i0s {
		u := (float64(x)+0.5)/ws - 0.5
		i0 := math.Floor(u)
		i0s[x] = int32(mod(int(i0), tileSide))
		i1s[x] = int32(mod(int(i0)+1, tileSide))
		fs[x] = float32(u - i0)
	}
	return i0s, i1s, fs
}

func newRenderer(m *mask, w, h int, ws float64, tile []float32) *renderer {
	r := &renderer{ws: ws, w: w, h: h, mask: m, tile: tile, ctile: tile, thr: make([]float32, w)}
	r.xi0, r.xi1, r.xf = tileColumns(w, ws)
	if m.c != nil {
		r.cx0, r.cx1, r.cxf = tileColumns(w, coarseFactor*ws)
		if !m.cSmooth {
			for x, f := range r.cxf {
				r.cxf[x] = nearest(f)
			}
		}
		r.cthr = make([]float32, w)
	}
	r.mx0, r.mx1, r.mf = m.columns(w)
	return r
}

// row writes gain·pattern·threshold for image row y into out, with gain·pattern capped at markCap. It uses
// scratch space of the renderer: one goroutine at a time.
func (r *renderer) row(y int, gain float32, out []float32) {
	o0, o1, fy := tileRow(y, r.ws)
	t0 := r.tile[o0:][:tileSide]
	t1 := r.tile[o1:][:tileSide]
	r.mask.rowInto(y, r.mx0, r.mx1, r.mf, r.thr)
	for x := range out {
		a, b := r.xi0[x], r.xi1[x]
		fx := r.xf[x]
		top := t0[a] + fx*(t0[b]-t0[a])
		bot := t1[a] + fx*(t1[b]-t1[a])
		p := gain * (top + fy*(bot-top))
		p = max(-markCap, min(markCap, p))
		out[x] = p * r.thr[x]
	}
	if !r.mask.coarseRow(y) {
		return
	}
	o0, o1, fy = r.coarseRowGeom(y)
	t0 = r.ctile[o0:][:tileSide]
	t1 = r.ctile[o1:][:tileSide]
	r.mask.rowOf(r.mask.c, y, r.mx0, r.mx1, r.mf, r.cthr)
	for x := range out {
		c := r.cthr[x]
		if c == 0 {
			continue
		}
		a, b := r.cx0[x], r.cx1[x]
		fx := r.cxf[x]
		top := t0[a] + fx*(t0[b]-t0[a])
		bot := t1[a] + fx*(t1[b]-t1[a])
		p := gain * (top + fy*(bot-top))
		p = max(-markCap, min(markCap, p))
		out[x] += p * c
	}
}

// coarseRowGeom is tileRow for the coarse layer. Unless the mask asks for the older bilinear rendering, the
// weights of the coarse layer's rows (here) and columns (newRenderer) are snapped to 0 or 1, so each pixel takes
// the value of the nearest coarse waxel: the layer is a mosaic of constant blocks of 4 waxels (8 pixels at 2-pixel
// waxels, one JPEG block), which puts more of its energy into the block means that JPEG keeps. At the same
// amplitude it carries 9/4 of the bilinear layer's energy (interpolating independent ±1 waxels gives a mean square
// of 4/9), so profileImage lowers the amplitude from 0.3 to 0.2 levels: about the same energy, which read the same
// images after every attack at a slightly lower butteraugli distance (bench/README.md, issue 11 fifth pass).
// The detector samples waxel centres, where both renderings have the waxel's full value, so it reads either.
// The weights stay in the lerp's arithmetic (a weight of 1 gives t0 + 1·(t1 − t0)) so that the device kernels,
// which receive these weights in the mark plan, compute the same values bit for bit.
func (r *renderer) coarseRowGeom(y int) (o0, o1 int, fy float32) {
	o0, o1, fy = tileRow(y, coarseFactor*r.ws)
	if !r.mask.cSmooth {
		fy = nearest(fy)
	}
	return o0, o1, fy
}

// nearest snaps an interpolation weight to the nearer end: 0 below one half, else 1.
func nearest(f float32) float32 {
	if f < 0.5 {
		return 0
	}
	return 1
}

// tileRow returns, for image row y and waxels of ws pixels, the offsets in the tile of the waxel rows above and
// below the row's centre and the lower one's weight (bilinear interpolation between waxel centres).
func tileRow(y int, ws float64) (o0, o1 int, fy float32) {
	v := (float64(y)+0.5)/ws - 0.5
	j0 := math.Floor(v)
	return mod(int(j0), tileSide) * tileSide, mod(int(j0)+1, tileSide) * tileSide, float32(v - j0)
}

// energy returns the mean of (pattern·threshold)² at unit gain, which predicts the PSNR at a gain. Every fourth row
// is enough for an estimate: Embed measures the real error afterwards and corrects the gain.
func (r *renderer) energy() float64 {
	row := make([]float32, r.w)
	var sum float64
	rows := 0
	for y := 0; y < r.h; y += 4 {
		rows++
		r.row(y, 1, row)
		var s float64
		for _, v := range row {
			s += float64(v) * float64(v)
		}
		sum += s
	}
	return sum / float64(r.w*rows)
}

// prepareEmbed validates the options and computes the mask, the tile pattern (with informed amplitudes unless
// opt.Uninformed) and the gain for one luma plane, read row by row from y: the perceptual strength, lowered only
// if the mark would otherwise fall below the PSNR floor.
func (c *Codec) prepareEmbed(y rowSource, id ID, opt EmbedOptions, pr maskProfile) (*renderer, float32, error) {
	strength, floor, err := opt.resolve()
	if err != nil {
		return nil, 0, err
	}
	if min(y.w, y.h) < MinEmbedSide {
		return nil, 0, fmt.Errorf("%w: %dx%d, the short side must be at least %d pixels", ErrTooSmall, y.w, y.h,
			MinEmbedSide)
	}
	coded := convEncode(frameBits(id))
	tile := c.layout.tilePattern(coded, nil)
	ws := waxelSize(y.w, y.h)
	r := newRenderer(newMaskProfile(y, ws, strength, pr), y.w, y.h, ws, tile)
	limit := floorMSE(floor)
	e := r.energy()
	if e <= 0 {
		return nil, 0, errors.New("codec: image cannot carry a mark (zero masking energy)")
	}
	gain := float32(1)
	if float64(gain)*float64(gain)*e > limit {
		gain = float32(math.Sqrt(limit / e))
	}
	if !opt.Uninformed && y.w*y.h <= informedMaxPixels {
		amp := c.informedAmplitudes(y, r, gain, coded)
		r.tile = c.layout.tilePattern(coded, amp)
		if e = r.energy(); e <= 0 {
			return nil, 0, errors.New("codec: image cannot carry a mark (zero masking energy)")
		}
		if float64(gain)*float64(gain)*e > limit {
			gain = float32(math.Sqrt(limit / e))
		}
	}
	return r, gain, nil
}

// floorMSE is the unrounded mark energy that keeps the measured PSNR at or above floor: psnrAim of margin, and
// room for the rounding to 8 bits (about 1/12 per sample).
func floorMSE(floor float64) float64 {
	mse := 255 * 255 / math.Pow(10, (floor+psnrAim)/10)
	return math.Max(mse-1.0/12, mse*0.5)
}
