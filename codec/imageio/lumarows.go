package imageio

import (
	"context"
	"errors"
	"fmt"
	"image"
)

// LumaRows is the 8-bit luma plane of a decoded JPEG read one row at a time: the Y samples of the
// *image.YCbCr (or the samples of the *image.Gray) that DecodeForAnalysis returns for the same file, which is
// what codec.Codec.Detect reads from that image. A baseline YCbCr JPEG that the fast decoder handles is not
// held decoded: its Y plane is reconstructed on demand, one MCU row at a time (the chroma blocks are
// entropy-decoded and dropped: no chroma IDCT, no colour conversion), from the file, whose entropy-coded data
// was checked whole before DecodeLumaRows returned; reading the rows again from the top decodes the file
// again. Row must not be called concurrently.
type LumaRows struct {
	Width, Height int
	plane         []uint8 // a decoded Y or grey plane with its stride, when not lazy
	stride        int
	lazy          *jpegRows
}

// Row writes the first len(y) samples (len(y) ≤ Width) of row j (0 ≤ j < Height) into y.
func (r *LumaRows) Row(j int, y []uint8) {
	if r.lazy != nil {
		r.lazy.lumaRow(j, y)
		return
	}
	copy(y, r.plane[j*r.stride:j*r.stride+len(y)])
}

// DecodeLumaRows decodes data as DecodeForAnalysis does, with the same limits and errors. For a JPEG whose
// decoded form is an *image.YCbCr or *image.Gray it returns that image's luma rows and a nil image; for any
// other file, the image DecodeForAnalysis returns and nil rows. Like DecodeForAnalysis it ignores EXIF
// orientation (detection finds rotations and flips itself).
func DecodeLumaRows(ctx context.Context, data []byte, lim Limits) (*LumaRows, image.Image, error) {
	f, cfg, err := checkAll(data, lim)
	if err != nil {
		return nil, nil, err
	}
	if f.name != "jpeg" {
		img, _, err := DecodeForAnalysis(ctx, data, lim)
		return nil, img, err
	}
	lazy, err := newJPEGRows(ctx, data)
	if err == nil {
		lazy.s.lumaOnly = true
		return &LumaRows{Width: cfg.Width, Height: cfg.Height, lazy: lazy}, nil, nil
	}
	if !errors.Is(err, errJPEGFallback) {
		return nil, nil, fmt.Errorf("imageio: jpeg decoding: %w", err)
	}
	img, _, err := DecodeForAnalysis(ctx, data, lim)
	if err != nil {
		return nil, nil, err
	}
	b := img.Bounds()
	switch m := img.(type) {
	case *image.YCbCr:
		return &LumaRows{Width: b.Dx(), Height: b.Dy(), plane: m.Y[m.YOffset(b.Min.X, b.Min.Y):], stride: m.YStride}, nil, nil
	case *image.Gray:
		return &LumaRows{Width: b.Dx(), Height: b.Dy(), plane: m.Pix[m.PixOffset(b.Min.X, b.Min.Y):], stride: m.Stride}, nil, nil
	}
	return nil, img, nil
}
