// Package markfile turns a decoded picture into a marked output file that is known to carry its mark: it embeds
// with package codec, encodes with package imageio, and runs the detector on what a recipient would decode
// before returning. A file whose mark does not read back is embedded again at a higher perceptual strength
// (within codec.MaxStrength); if it still does not read back, the call fails with ErrNotReadable rather than
// hand out an unmarked file as a success. It owns no I/O beyond the byte buffer it returns and knows nothing of
// jobs, HTTP or storage.
package markfile

import (
	"context"
	"errors"
	"fmt"
	"image"

	"filigrane/codec"
	"filigrane/codec/accel"
	"filigrane/codec/imageio"
)

// ErrNotReadable is returned (wrapped) when no strength within the limits gives a file whose mark reads back.
var ErrNotReadable = errors.New("markfile: the mark does not read back from the encoded file")

// Format is an output file format.
type Format string

// Output formats.
const (
	PNG  Format = "png"  // 8 or 16 bits per channel, alpha, ICC, EXIF and XMP kept
	JPEG Format = "jpeg" // baseline, 4:4:4 chroma, quality JPEGQuality, ICC, EXIF and XMP kept
	WebP Format = "webp" // lossless (VP8L), 8 bits per channel, alpha, ICC, EXIF and XMP kept
)

// Every format keeps the picture's imageio.Metadata: the ICC profile, and the EXIF and XMP that imageio
// normalised for the upright picture (orientation 1, its size, no thumbnail), on the device's PNG path too. The
// mark does not change the picture's size, so that EXIF and XMP are true of the marked output too.

// JPEGQuality is the quality of JPEG output: high enough that the file looks like the PNG, with the mark well
// above what the quantisation removes.
const JPEGQuality = 95

// ParseFormat accepts a format name as given by a user ("" means PNG).
func ParseFormat(s string) (Format, error) {
	switch s {
	case "", "png":
		return PNG, nil
	case "jpeg", "jpg":
		return JPEG, nil
	case "webp":
		return WebP, nil
	}
	return "", fmt.Errorf("markfile: unknown output format %q (supported: png, jpeg, webp)", s)
}

// Ext is the file name extension of the format, without the dot.
func (f Format) Ext() string {
	if f == JPEG {
		return "jpg"
	}
	return string(f)
}

// ErrAlpha is returned for a JPEG output of an image with transparent pixels: JPEG has no alpha channel.
var ErrAlpha = errors.New("markfile: JPEG output cannot keep transparency; use PNG")

// ContentType is the media type of the format.
func (f Format) ContentType() string { return "image/" + string(f) }

// Result is a marked, verified file.
type Result struct {
	Data     []byte
	Format   Format
	Report   codec.EmbedReport
	Attempts int // embeddings made: 1 unless the first did not read back
}

// retryFactors are the strength multipliers tried after the first embedding fails verification.
var retryFactors = []float64{1.6, 2.5}

// Embed marks pic with id, encodes it in format f and verifies the mark on the decoded output.
func Embed(ctx context.Context, c *codec.Codec, pic *imageio.Picture, id codec.ID, f Format, opt codec.EmbedOptions) (Result, error) {
	return EmbedOn(ctx, c, nil, pic, id, f, opt)
}

// EmbedOn is Embed with the codec's passes (the embedding and the read-back check) on dev, or on the CPU when
// dev is nil. A device failure is returned wrapping codec.ErrDevice: the caller may run Embed instead.
func EmbedOn(ctx context.Context, c *codec.Codec, dev accel.Device, pic *imageio.Picture, id codec.ID, f Format, opt codec.EmbedOptions) (Result, error) {
	if f == JPEG && pic.HasAlpha {
		return Result{}, ErrAlpha
	}
	base := opt.Strength
	if base == 0 {
		base = codec.DefaultStrength
	}
	strengths := []float64{base}
	for _, k := range retryFactors {
		if s := base * k; s <= codec.MaxStrength {
			strengths = append(strengths, s)
		} else if strengths[len(strengths)-1] < codec.MaxStrength {
			strengths = append(strengths, codec.MaxStrength)
		}
	}
	for i, s := range strengths {
		if err := ctx.Err(); err != nil {
			return Result{}, err
		}
		opt.Strength = s
		var marked image.Image
		var rep codec.EmbedReport
		var err error
		if dev != nil {
			marked, rep, err = c.EmbedOn(ctx, dev, pic.Image, id, opt)
		} else {
			marked, rep, err = c.Embed(pic.Image, id, opt)
		}
		if err != nil {
			return Result{}, err
		}
		// PNG is checked on the marked image before it is encoded, so that the detector's working set and the
		// encoder's output buffer are not in memory at the same time (peak memory of the whole path).
		var data []byte
		ok := true
		if f == PNG {
			if ok, err = verify(ctx, c, dev, marked, nil, f, id); err != nil {
				return Result{}, err
			}
		}
		if ok {
			if data, err = encode(ctx, dev, marked, pic, f); err != nil {
				return Result{}, err
			}
			if f != PNG {
				if ok, err = verify(ctx, c, dev, nil, data, f, id); err != nil {
					return Result{}, err
				}
			}
		}
		if ok {
			return Result{Data: data, Format: f, Report: rep, Attempts: i + 1}, nil
		}
	}
	return Result{}, fmt.Errorf("%w (tried strengths up to %.2f)", ErrNotReadable, strengths[len(strengths)-1])
}

