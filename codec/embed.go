package codec

import (
	"errors"
	"fmt"
	"math"
)

// Minimum image size Embed accepts: a short side of MinEmbedSide pixels holds one full tile (128 waxels of 2
// pixels). Smaller images cannot carry the 912 coded bits with useful redundancy.
const MinEmbedSide = 256

// ErrTooSmall is returned (wrapped) by Embed for images whose short side is below MinEmbedSide.
var ErrTooSmall = errors.New("codec: image too small to carry a watermark")

// psnrAim is how far above the requested PSNR the gain aims, so that the measured PSNR lands at or above the
// target on the first try in most images.
const psnrAim = 0.1

// markCap bounds the luma change at each pixel to this many JNDs, whatever the global gain.
const markCap = 3

// renderer produces the luma delta of one embedding row by row, so that no full-size delta plane is needed.
type renderer struct {
	ws   float64   // waxel size in pixels
	jnd  plane     // per-pixel JND
	tile []float32 // waxel values of one tile (chips × amplitudes)
	xi0  []int32   // per column: tile column of the left waxel (times 1) and its right neighbour
	xi1  []int32
	xf   []float32 // per column: weight of the right waxel
}

func newRenderer(jnd plane, ws float64, tile []float32) *renderer {
	r := &renderer{ws: ws, jnd: jnd, tile: tile, xi0: make([]int32, jnd.w), xi1: make([]int32, jnd.w),
		xf: make([]float32, jnd.w)}
	for x := range r.xi0 {
		u := (float64(x)+0.5)/ws - 0.5
		i0 := math.Floor(u)
		r.xi0[x] = int32(mod(int(i0), tileSide))
		r.xi1[x] = int32(mod(int(i0)+1, tileSide))
		r.xf[x] = float32(u - i0)
	}
	return r
}

// row writes gain·pattern·JND for image row y into out, with the pattern capped at markCap.
func (r *renderer) row(y int, gain float32, out []float32) {
	v := (float64(y)+0.5)/r.ws - 0.5
	j0 := math.Floor(v)
	fy := float32(v - j0)
	t0 := r.tile[mod(int(j0), tileSide)*tileSide:][:tileSide]
	t1 := r.tile[mod(int(j0)+1, tileSide)*tileSide:][:tileSide]
	jrow := r.jnd.pix[y*r.jnd.w : (y+1)*r.jnd.w]
	for x := range out {
		a, b := r.xi0[x], r.xi1[x]
		fx := r.xf[x]
		top := t0[a] + fx*(t0[b]-t0[a])
		bot := t1[a] + fx*(t1[b]-t1[a])
		p := gain * (top + fy*(bot-top))
		p = max(-markCap, min(markCap, p))
		out[x] = p * jrow[x]
	}
}

// energy returns the mean of (pattern·JND)² at unit gain, which sets the gain for a PSNR target. Every fourth row
// is enough for an estimate: Embed measures the real error afterwards and corrects the gain.
func (r *renderer) energy() float64 {
	row := make([]float32, r.jnd.w)
	var sum float64
	rows := 0
	for y := 0; y < r.jnd.h; y += 4 {
		rows++
		r.row(y, 1, row)
		var s float64
		for _, v := range row {
			s += float64(v) * float64(v)
		}
		sum += s
	}
	return sum / float64(r.jnd.w*rows)
}

// prepareEmbed validates the options and computes the JND, the tile pattern (with informed amplitudes unless
// opt.Uninformed) and the gain for one luma plane.
func (c *Codec) prepareEmbed(y plane, id ID, opt EmbedOptions) (*renderer, float32, error) {
	psnr := targetPSNR(opt)
	if math.IsNaN(psnr) || psnr < MinPSNR || psnr > MaxPSNR {
		return nil, 0, fmt.Errorf("codec: PSNR target %.2f dB outside %.0f..%.0f", psnr, MinPSNR, MaxPSNR)
	}
	if min(y.w, y.h) < MinEmbedSide {
		return nil, 0, fmt.Errorf("%w: %dx%d, the short side must be at least %d pixels", ErrTooSmall, y.w, y.h,
			MinEmbedSide)
	}
	coded := convEncode(frameBits(id))
	tile := c.layout.tilePattern(coded, nil)
	r := newRenderer(jndPlane(y), waxelSize(y.w, y.h), tile)
	mse := 255 * 255 / math.Pow(10, (psnr+psnrAim)/10)
	// Rounding to 8 bits adds about 1/12 to the error of every sample; leave room for it.
	target := math.Max(mse-1.0/12, mse*0.5)
	e := r.energy()
	if e <= 0 {
		return nil, 0, errors.New("codec: image cannot carry a mark (zero masking energy)")
	}
	gain := float32(math.Sqrt(target / e))
	if !opt.Uninformed && y.w*y.h <= informedMaxPixels {
		amp := c.informedAmplitudes(y, r, gain, coded)
		r.tile = c.layout.tilePattern(coded, amp)
		if e = r.energy(); e <= 0 {
			return nil, 0, errors.New("codec: image cannot carry a mark (zero masking energy)")
		}
		gain = float32(math.Sqrt(target / e))
	}
	return r, gain, nil
}
