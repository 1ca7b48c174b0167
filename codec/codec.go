// Package codec is Filigrane's watermark core: it turns a JSON payload into a 256-bit watermark id, embeds that
// id invisibly into the luma of an image, and detects it again after the image was re-saved, resized, cropped or
// rotated. It knows nothing of HTTP, actors or credits.
//
// STUB: the public API below is fixed; the implementation is being written (issue 4).
package codec

import (
	"errors"
	"image"
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
}

// Codec embeds and detects with one deployment secret.
type Codec struct{ key []byte }

// New returns a codec keyed by the deployment secret (at least 16 bytes).
func New(key []byte) (*Codec, error) {
	if len(key) < 16 {
		return nil, errors.New("codec: key shorter than 16 bytes")
	}
	return &Codec{key: append([]byte(nil), key...)}, nil
}

// Embed returns a marked copy of img with the same bounds; alpha is kept untouched. The result is *image.NRGBA,
// or *image.NRGBA64 when the input has more than 8 bits per channel.
func (c *Codec) Embed(img image.Image, id ID, opt EmbedOptions) (image.Image, EmbedReport, error) {
	return nil, EmbedReport{}, errors.New("codec: not implemented")
}

// Detect looks for a mark in img.
func (c *Codec) Detect(img image.Image) Detection { return Detection{Units: []Unit{{}}} }

// Snap compares the soft decoded word of d against known ids and returns the closest one when it lies within
// the safe distance documented in docs/codec.md.
func (c *Codec) Snap(d Detection, known []ID) (ID, bool) { return ID{}, false }