func encode(ctx context.Context, dev accel.Device, img image.Image, pic *imageio.Picture, f Format) ([]byte, error) {
	var buf chunks
	switch f {
	case PNG:
		done, err := encodePNGOn(ctx, dev, img, pic, &buf)
		if err != nil {
			return nil, err
		}
		if done {
			return buf.bytes(), nil
		}
		if err := imageio.EncodePNG(&buf, img, pic.Metadata); err != nil {
			return nil, err
		}
	case JPEG:
		if err := imageio.EncodeJPEG(&buf, img, JPEGQuality, pic.Metadata); err != nil {
			return nil, err
		}
	case WebP:
		if err := imageio.EncodeWebP(&buf, img, pic.Metadata); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("markfile: unknown output format %q", f)
	}
	return buf.bytes(), nil
}

// encodePNGOn writes img as a PNG with the device's PNG pass into buf, when dev offers it and the image is an
// 8-bit NRGBA one the rows can carry; done is false when it does not (EncodePNG then writes the file). The device
// does the encoder's whole work (the filter pass and the compression: on the host, deflate was most of a GPU
// job's time); the file holds the same pixels, its stream in codec/pardeflate's format (within about 1% of
// EncodePNG's size: bench/README.md).
func encodePNGOn(ctx context.Context, dev accel.Device, img image.Image, pic *imageio.Picture, buf *chunks) (done bool, err error) {
	m, ok := img.(*image.NRGBA)
	pd, deflates := dev.(accel.PNGDeflater)
	if !ok || !deflates || !imageio.PNGRowsFit(pic.ICC) {
		return false, nil
	}
	b := m.Bounds()
	z, alpha, err := pd.DeflatePNG(ctx, accel.Image{Pix: m.Pix[m.PixOffset(b.Min.X, b.Min.Y):], Width: b.Dx(),
		Height: b.Dy(), Stride: m.Stride, Format: accel.NRGBA8})
	if err != nil {
		return true, fmt.Errorf("%w: PNG deflate: %w", codec.ErrDevice, err)
	}
	return true, imageio.EncodePNGZlib(buf, b.Dx(), b.Dy(), alpha, z, pic.Metadata)
}

// chunks collects an encoder's output in blocks of chunkSize and joins them once at the end: a growing
// bytes.Buffer holds up to three times the file while it doubles and keeps up to twice its size afterwards; this
// holds twice the file at the end and exactly the file afterwards (a 12 MP PNG is about 30 MB).
type chunks struct {
	full [][]byte
	cur  []byte
	n    int
}

const chunkSize = 1 << 20

func (c *chunks) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		if len(c.cur) == cap(c.cur) {
			if c.cur != nil {
				c.full = append(c.full, c.cur)
			}
			c.cur = make([]byte, 0, chunkSize)
		}
		k := min(len(p), cap(c.cur)-len(c.cur))
		c.cur = append(c.cur, p[:k]...)
		p = p[k:]
	}
	c.n += n
	return n, nil
}

func (c *chunks) bytes() []byte {
	out := make([]byte, 0, c.n)
	for _, b := range c.full {
		out = append(out, b...)
	}
	return append(out, c.cur...)
}

// verify reports whether the mark of id reads back from the output.
func verify(ctx context.Context, c *codec.Codec, dev accel.Device, marked image.Image, data []byte, f Format, id codec.ID) (bool, error) {
	d, err := readBack(ctx, c, dev, marked, data, f)
	if err != nil {
		return false, err
	}
	return d.Watermarked && d.WatermarkID != nil && *d.WatermarkID == id.String(), nil
}

// readBack runs the detector on the output as the service's detection reads a stored file (package actors:
// imageio.DecodeForAnalysis, codec.DetectRegion, Codec.Detect; the service may then snap a near miss to an
// issued id, which only accepts more). PNG is lossless and written from the marked pixels as they are (8 or 16
// bits per channel), so the marked image itself is what it decodes to and is checked without decoding the file
// again; JPEG (lossy) and WebP (8 bits only) are decoded. A JPEG decodes to YCbCr, of which the detector reads
// the Y plane only, so the check decodes the luma alone, row by row as the detector reads it
// (imageio.DecodeLumaRows, codec.DetectLumaRows): the same result as Detect on the decoded image, without its
// chroma or the image in memory. On a device the detector uploads the decoded image's Y plane whole, so the file
// is decoded once, by DecodeForAnalysis (DecodeLumaRows would first read the entropy-coded data through to check
// it, which for a 12 MP JPEG cost half as much again as the decoding itself: BenchmarkReadBackOnDevice12MP).
func readBack(ctx context.Context, c *codec.Codec, dev accel.Device, marked image.Image, data []byte, f Format) (codec.Detection, error) {
	img := marked
	if f != PNG && dev != nil {
		dimg, _, err := imageio.DecodeForAnalysis(ctx, data, imageio.Limits{})
		if err != nil {
			return codec.Detection{}, fmt.Errorf("markfile: decoding the %s output: %w", f, err)
		}
		img = dimg
	} else if f != PNG {
		rows, dimg, err := imageio.DecodeLumaRows(ctx, data, imageio.Limits{})
		if err != nil {
			return codec.Detection{}, fmt.Errorf("markfile: decoding the %s output: %w", f, err)
		}
		if rows != nil {
			r := codec.DetectRegion(image.Rect(0, 0, rows.Width, rows.Height))
			return c.DetectLumaRows(r.Dx(), r.Dy(), rows.Row), nil
		}
		img = dimg
	}
	if r := codec.DetectRegion(img.Bounds()); r != img.Bounds() {
		if sub, ok := img.(interface {
			SubImage(image.Rectangle) image.Image
		}); ok {
			img = sub.SubImage(r)
		}
	}
	if dev != nil {
		return c.DetectOn(ctx, dev, img)
	}
	return c.Detect(img), nil
}
