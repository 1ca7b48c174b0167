// Package codec is Filigrane's watermark core: it turns a JSON payload into a 256-bit watermark id, embeds that
// id invisibly into the luma of an image, and detects it again after the image was re-saved, resized, cropped or
// rotated. It knows nothing of HTTP, actors or credits.
//
// The design, its parameters and the false-positive arithmetic are documented in docs/codec.md. In short: the id
// is framed with a version, a magic word and a CRC-32 (304 bits), coded with a tail-biting K=9 rate-1/3
// convolutional code (912 bits), spread with keyed ±1 chips over a 128×128-waxel tile (12.5% of the waxels carry
// a keyed pilot), and the tile is repeated over the luma of the image, shaped by a JND mask, with per-bit
// amplitudes from informed embedding, and scaled to a PSNR target. The detector recovers the tile lattice (scale,
// rotation) from the autocorrelation of the whitened image, flips and offsets from the pilot, refines the
// geometry per tile, folds all tiles into one, and decodes with a soft-input BCJR decoder, falling back to a
// CRC-aided list Viterbi decoder. Only a word that passes the 48 check bits is reported as watermarked.
package codec

import (
	"errors"
	"fmt"
	"image"
	"math"

	"filigrane/codec/accel"
)

// ID is a 256-bit watermark identifier: the SHA-256 of the RFC 8785 canonical form of the caller's data.
type ID [32]byte

// Strength and PSNR bounds. The strength is perceptual: the mark's amplitude in units of the local visibility
// threshold of the masking model (jnd.go), so the same strength is about equally (in)visible on a sky and on
// grass, and flat regions carry almost nothing. PSNR is only a floor: on very textured images the masking model
// would allow more energy than MinPSNR, and the gain is lowered there.
const (
	DefaultStrength = 1.0
	MinStrength     = 0.25
	MaxStrength     = 4.0
	// DefaultPSNR is the PSNR floor used when EmbedOptions.PSNR is 0.
	DefaultPSNR = 38.0
	MinPSNR     = 38.0
	MaxPSNR     = 48.0
)

// EmbedOptions tune one embedding.
type EmbedOptions struct {
	// Strength is the mark amplitude in units of the visibility threshold; 0 means DefaultStrength. Higher is
	// more robust and more visible (bench/README.md has the trade-off curve).
	Strength float64
	// PSNR is the minimum PSNR in dB of the marked image (a floor on top of the perceptual strength); 0 means
	// DefaultPSNR.
	PSNR float64
	// Uninformed skips informed embedding (per-bit amplitudes fitted to the host image): about 40% faster, for
	// video frames where many marked frames are combined at detection, at the cost of robustness per frame.
	Uninformed bool
	// profile replaces the flat-region profile of still images (tests: marks made the way earlier releases did).
	profile *maskProfile
}

// resolve applies the defaults and validates the options.
func (o EmbedOptions) resolve() (strength, floor float64, err error) {
	strength, floor = o.Strength, o.PSNR
	if strength == 0 {
		strength = DefaultStrength
	}
	if floor == 0 {
		floor = DefaultPSNR
	}
	if math.IsNaN(strength) || strength < MinStrength || strength > MaxStrength {
		return 0, 0, fmt.Errorf("codec: strength %.2f outside %g..%g", strength, MinStrength, MaxStrength)
	}
	if math.IsNaN(floor) || floor < MinPSNR || floor > MaxPSNR {
		return 0, 0, fmt.Errorf("codec: PSNR floor %.2f dB outside %.0f..%.0f", floor, MinPSNR, MaxPSNR)
	}
	return strength, floor, nil
}

// EmbedReport describes what Embed did.
type EmbedReport struct {
	PSNR float64 // measured on the 8-bit RGB result
	// Strength is the strength applied: the requested one, or (approximately) less where the PSNR floor limited it.
	Strength float64
}

// Unit is the detection result of one image, page or frame group.
type Unit struct {
	Index       int     `json:"index"`
	Watermarked bool    `json:"watermarked"`
	Confidence  float64 `json:"confidence"`
	WatermarkID *string `json:"watermark_id"`
	// StartTime and EndTime are a video segment's span in seconds on the video's presentation timeline: the
	// first frame's time and the time where the next segment starts (the last frame's end for the last one).
	// Nil, and absent from JSON, for images and pages.
	StartTime *float64 `json:"start_time,omitempty"`
	EndTime   *float64 `json:"end_time,omitempty"`
}

// Detection is the result of Detect.
type Detection struct {
	Watermarked bool    `json:"watermarked"`
	Confidence  float64 `json:"confidence"`
	WatermarkID *string `json:"watermark_id"`
	Units       []Unit  `json:"units"`
	// Soft holds one log-likelihood ratio per payload bit (positive: bit 1); nil when no frame was synchronised.
	Soft []float64 `json:"-"`
	// coded holds the coded-bit LLRs behind Soft, which let Snap score whole codewords (in-process only).
	coded []float64
}

// Codec embeds and detects with one deployment secret. It is immutable after New and safe for concurrent use.
type Codec struct {
	key       []byte
	layout    *layout
	pilotFFT  []complex128
	pilotPlan *accel.PilotPlan // the pilot search's tables for devices (DetectOn)
}

