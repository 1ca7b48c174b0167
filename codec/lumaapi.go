package codec

import (
	"errors"
	"fmt"
)

// LumaPlane is a luma (Y) plane in 8-bit units (0..255) stored as float32, row-major with a stride, for callers
// that already hold planar data: video frames, GPU readbacks. Pix[y*Stride+x] is the sample at (x, y).
type LumaPlane struct {
	Pix           []float32
	Width, Height int
	Stride        int
}

func (p LumaPlane) check() error {
	if p.Width <= 0 || p.Height <= 0 || p.Stride < p.Width {
		return fmt.Errorf("codec: bad luma plane geometry %dx%d stride %d", p.Width, p.Height, p.Stride)
	}
	if len(p.Pix) < (p.Height-1)*p.Stride+p.Width {
		return errors.New("codec: luma plane buffer shorter than its geometry")
	}
	return nil
}

// toPlane copies the plane into the package's compact layout.
func (p LumaPlane) toPlane() plane {
	out := newPlane(p.Width, p.Height)
	for y := 0; y < p.Height; y++ {
		copy(out.pix[y*p.Width:(y+1)*p.Width], p.Pix[y*p.Stride:])
	}
	return out
}

// EmbedLuma adds the mark for id to a luma plane in place, clamping to 0..255. The PSNR floor is checked on the
// plane itself (unrounded). The geometry, masking and gain are exactly those of Embed, so an RGB image built
// from the plane by adding the same change to R, G and B carries the same mark.
func (c *Codec) EmbedLuma(p LumaPlane, id ID, opt EmbedOptions) (EmbedReport, error) {
	if err := p.check(); err != nil {
		return EmbedReport{}, err
	}
	r, gain, err := c.prepareEmbed(planeRows(p.toPlane()), id, opt, profileV1) // video: the detector combines frames at the fine waxel
	if err != nil {
		return EmbedReport{}, err
	}
	orig := p.toPlane() // the source stays intact while the gain is corrected
	row := make([]float32, p.Width)
	apply := func(g float32) float64 {
		var sse float64
		for y := 0; y < p.Height; y++ {
			r.row(y, g, row)
			src := orig.pix[y*p.Width : (y+1)*p.Width]
			dst := p.Pix[y*p.Stride : y*p.Stride+p.Width]
			for x, d := range row {
				v := max(0, min(255, src[x]+d))
				dst[x] = v
				e := float64(v - src[x])
				sse += e * e
			}
		}
		return sse/float64(p.Width*p.Height) + 1.0/12 // as if rounded to 8 bits later
	}
	strength, floor, _ := opt.resolve()
	psnr, g := correctGain(apply, gain, floor)
	return EmbedReport{PSNR: psnr, Strength: strength * float64(g)}, nil
}

// EmbedLuma8 is EmbedLuma for an 8-bit plane (for example the Y plane of a YUV 4:2:0 frame), rounded in place.
func (c *Codec) EmbedLuma8(pix []uint8, width, height, stride int, id ID, opt EmbedOptions) (EmbedReport, error) {
	f := LumaPlane{Pix: make([]float32, width*height), Width: width, Height: height, Stride: width}
	if width <= 0 || height <= 0 || stride < width || len(pix) < (height-1)*stride+width {
		return EmbedReport{}, fmt.Errorf("codec: bad 8-bit luma plane geometry %dx%d stride %d", width, height, stride)
	}
	for y := 0; y < height; y++ {
		for x := 0; x < width; x++ {
			f.Pix[y*width+x] = float32(pix[y*stride+x])
		}
	}
	rep, err := c.EmbedLuma(f, id, opt)
	if err != nil {
		return rep, err
	}
	var sse float64
	for y := 0; y < height; y++ {
		for x := 0; x < width; x++ {
			v := uint8(f.Pix[y*width+x] + 0.5)
			e := float64(v) - float64(pix[y*stride+x])
			sse += e * e
			pix[y*stride+x] = v
		}
	}
	rep.PSNR = psnrFromMSE(sse / float64(width*height))
	return rep, nil
}

// DetectLuma is Detect for a luma plane.
func (c *Codec) DetectLuma(p LumaPlane) Detection {
	if p.check() != nil {
		return emptyDetection()
	}
	return c.detectPlane(p.toPlane())
}

// DetectLuma8 is Detect for an 8-bit luma plane.
func (c *Codec) DetectLuma8(pix []uint8, width, height, stride int) Detection {
	if width <= 0 || height <= 0 || stride < width || len(pix) < (height-1)*stride+width {
		return emptyDetection()
	}
	p := newPlane(width, height)
	for y := 0; y < height; y++ {
		for x := 0; x < width; x++ {
			p.pix[y*width+x] = float32(pix[y*stride+x])
		}
	}
	return c.detectPlane(p)
}

// FrameSoft is the soft output of one frame: the coded-bit log-likelihood ratios under the frame's best
// synchronisation, and its pilot z-score. Summing FrameSoft values of frames that carry the same id
// (maximum-ratio combining) and decoding once recovers marks too weak to read from any single frame.
type FrameSoft struct {
	Coded  []float64 // nil when nothing could be synchronised
	PilotZ float64
}

// AnalyzeLuma returns the soft output of one frame, for CombineFrames.
func (c *Codec) AnalyzeLuma(p LumaPlane) FrameSoft {
	if p.check() != nil {
		return FrameSoft{}
	}
	at := c.detectAttempt(p.toPlane())
	if !at.valid {
		return FrameSoft{}
	}
	return FrameSoft{Coded: append([]float64(nil), at.coded...), PilotZ: at.pilotZ}
}

// CombineFrames sums the coded-bit LLRs of several frames and decodes the sum once; the result describes the
// combined decision as a single unit (callers that report per-frame units run DetectLuma per frame as well).
// Each combined decode is one more decoding attempt in the false-positive budget (docs/codec.md).
func (c *Codec) CombineFrames(frames []FrameSoft) Detection {
	sum := make([]float64, codedBits)
	used := 0
	for _, f := range frames {
		if len(f.Coded) != codedBits {
			continue
		}
		for i, v := range f.Coded {
			sum[i] += v
		}
		used++
	}
	if used == 0 {
		return emptyDetection()
	}
	return attempt{coded: sum, res: decodeSoft(sum), valid: true}.detection()
}
