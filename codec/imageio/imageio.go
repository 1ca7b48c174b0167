// Package imageio decodes the image files that Filigrane accepts and encodes the PNG, JPEG or WebP it returns.
//
// Accepted inputs: JPEG (baseline and progressive; CMYK and YCCK are converted to RGB), PNG (8 and 16 bit,
// palette, gray, alpha), GIF (first frame only), BMP, TIFF (first image), WebP (lossy and lossless, still only)
// and binary or ASCII Netpbm (P2, P3, P5, P6). Output: PNG (EncodePNG, EncodePNGRows), JPEG (EncodeJPEG) or
// lossless WebP (EncodeWebP), each with the Metadata a Picture carries (ICC, EXIF, XMP). The common JPEGs
// (baseline, one scan, grey or YCbCr up to 4:2:0) are decoded by this package's own decoder (jpegdec.go),
// straight into the layout the caller wants; every other JPEG, and any file that decoder finds odd, is decoded
// by image/jpeg, so what is accepted and refused is image/jpeg's either way (FuzzFastJPEG checks it).
//
// What survives the trip:
//   - pixels, made upright: the EXIF orientation of a JPEG (APP1 Exif, tag 0x0112), and the Orientation tag of a
//     TIFF, are applied to the pixels, so that the output needs no orientation and every viewer shows it the
//     same way. (The orientation in PNG eXIf or WebP EXIF chunks is not applied: viewers disagree about
//     honouring it; the output says 1, "as stored", which they all agree on.)
//   - the alpha channel, and 16 bits per channel when the input had more than 8;
//   - the ICC profile (JPEG APP2, PNG iCCP, WebP ICCP), written back as a PNG iCCP chunk, JPEG APP2 or WebP
//     ICCP. A CMYK profile is dropped when CMYK pixels are converted to RGB, since it no longer describes them.
//   - the EXIF (the first JPEG APP1 Exif, PNG eXIf before the image data, WebP EXIF; not a TIFF's own tags),
//     with its camera, date, copyright and GPS fields, written back as a JPEG APP1, PNG eXIf or WebP EXIF
//     chunk. It is patched in place, never re-serialised (MakerNotes hold absolute offsets): orientation 1,
//     the upright size, and the thumbnail unlinked and zeroed, since it is an unmarked copy of the picture.
//     EXIF that is malformed or over MaxEXIFBytes (what one JPEG APP1 segment holds) is dropped; see exif.go.
//   - the XMP packet (the first JPEG APP1 XMP segment, not extended XMP; a PNG iTXt "XML:com.adobe.xmp" chunk,
//     compressed or not, before or after the image data; WebP "XMP "; not from TIFF), with its rights, creator,
//     captions, keywords and editing settings, written back as a JPEG APP1 after the Exif one, an uncompressed
//     PNG iTXt chunk before the image data, or a WebP "XMP " chunk. It is edited by byte ranges, never
//     re-serialised: xmp:Thumbnails and the xmpGImg namespace (base64 JPEG thumbnails) and
//     xmpNote:HasExtendedXMP removed, tiff:Orientation 1, the tiff and exif pixel dimensions the upright size.
//     XMP that is not well-formed, carries a DOCTYPE, or is over MaxXMPBytes is dropped; see xmp.go.
//
// Animated GIFs: only the first frame is decoded (and later marked); the output is a still PNG.
// Picture.Frames reports how many frames the input had so callers can warn about it.
//
// Decompression bombs and costly structure: the size of the file and the pixel count from the header are checked
// against Limits, and the file's structure against the structure limits (JPEG scans, PNG chunks, TIFF IFDs, GIF
// frames; see MaxJPEGScans), before any pixel buffer is allocated. EstimateCost tells from a file's first bytes
// how much memory decoding it takes, so that callers can budget memory before reading the whole file.
package imageio

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"io"
)

