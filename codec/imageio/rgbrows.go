package imageio

import (
	"context"
	"errors"
	"fmt"
	"image"
	"image/color"
)

// RGBRows is a decoded opaque 8-bit image that is converted to RGB one row at a time, for a reader that needs
// each row once or twice and not the image. A baseline JPEG that the fast decoder handles is not held decoded
// at all: its rows are decoded on demand, one MCU row (8 or 16 pixel rows) at a time, from the file, whose
// entropy-coded data was checked whole before DecodeRGBRows returned; reading the rows again from the top
// decodes the file again. Any other JPEG stays in its YCbCr form (1.5 to 3 bytes per pixel instead of the 4 of
// the NRGBA image Decode returns). Row must not be called concurrently.
type RGBRows struct {
	Width, Height int
	ycc           *image.YCbCr
	lazy          *jpegRows
}

// Row writes row y (0 ≤ y < Height) as 8-bit RGB, 3 bytes per pixel, into rgb: byte for byte the R, G and B of
// row y of the Picture.Image that DecodeBytesContext returns for the same file (image/draw's conversion uses
// the same integer arithmetic as color.YCbCrToRGB).
func (r *RGBRows) Row(y int, rgb []uint8) {
	if r.lazy != nil {
		r.lazy.row(y, r.Width, rgb)
		return
	}
	yccRowRGB(r.ycc, y, r.Width, rgb)
}

// yccRowRGB converts row y (relative to m's bounds) of m, width pixels, to RGB.
func yccRowRGB(m *image.YCbCr, y, width int, rgb []uint8) {
	b := m.Rect
	if b.Min == (image.Point{}) {
		// The layouts the JPEG decoders produce, with ycc's table form of color.YCbCrToRGB.
		yr := m.Y[y*m.YStride : y*m.YStride+width]
		rgb = rgb[:3*width]
		switch m.SubsampleRatio {
		case image.YCbCrSubsampleRatio444, image.YCbCrSubsampleRatio440:
			cy := y
			if m.SubsampleRatio == image.YCbCrSubsampleRatio440 {
				cy = y / 2
			}
			cb, cr := m.Cb[cy*m.CStride:cy*m.CStride+width], m.Cr[cy*m.CStride:cy*m.CStride+width]
			for x, v := range yr {
				yy := int32(v) * 0x10101
				cbx, crx := cb[x], cr[x]
				p := rgb[3*x : 3*x+3 : 3*x+3]
				p[0], p[1], p[2] = clamp16(yy+ycc.crR[crx]), clamp16(yy+ycc.cbG[cbx]+ycc.crG[crx]), clamp16(yy+ycc.cbB[cbx])
			}
			return
		case image.YCbCrSubsampleRatio420, image.YCbCrSubsampleRatio422:
			cy := y
			if m.SubsampleRatio == image.YCbCrSubsampleRatio420 {
				cy = y / 2
			}
			cw := (width + 1) / 2
			cb, cr := m.Cb[cy*m.CStride:cy*m.CStride+cw], m.Cr[cy*m.CStride:cy*m.CStride+cw]
			for x, v := range yr {
				yy := int32(v) * 0x10101
				cbx, crx := cb[x>>1], cr[x>>1]
				p := rgb[3*x : 3*x+3 : 3*x+3]
				p[0], p[1], p[2] = clamp16(yy+ycc.crR[crx]), clamp16(yy+ycc.cbG[cbx]+ycc.crG[crx]), clamp16(yy+ycc.cbB[cbx])
			}
			return
		}
	}
	for x := 0; x < width; x++ {
		yi, ci := m.YOffset(b.Min.X+x, b.Min.Y+y), m.COffset(b.Min.X+x, b.Min.Y+y)
		rgb[3*x], rgb[3*x+1], rgb[3*x+2] = color.YCbCrToRGB(m.Y[yi], m.Cb[ci], m.Cr[ci])
	}
}

// DecodeRGBRows decodes data as DecodeBytesContext does, with the same limits and errors. Where that would
// convert a decoded YCbCr image to NRGBA and change nothing else (a JPEG without EXIF rotation), it returns the
// rows instead and a nil Picture; for any other file it returns the Picture and nil rows.
func DecodeRGBRows(ctx context.Context, data []byte, lim Limits) (*RGBRows, *Picture, error) {
	lim = lim.withDefaults()
	f, cfg, err := checkAll(data, lim)
	if err != nil {
		return nil, nil, err
	}
	meta, err := readMeta(f.name, data)
	if err != nil {
		return nil, nil, err
	}
	if f.name == "jpeg" && meta.orientation == 1 {
		lazy, err := newJPEGRows(ctx, data)
		if err == nil {
			return &RGBRows{Width: cfg.Width, Height: cfg.Height, lazy: lazy}, nil, nil
		}
		if !errors.Is(err, errJPEGFallback) {
			return nil, nil, fmt.Errorf("imageio: jpeg decoding: %w", err)
		}
	}
	img, err := f.decodeAs(ctx, data, jpegNative)
	if err != nil {
		return nil, nil, err
	}
	if m, ok := img.(*image.YCbCr); ok && meta.orientation == 1 && m.Rect == image.Rect(0, 0, cfg.Width, cfg.Height) &&
		int64(cfg.Width)*int64(cfg.Height) <= lim.MaxPixels {
		return &RGBRows{Width: cfg.Width, Height: cfg.Height, ycc: m}, nil, nil
	}
	pic, err := picture(f, cfg, meta, img, lim)
	return nil, pic, err
}
