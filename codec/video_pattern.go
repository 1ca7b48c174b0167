package codec

import (
	"fmt"
	"math"
)

// Video entry points. A video carries the same id in every frame, so the spatial pattern (tile chips spread over
// the waxel grid) is computed once per frame geometry; each frame only costs a perceptual mask at half resolution
// and one multiply-add per pixel. The mask and the gain are smoothed over time so that the mark follows the
// content without flickering.

// videoMaskDecay is the weight of the previous frames' mask in the temporal smoothing (an exponential moving
// average): a scene cut is followed within a few frames, while frame-to-frame noise in the mask is averaged out.
const videoMaskDecay = 0.75

// videoMaskEvery is how often (in frames) the mask is recomputed; in between, frames reuse it. Halves the Go
// stage's cost, and the smoothing above makes the mask change slowly anyway.
const videoMaskEvery = 2

// VideoMarker marks successive frames of one geometry with one id. It holds per-frame state (the smoothed mask)
// and is not safe for concurrent use; one marker serves one video.
type VideoMarker struct {
	w, h   int
	hw, hh int       // mask geometry: ceil(w/2) × ceil(h/2)
	pat    []float32 // unit pattern per pixel (w×h), values in [-1, 1]
	pat2   []float32 // sum of pat² over each 2×2 block (hw×hh), for the gain
	mask   []float32 // smoothed JND per 2×2 block, in 8-bit luma units
	half   plane     // scratch: the frame reduced 2×2
	gm     []float32 // scratch: gain × mask of the current frame
	jnd    []float32 // scratch: the perceptual mask of the current reduced frame
	frame  int       // frames marked so far
	gain   float32   // smoothed gain; 0 before the first frame
	target float64   // mark MSE per pixel the gain aims at
}

// NewVideoMarker prepares the pattern of id for frames of width×height pixels (odd sizes allowed). The strength
// is opt.PSNR (default DefaultVideoPSNRFor the size) measured on each frame; opt.Uninformed is implied. Frames must pass
// CheckVideoSize.
func (c *Codec) NewVideoMarker(id ID, width, height int, opt EmbedOptions) (*VideoMarker, error) {
	psnr := opt.PSNR
	if psnr == 0 {
		psnr = DefaultVideoPSNRFor(width, height)
	}
	if math.IsNaN(psnr) || psnr < MinPSNR || psnr > MaxPSNR {
		return nil, fmt.Errorf("codec: PSNR target %.2f dB outside %.0f..%.0f", psnr, MinPSNR, MaxPSNR)
	}
	if err := CheckVideoSize(width, height); err != nil {
		return nil, err
	}
	ws := videoWaxel(width, height)
	ones := &mask{bs: maskBlock(ws)}
	ones.w, ones.h = (width+ones.bs-1)/ones.bs, (height+ones.bs-1)/ones.bs
	ones.v = make([]float32, ones.w*ones.h)
	for i := range ones.v {
		ones.v[i] = 1
	}
	r := newRenderer(ones, width, height, ws, c.layout.tilePattern(convEncode(frameBits(id)), nil))
	m := &VideoMarker{w: width, h: height, hw: (width + 1) / 2, hh: (height + 1) / 2,
		pat: make([]float32, width*height)}
	for y := 0; y < height; y++ {
		r.row(y, 1, m.pat[y*width:(y+1)*width])
	}
	m.pat2 = make([]float32, m.hw*m.hh)
	for y := 0; y < height; y++ {
		for x := 0; x < width; x++ {
			v := m.pat[y*width+x]
			m.pat2[(y/2)*m.hw+x/2] += v * v
		}
	}
	m.mask = make([]float32, m.hw*m.hh)
	m.gm = make([]float32, m.hw*m.hh)
	m.jnd = make([]float32, m.hw*m.hh)
	m.half = newPlane(m.hw, m.hh)
	// Rounding to integer code values adds about 1/12 to the error of every sample; leave room for it.
	mse := 255 * 255 / math.Pow(10, (psnr+psnrAim)/10)
	m.target = math.Max(mse-1.0/12, mse*0.5)
	return m, nil
}

// videoWaxel is the waxel size of video frames of w×h pixels: larger than an image's of the same size (lower
// spatial frequencies survive video coding at high CRF and downscaling better; averaging frames at detection
// makes up for the fewer waxels per frame), but small enough that a frame's short side holds most of a tile.
// It is constant over ranges of sizes, so a moderately cropped copy keeps the same grid.
func videoWaxel(w, h int) float64 {
	switch s := min(w, h); {
	case s < 400:
		return 2
	case s < 720:
		return 3
	}
	return 2 * waxelSize(w, h)
}

// DefaultVideoPSNR is the mark's strength per frame when EmbedOptions.PSNR is 0: video coding at the default CRF
// and detection summing many frames were measured at this level (bench/README.md, "Video"); the image codec's
// default is a perceptual strength with a lower PSNR floor, which does not transfer to re-encoded frames.
const DefaultVideoPSNR = 42.0