// New returns a codec keyed by the deployment secret (at least 16 bytes).
func New(key []byte) (*Codec, error) {
	if len(key) < 16 {
		return nil, errors.New("codec: key shorter than 16 bytes")
	}
	c := &Codec{key: append([]byte(nil), key...)}
	c.layout = newLayout(c.key)
	c.pilotFFT = c.layout.pilotSpectrum()
	c.pilotPlan = c.layout.newPilotPlan()
	return c, nil
}

// Embed returns a marked copy of img with the same bounds; alpha is kept untouched. The result is *image.NRGBA,
// or *image.NRGBA64 when the input has more than 8 bits per channel. The mark changes luma only (the same amount
// is added to R, G and B). It fails for a strength or PSNR floor outside their bounds and, with ErrTooSmall, for images
// whose short side is below MinEmbedSide pixels.
func (c *Codec) Embed(img image.Image, id ID, opt EmbedOptions) (image.Image, EmbedReport, error) {
	if img == nil {
		return nil, EmbedReport{}, errors.New("codec: nil image")
	}
	pr := profileImage
	if opt.profile != nil {
		pr = *opt.profile
	}
	r, gain, err := c.prepareEmbed(imageRows(img), id, opt, pr)
	if err != nil {
		return nil, EmbedReport{}, err
	}
	_, floor, _ := opt.resolve()
	var apply func(g float32) float64
	var out image.Image
	if isDeep(img) {
		src := toNRGBA64(img)
		dst := image.NewNRGBA64(src.Rect)
		copy(dst.Pix, src.Pix)
		apply = func(g float32) float64 { return applyDelta16(dst, src, r, g) }
		out = dst
	} else {
		src, ok := img.(*image.NRGBA)
		if !ok {
			src = toNRGBA(img)
		}
		dst := image.NewNRGBA(src.Rect)
		for y := src.Rect.Min.Y; y < src.Rect.Max.Y; y++ {
			copy(dst.Pix[dst.PixOffset(src.Rect.Min.X, y):dst.PixOffset(src.Rect.Max.X, y)],
				src.Pix[src.PixOffset(src.Rect.Min.X, y):])
		}
		apply = func(g float32) float64 { return applyDelta8(dst, src, r, g) }
		out = dst
	}
	strength, _, _ := opt.resolve()
	psnr, g := correctGain(apply, gain, floor)
	return out, EmbedReport{PSNR: psnr, Strength: strength * float64(g)}, nil
}

// correctGain applies the mark at gain and, while the measured PSNR is below floor (rounding, clipping and the
// cap move the real error away from the estimate), lowers the gain and applies it again (at most 4 passes). It
// returns the measured PSNR and the gain used.
func correctGain(apply func(g float32) float64, gain float32, floor float64) (float64, float32) {
	want := floorMSE(floor)
	psnr := 0.0
	for iter := 0; iter < 4; iter++ {
		mse := apply(gain)
		psnr = psnrFromMSE(mse)
		if psnr >= floor || mse <= 1.0/12 {
			break
		}
		gain *= float32(0.995 * math.Sqrt(want/(mse-1.0/12)))
	}
	return psnr, gain
}

// Detect looks for a mark in img. It is deterministic and never panics on odd input: images too small or too
// flat simply come back unmarked with a nil id.
func (c *Codec) Detect(img image.Image) Detection {
	if img == nil || img.Bounds().Empty() {
		return emptyDetection()
	}
	return c.detectSource(imageRows(img))
}

// DetectLumaRows is Detect for an image whose 8-bit luma plane of w×h samples is given row by row: row(y, luma)
// writes row y into luma (length w). The result is Detect's on an *image.YCbCr or *image.Gray with that Y
// plane, which Detect reads as it is (lumaRow), without the image in memory (package markfile's check of its
// JPEG output decodes the luma only). Rows are asked for in order, some more than once.
func (c *Codec) DetectLumaRows(w, h int, row func(y int, luma []uint8)) Detection {
	if w <= 0 || h <= 0 {
		return emptyDetection()
	}
	buf := make([]uint8, w)
	return c.detectSource(rowSource{w: w, h: h, row: func(y int, out []float32) {
		row(y, buf)
		for x, v := range buf {
			out[x] = float32(v) // lumaRow's YCbCr and Gray cases
		}
	}})
}

func (c *Codec) detectSource(src rowSource) Detection {
	if px := src.w * src.h; px > detectMaxPixels {
		// Very large images are analysed at a reduced resolution. Their waxels span at least 2·f pixels (the
		// waxel grows with the short side), so the mark survives the box averaging.
		f := int(math.Ceil(math.Sqrt(float64(px) / detectMaxPixels)))
		return c.detectPlane(lumaReduced(src, f))
	}
	return c.detectRows(src).detection()
}

// Snap compares the soft decoded word of d against known ids and returns the closest one when it lies within
// the safe distance documented in docs/codec.md: first by correlating the coded-bit LLRs with each known id's
// codeword (when d came from this process's Detect), then by the Hamming distance of the decoded id bits.
func (c *Codec) Snap(d Detection, known []ID) (ID, bool) {
	if id, ok := snapCoded(d.coded, known); ok {
		return id, true
	}
	return snap(d.Soft, known)
}