// Errors returned by Decode, always wrapped with detail; test with errors.Is. The HTTP layer maps the first two
// to 422 and the last two to 413; ErrTooComplex (structure.go) to 422.
var (
	// ErrUnsupportedFormat: the bytes are not an image format we read, or use a feature we do not support
	// (animated WebP, 1-bit Netpbm, exotic TIFF compression...).
	ErrUnsupportedFormat = errors.New("unsupported image format")
	// ErrCorrupt: the format was recognised but the file is truncated or malformed.
	ErrCorrupt = errors.New("corrupt image")
	// ErrTooManyPixels: the header announces more pixels than Limits.MaxPixels.
	ErrTooManyPixels = errors.New("image has too many pixels")
	// ErrTooLarge: the file has more bytes than Limits.MaxBytes.
	ErrTooLarge = errors.New("image file too large")
)

// Default limits, used for zero fields of Limits. DefaultMaxPixels is the service's limit for direct requests.
const (
	DefaultMaxPixels int64 = 40_000_000
	DefaultMaxBytes  int64 = 256 << 20
)

// maxICCBytes bounds a decompressed ICC profile; real profiles are a few kB to a few hundred kB.
const maxICCBytes = 4 << 20

// Limits bound what Decode accepts. A zero field takes its default.
type Limits struct {
	MaxPixels int64 // width*height of the (first) image
	MaxBytes  int64 // size of the encoded file
}

func (l Limits) withDefaults() Limits {
	if l.MaxPixels <= 0 {
		l.MaxPixels = DefaultMaxPixels
	}
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	return l
}

// Picture is a decoded image ready for the codec.
type Picture struct {
	// Image is upright (orientation applied) with bounds starting at (0,0). It is *image.NRGBA for inputs
	// with 8 bits per channel or fewer and *image.NRGBA64 for deeper ones.
	Image image.Image
	// Format is the input format: "jpeg", "png", "gif", "bmp", "tiff", "webp" or "pnm".
	Format string
	// Metadata is what an output of Image keeps from the input: the ICC profile, nil when there was none (or
	// it was dropped, see the package doc), and the EXIF normalised for Image (orientation 1, Image's size, no
	// thumbnail; see exif.go), nil when there was none or it was dropped, and the XMP packet normalised the same
	// way (see xmp.go). Pass it to the encoders.
	Metadata
	// Width and Height are those of Image, i.e. after orientation.
	Width, Height int
	// HasAlpha is true when at least one pixel is not fully opaque.
	HasAlpha bool
	// Depth is the bits per channel of Image: 8 or 16.
	Depth int
	// Frames is the number of frames of the input: more than 1 only for animated GIFs, of which only the
	// first frame was decoded.
	Frames int
	// Orientation is the EXIF orientation (1-8) that was applied to the pixels; 1 when there was none.
	Orientation int
}

// Metadata is what the encoders write besides the pixels. The zero value writes none.
type Metadata struct {
	// ICC is an ICC profile. An encoder leaves out a profile whose colour space does not fit what it writes
	// (see EncodePNG).
	ICC []byte
	// EXIF is a TIFF structure (without the "Exif\0\0" header of a JPEG APP1 segment) of at most MaxEXIFBytes,
	// written as it is: Picture.EXIF, normalised when the input was decoded, is what callers pass.
	EXIF []byte
	// XMP is an XMP packet (UTF-8 RDF/XML, without the header of a JPEG APP1 segment) of at most MaxXMPBytes,
	// written as it is: Picture.XMP, normalised when the input was decoded, is what callers pass.
	XMP []byte
}

// format describes one input format.
type format struct {
	name   string
	config func(data []byte) (image.Config, error)
	decode func(data []byte) (image.Image, error)
	// decodeReader, when set, is the same decoder reading from r, which lets a context stop it mid-file.
	decodeReader func(r io.Reader) (image.Image, error)
}