// SmallVideoPSNR is the default strength of frames whose short side is under one tile of 2-pixel waxels (256
// pixels: 320x240, 352x240, ...). Such a frame holds less than one tile, so each coded bit gets fewer chips, and
// on static content averaging frames does not average the host picture out: at 42 dB a 320x240 clip decoded
// blind in 2 of 22 trials (bench/README.md, "Video"), with coded-bit error rates of 17% on the output itself.
// 3 dB more brings those to 10%.
const SmallVideoPSNR = 39.0

// DefaultVideoPSNRFor is the default strength for frames of width×height: SmallVideoPSNR below a 256-pixel short
// side, else DefaultVideoPSNR.
func DefaultVideoPSNRFor(width, height int) float64 {
	if min(width, height) < VideoTileSide {
		return SmallVideoPSNR
	}
	return DefaultVideoPSNR
}

// VideoTileSide is the side in pixels of one tile of the mark in frames under 400 pixels (128 waxels of 2
// pixels). A frame with a shorter side holds only part of a tile: each coded bit gets fewer chips, and averaging
// frames does not remove static content, so whether the mark reads depends on the content. Video embedding reads
// such a frame's mark back before it answers (codec/video).
const VideoTileSide = 2 * tileSide

// MinVideoTileArea is the least part of one tile a frame must cover, in pixels: min(width, 256) × min(height,
// 256), the same for both orientations; half a tile. Below it the mark of real footage (testsrc2, vtest.avi,
// tree.avi) read back from the embed's own output in 5 of 34 clips measured (docs/video.md, "Minimum frame
// size").
const MinVideoTileArea = VideoTileSide * VideoTileSide / 2

// CheckVideoSize returns nil when frames of width×height pixels can carry a video mark, else an error wrapping
// ErrTooSmall that names the size and VideoSizeRule.
func CheckVideoSize(width, height int) error {
	if min(width, VideoTileSide)*min(height, VideoTileSide) < MinVideoTileArea { // implies a short side of 128 or more
		return fmt.Errorf("%w: video frames of %dx%d: %s", ErrTooSmall, width, height, VideoSizeRule())
	}
	return nil
}

// VideoSizeRule states CheckVideoSize's minimum for a client.
func VideoSizeRule() string {
	return fmt.Sprintf("frames must cover at least half a tile of the mark: min(width, %d) × min(height, %d) of at "+
		"least %d pixels (for example 256x128, 182x182 or 128x256)", VideoTileSide, VideoTileSide, MinVideoTileArea)
}

// Mark8 marks one 8-bit luma plane (for example the Y plane of a yuv420p frame) in place.
func (m *VideoMarker) Mark8(pix []uint8, stride int) error {
	if stride < m.w || len(pix) < (m.h-1)*stride+m.w {
		return fmt.Errorf("codec: video frame buffer too short for %dx%d stride %d", m.w, m.h, stride)
	}
	g := m.gain
	if m.frame%videoMaskEvery == 0 {
		m.reduce(func(y int, out []float32) {
			for x, v := range pix[y*stride : y*stride+m.w] {
				out[x] = float32(v)
			}
		})
		g = m.update()
	}
	m.frame++
	gm := m.scaledMask(g, 1)
	for y := 0; y < m.h; y++ {
		row := pix[y*stride : y*stride+m.w]
		pat := m.pat[y*m.w : (y+1)*m.w]
		grow := gm[(y/2)*m.hw : (y/2+1)*m.hw]
		for x, v := range row {
			f := float32(v) + pat[x]*grow[x>>1] + 0.5
			if f < 0 {
				f = 0
			} else if f > 255 {
				f = 255
			}
			row[x] = uint8(f)
		}
	}
	return nil
}

// Mark16 marks one luma plane of little-endian 16-bit samples holding bits-bit code values (for example the Y
// plane of a yuv420p10le frame, bits = 10) in place; the mark is the 8-bit one scaled to the deeper range.
func (m *VideoMarker) Mark16(pix []byte, strideBytes, bits int) error {
	if bits < 9 || bits > 16 || strideBytes < 2*m.w || len(pix) < (m.h-1)*strideBytes+2*m.w {
		return fmt.Errorf("codec: bad %d-bit video frame buffer for %dx%d stride %d", bits, m.w, m.h, strideBytes)
	}
	scale := float32(int(1) << (bits - 8))
	maxV := float32(int(1)<<bits - 1)
	inv := 1 / scale
	g := m.gain
	if m.frame%videoMaskEvery == 0 {
		m.reduce(func(y int, out []float32) {
			row := pix[y*strideBytes : y*strideBytes+2*m.w]
			for x := range out {
				out[x] = float32(uint16(row[2*x])|uint16(row[2*x+1])<<8) * inv
			}
		})
		g = m.update()
	}
	m.frame++
	gm := m.scaledMask(g, scale)
	for y := 0; y < m.h; y++ {
		row := pix[y*strideBytes : y*strideBytes+2*m.w]
		pat := m.pat[y*m.w : (y+1)*m.w]
		grow := gm[(y/2)*m.hw : (y/2+1)*m.hw]
		for x := 0; x < m.w; x++ {
			v := float32(uint16(row[2*x]) | uint16(row[2*x+1])<<8)
			f := v + pat[x]*grow[x>>1] + 0.5
			if f < 0 {
				f = 0
			} else if f > maxV {
				f = maxV
			}
			o := uint16(f)
			row[2*x], row[2*x+1] = byte(o), byte(o>>8)
		}
	}
	return nil
}

