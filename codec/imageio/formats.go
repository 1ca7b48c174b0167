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
	jpegFormat = format{"jpeg",
		func(b []byte) (image.Config, error) { return jpeg.DecodeConfig(bytes.NewReader(b)) },
		func(b []byte) (image.Image, error) { return jpeg.Decode(bytes.NewReader(b)) }}
	pngFormat = format{"png",
		func(b []byte) (image.Config, error) { return png.DecodeConfig(bytes.NewReader(b)) },
		func(b []byte) (image.Image, error) { return png.Decode(bytes.NewReader(b)) }}
	gifFormat = format{"gif",
		func(b []byte) (image.Config, error) { return gif.DecodeConfig(bytes.NewReader(b)) },
		// gif.Decode stops after the first frame, so later frames cost neither time nor memory.
		func(b []byte) (image.Image, error) { return gif.Decode(bytes.NewReader(b)) }}
	bmpFormat = format{"bmp",
		func(b []byte) (image.Config, error) { return bmp.DecodeConfig(bytes.NewReader(b)) },
		func(b []byte) (image.Image, error) { return bmp.Decode(bytes.NewReader(b)) }}
	tiffFormat = format{"tiff",
		func(b []byte) (image.Config, error) { return tiff.DecodeConfig(bytes.NewReader(b)) },
		func(b []byte) (image.Image, error) { return tiff.Decode(bytes.NewReader(b)) }}
	webpFormat = format{"webp",
		func(b []byte) (image.Config, error) { return webp.DecodeConfig(bytes.NewReader(b)) },
		func(b []byte) (image.Image, error) { return webp.Decode(bytes.NewReader(b)) }}
	pnmFormat = format{"pnm", pnmConfig, pnmDecode}
)

// classify wraps a decoder error in ErrUnsupportedFormat or ErrCorrupt. Decoders report features they do not
// implement with their own UnsupportedError types; everything else (bad structure, truncation) is corruption.
func classify(formatName, what string, err error) error {
	if errors.Is(err, ErrUnsupportedFormat) || errors.Is(err, ErrCorrupt) ||
		errors.Is(err, ErrTooManyPixels) || errors.Is(err, ErrTooLarge) {
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
