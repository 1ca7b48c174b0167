package imageio

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/gif"
	"image/jpeg"
	"image/png"
	"io"

	"golang.org/x/image/bmp"
	"golang.org/x/image/tiff"
	"golang.org/x/image/webp"
)

// The readers below are called directly rather than through image.Decode so that this package does not depend
// on which decoders some other package registered.
var (
	jpegFormat = readerFormat("jpeg", jpeg.DecodeConfig, jpeg.Decode)
	pngFormat  = readerFormat("png", png.DecodeConfig, png.Decode)
	// gif.Decode stops after the first frame, so later frames cost neither time nor memory.
	gifFormat  = readerFormat("gif", gif.DecodeConfig, gif.Decode)
	bmpFormat  = readerFormat("bmp", bmp.DecodeConfig, bmp.Decode)
	tiffFormat = readerFormat("tiff", tiff.DecodeConfig, tiff.Decode)
	webpFormat = readerFormat("webp", webp.DecodeConfig, webp.Decode)
	pnmFormat  = format{name: "pnm", config: pnmConfig, decode: pnmDecode}
)

// readerFormat describes a format read by an io.Reader decoder.
func readerFormat(name string, config func(io.Reader) (image.Config, error), decode func(io.Reader) (image.Image, error)) format {
	return format{name: name,
		config:       func(b []byte) (image.Config, error) { return config(bytes.NewReader(b)) },
		decode:       func(b []byte) (image.Image, error) { return decode(bytes.NewReader(b)) },
		decodeReader: decode}
}

// classify wraps a decoder error in ErrUnsupportedFormat or ErrCorrupt. Decoders report features they do not
// implement with their own UnsupportedError types; everything else (bad structure, truncation) is corruption.
func classify(formatName, what string, err error) error {
	if errors.Is(err, ErrUnsupportedFormat) || errors.Is(err, ErrCorrupt) ||
		errors.Is(err, ErrTooManyPixels) || errors.Is(err, ErrTooLarge) || errors.Is(err, ErrTooComplex) {
		return fmt.Errorf("imageio: %s %s: %w", formatName, what, err)
	}
	var (
		jpegUnsupported jpeg.UnsupportedError
		pngUnsupported  png.UnsupportedError
		tiffUnsupported tiff.UnsupportedError
	)
	switch {
	case errors.As(err, &jpegUnsupported), errors.As(err, &pngUnsupported), errors.As(err, &tiffUnsupported),
		errors.Is(err, bmp.ErrUnsupported):
		return fmt.Errorf("imageio: %s %s: %v: %w", formatName, what, err, ErrUnsupportedFormat)
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return fmt.Errorf("imageio: %s %s: truncated file: %w", formatName, what, ErrCorrupt)
	}
	return fmt.Errorf("imageio: %s %s: %v: %w", formatName, what, err, ErrCorrupt)
}