// scaledMask returns gain·mask·scale per 2×2 block. The mark's cap of markCap JNDs per pixel never binds: unit
// pattern values are at most 1 and the gain stays far below markCap in the allowed PSNR range, and is clamped to it.
func (m *VideoMarker) scaledMask(g, scale float32) []float32 {
	g = min(g, markCap)
	for i, v := range m.mask {
		m.gm[i] = g * v * scale
	}
	return m.gm
}

// reduce fills m.half with the 2×2 means of the frame (edge samples repeated for odd sizes); rowAt writes frame
// row y, in 8-bit units, into its argument.
func (m *VideoMarker) reduce(rowAt func(y int, out []float32)) {
	a, b := make([]float32, m.w+1), make([]float32, m.w+1)
	for hy := 0; hy < m.hh; hy++ {
		rowAt(2*hy, a[:m.w])
		rowAt(min(2*hy+1, m.h-1), b[:m.w])
		a[m.w], b[m.w] = a[m.w-1], b[m.w-1] // odd widths: the last column pairs with itself
		out := m.half.pix[hy*m.hw : (hy+1)*m.hw]
		for hx := range out {
			out[hx] = 0.25 * (a[2*hx] + a[2*hx+1] + b[2*hx] + b[2*hx+1])
		}
	}
}

// update folds the JND of the reduced frame into the smoothed mask and returns the frame's gain, itself smoothed.
func (m *VideoMarker) update() float32 {
	// The image codec's perceptual mask of the reduced frame, per pixel of it (blocks of 2 reduced pixels).
	mk := newMask(m.half, 1, DefaultStrength)
	cx0, cx1, cf := mk.columns(m.hw)
	for y := 0; y < m.hh; y++ {
		mk.rowInto(y, cx0, cx1, cf, m.jnd[y*m.hw:(y+1)*m.hw])
	}
	first := m.gain == 0
	var e float64
	for i, v := range m.jnd {
		if first {
			m.mask[i] = v
		} else {
			m.mask[i] = videoMaskDecay*m.mask[i] + (1-videoMaskDecay)*v
		}
		e += float64(m.mask[i]*m.mask[i]) * float64(m.pat2[i])
	}
	e /= float64(m.w * m.h)
	if e <= 0 {
		return m.gain
	}
	g := float32(math.Sqrt(m.target / e))
	if first {
		m.gain = g
	} else {
		m.gain = videoMaskDecay*m.gain + (1-videoMaskDecay)*g
	}
	return m.gain
}

// AnalyzeVideoLuma is AnalyzeLuma for a plane that is the mean of several frames of a marked video (or one frame):
// it tries the waxel grids the marker would have used for this frame size, for twice it and for 1/0.8 of it (a
// copy downscaled by half or cropped), before the image detector's lattice search.
func (c *Codec) AnalyzeVideoLuma(p LumaPlane) FrameSoft {
	if p.check() != nil || min(p.Width, p.Height) < minDetectSide {
		return FrameSoft{}
	}
	y := p.toPlane()
	pyr := buildPyramid(y, 16)
	var best attempt
	// The grids of: this size; a copy downscaled by half; a copy cropped to 80% per side.
	cw, ch := int(float64(p.Width)/0.8), int(float64(p.Height)/0.8)
	for _, ws := range []float64{videoWaxel(p.Width, p.Height), videoWaxel(2*p.Width, 2*p.Height) / 2,
		videoWaxel(cw, ch)} {
		at := c.tryGeometry(cpuSampler{c: c, pyr: pyr}, scaledAffine(ws))
		if at.valid && at.res.ok {
			return FrameSoft{Coded: at.coded, PilotZ: at.pilotZ}
		}
		if at.valid && (!best.valid || at.pilotZ > best.pilotZ) {
			best = at
		}
	}
	if at := c.detectAttempt(y); at.valid && (at.res.ok || !best.valid || at.pilotZ > best.pilotZ) {
		best = at
	}
	if !best.valid {
		return FrameSoft{}
	}
	return FrameSoft{Coded: best.coded, PilotZ: best.pilotZ}
}