// Decode reads one image file and returns it upright, converted to NRGBA or NRGBA64. It refuses files larger than
// lim.MaxBytes and images with more than lim.MaxPixels pixels before decoding their pixels.
func Decode(r io.Reader, lim Limits) (*Picture, error) {
	lim = lim.withDefaults()
	data, err := io.ReadAll(io.LimitReader(r, lim.MaxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("imageio: reading input: %w", err)
	}
	if int64(len(data)) > lim.MaxBytes {
		return nil, fmt.Errorf("imageio: file is larger than %d bytes: %w", lim.MaxBytes, ErrTooLarge)
	}
	return DecodeBytes(data, lim)
}

// DecodeBytes is Decode for a file already in memory; lim.MaxBytes is checked against len(data).
func DecodeBytes(data []byte, lim Limits) (*Picture, error) {
	return DecodeBytesContext(context.Background(), data, lim)
}

// DecodeBytesContext is DecodeBytes that stops, with ctx's error, when ctx is done while the decoder reads.
func DecodeBytesContext(ctx context.Context, data []byte, lim Limits) (*Picture, error) {
	lim = lim.withDefaults()
	f, cfg, err := checkAll(data, lim)
	if err != nil {
		return nil, err
	}
	meta, err := readMeta(f.name, data)
	if err != nil {
		return nil, err
	}
	img, err := f.decodeAs(ctx, data, jpegNRGBA, nil)
	if err != nil {
		return nil, err
	}
	return picture(f, cfg, meta, img, lim)
}

// picture makes the Picture of a decoded image: bounds checked, converted to NRGBA or NRGBA64, made upright.
func picture(f format, cfg image.Config, meta meta, img image.Image, lim Limits) (*Picture, error) {
	// A decoder may return a frame smaller than, or offset within, the announced canvas (GIF); never larger.
	if b := img.Bounds(); int64(b.Dx())*int64(b.Dy()) > lim.MaxPixels {
		return nil, fmt.Errorf("imageio: %s decoded to %v: %w", f.name, b, ErrTooManyPixels)
	}

	if _, isCMYK := img.(*image.CMYK); isCMYK && meta.iccSpace() == "CMYK" {
		meta.icc = nil // the profile describes CMYK pixels, which we convert to RGB without it
	}
	canvas := image.Rect(0, 0, cfg.Width, cfg.Height)
	out, depth := toCanonical(img, canvas)
	out = orient(out, meta.orientation)
	b := out.Bounds()
	return &Picture{
		Image:  out,
		Format: f.name,
		Metadata: Metadata{ICC: meta.icc, EXIF: normalizeEXIF(meta.exif, b.Dx(), b.Dy()),
			XMP: normalizeXMP(meta.xmp, b.Dx(), b.Dy())},
		Width:       b.Dx(),
		Height:      b.Dy(),
		HasAlpha:    f.name != "jpeg" && !isOpaque(out), // JPEG has no alpha: no need to look
		Depth:       depth,
		Frames:      meta.frames,
		Orientation: meta.orientation,
	}, nil
}

// DecodeConfigBytes reads only the header of an image file: its format and dimensions (before orientation).
func DecodeConfigBytes(data []byte) (formatName string, cfg image.Config, err error) {
	f, err := sniff(data)
	if err != nil {
		return "", image.Config{}, err
	}
	cfg, err = f.config(data)
	if err != nil {
		return f.name, image.Config{}, classify(f.name, "reading header", err)
	}
	return f.name, cfg, nil
}

// sniff picks the format from the magic bytes; file names and declared content types are not trusted.
func sniff(data []byte) (format, error) {
	switch {
	case bytes.HasPrefix(data, []byte{0xFF, 0xD8, 0xFF}):
		return jpegFormat, nil
	case bytes.HasPrefix(data, []byte("\x89PNG\r\n\x1a\n")):
		return pngFormat, nil
	case bytes.HasPrefix(data, []byte("GIF87a")), bytes.HasPrefix(data, []byte("GIF89a")):
		return gifFormat, nil
	case bytes.HasPrefix(data, []byte("BM")):
		return bmpFormat, nil
	case bytes.HasPrefix(data, []byte("II*\x00")), bytes.HasPrefix(data, []byte("MM\x00*")):
		return tiffFormat, nil
	case len(data) >= 12 && string(data[0:4]) == "RIFF" && string(data[8:12]) == "WEBP":
		return webpFormat, nil
	case len(data) >= 2 && data[0] == 'P' && data[1] >= '1' && data[1] <= '7':
		return pnmFormat, nil
	case len(data) == 0:
		return format{}, fmt.Errorf("imageio: empty file: %w", ErrUnsupportedFormat)
	}
	return format{}, fmt.Errorf("imageio: not a JPEG, PNG, GIF, BMP, TIFF, WebP or Netpbm file: %w", ErrUnsupportedFormat)
}
