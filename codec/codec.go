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
	"image"
	"math"
)

// ID is a 256-bit watermark identifier: the SHA-256 of the RFC 8785 canonical form of the caller's data.
type ID [32]byte

// DefaultPSNR is the embedding strength target in dB; MinPSNR and MaxPSNR bound what callers may ask for.
const (
	DefaultPSNR = 42.0
	MinPSNR     = 38.0
	MaxPSNR     = 48.0
)

// EmbedOptions tune one embedding.
type EmbedOptions struct {
	PSNR float64 // target PSNR in dB; 0 means DefaultPSNR
	// Uninformed skips informed embedding (per-bit amplitudes fitted to the host image): about 40% faster, for
	// video frames where many marked frames are combined at detection, at the cost of robustness per frame.
	Uninformed bool
}

// EmbedReport describes what Embed did.
type EmbedReport struct {
	PSNR float64 // measured on the 8-bit RGB result
}

// Unit is the detection result of one image, page or frame group.
type Unit struct {
	Index       int     `json:"index"`
	Watermarked bool    `json:"watermarked"`
	Confidence  float64 `json:"confidence"`
	WatermarkID *string `json:"watermark_id"`
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
	key      []byte
	layout   *layout
	pilotFFT []complex128
}

// New returns a codec keyed by the deployment secret (at least 16 bytes).
func New(key []byte) (*Codec, error) {
	if len(key) < 16 {
		return nil, errors.New("codec: key shorter than 16 bytes")
	}
	c := &Codec{key: append([]byte(nil), key...)}
	c.layout = newLayout(c.key)
	c.pilotFFT = c.layout.pilotSpectrum()
	return c, nil
}

// Embed returns a marked copy of img with the same bounds; alpha is kept untouched. The result is *image.NRGBA,
// or *image.NRGBA64 when the input has more than 8 bits per channel. The mark changes luma only (the same amount
// is added to R, G and B). It fails for a PSNR target outside MinPSNR..MaxPSNR and, with ErrTooSmall, for images
// whose short side is below MinEmbedSide pixels.
func (c *Codec) Embed(img image.Image, id ID, opt EmbedOptions) (image.Image, EmbedReport, error) {
	if img == nil {
		return nil, EmbedReport{}, errors.New("codec: nil image")
	}
	r, gain, err := c.prepareEmbed(lumaOf(img), id, opt)
	if err != nil {
		return nil, EmbedReport{}, err
	}
	target := targetPSNR(opt)
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
	psnr := correctGain(apply, gain, target)
	return out, EmbedReport{PSNR: psnr}, nil
}

// correctGain applies the mark and corrects the gain until the measured PSNR lies within [target, target+0.4]
// dB: rounding, clipping at black and white, transparent pixels and the JND cap all move the real error away
// from the closed-form estimate.
func correctGain(apply func(g float32) float64, gain float32, target float64) float64 {
	want := 255 * 255 / math.Pow(10, (target+psnrAim)/10)
	psnr := 0.0
	for iter := 0; iter < 4; iter++ {
		mse := apply(gain)
		psnr = psnrFromMSE(mse)
		if psnr >= target && psnr <= target+0.4 {
			break
		}
		if mse <= 1.0/12 {
			break // nothing left to scale: the image takes almost no mark (flat or clipped)
		}
		ratio := math.Sqrt(math.Max(want-1.0/12, want*0.5) / (mse - 1.0/12))
		if psnr < target {
			ratio *= 0.995
		}
		gain *= float32(ratio)
	}
	return psnr
}

// Detect looks for a mark in img. It is deterministic and never panics on odd input: images too small or too
// flat simply come back unmarked with a nil id.
func (c *Codec) Detect(img image.Image) Detection {
	if img == nil || img.Bounds().Empty() {
		return emptyDetection()
	}
	b := img.Bounds()
	if px := b.Dx() * b.Dy(); px > detectMaxPixels {
		// Very large images are analysed at a reduced resolution. Their waxels span at least 2·f pixels (the
		// waxel grows with the short side), so the mark survives the box averaging.
		f := int(math.Ceil(math.Sqrt(float64(px) / detectMaxPixels)))
		return c.detectPlane(lumaReduced(img, f))
	}
	return c.detectPlane(lumaOf(img))
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
