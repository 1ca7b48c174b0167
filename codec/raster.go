package codec

import (
	"image"
	"image/color"
	"image/draw"
	"math"

	"filigrane/codec/internal/pixel"
)

// toNRGBA returns a non-premultiplied 8-bit copy of img with the same bounds.
func toNRGBA(img image.Image) *image.NRGBA {
	b := img.Bounds()
	dst := image.NewNRGBA(b)
	switch m := img.(type) {
	case *image.NRGBA:
		for y := b.Min.Y; y < b.Max.Y; y++ {
			copy(dst.Pix[dst.PixOffset(b.Min.X, y):dst.PixOffset(b.Max.X, y)], m.Pix[m.PixOffset(b.Min.X, y):])
		}
	case *image.RGBA:
		for y := b.Min.Y; y < b.Max.Y; y++ {
			pixel.UnpremultiplyRow(dst.Pix[dst.PixOffset(b.Min.X, y):dst.PixOffset(b.Max.X, y)], m.Pix[m.PixOffset(b.Min.X, y):])
		}
	case *image.YCbCr, *image.Gray:
		draw.Draw(dst, b, img, b.Min, draw.Src) // stdlib fast paths exist for these sources
	default:
		for y := b.Min.Y; y < b.Max.Y; y++ {
			for x := b.Min.X; x < b.Max.X; x++ {
				dst.SetNRGBA(x, y, color.NRGBAModel.Convert(img.At(x, y)).(color.NRGBA))
			}
		}
	}
	return dst
}

// toNRGBA64 returns a non-premultiplied 16-bit copy of img with the same bounds.
func toNRGBA64(img image.Image) *image.NRGBA64 {
	b := img.Bounds()
	dst := image.NewNRGBA64(b)
	if m, ok := img.(*image.NRGBA64); ok {
		for y := b.Min.Y; y < b.Max.Y; y++ {
			copy(dst.Pix[dst.PixOffset(b.Min.X, y):dst.PixOffset(b.Max.X, y)], m.Pix[m.PixOffset(b.Min.X, y):])
		}
		return dst
	}
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			dst.SetNRGBA64(x, y, color.NRGBA64Model.Convert(img.At(x, y)).(color.NRGBA64))
		}
	}
	return dst
}

// applyDelta8 writes src + the rendered mark at gain g (luma units, added equally to R, G and B) into dst, leaving alpha and fully
// transparent pixels untouched, and returns the mean squared error over the RGB samples.
func applyDelta8(dst, src *image.NRGBA, r *renderer, g float32) float64 {
	b := src.Bounds()
	var sse float64
	drow := make([]float32, b.Dx())
	for y := 0; y < b.Dy(); y++ {
		s := src.Pix[src.PixOffset(b.Min.X, b.Min.Y+y):]
		d := dst.Pix[dst.PixOffset(b.Min.X, b.Min.Y+y):]
		r.row(y, g, drow)
		var rowSSE int64
		for x, dv := range drow {
			i := 4 * x
			if s[i+3] == 0 {
				continue
			}
			add := dv
			for k := 0; k < 3; k++ {
				v := float32(s[i+k]) + add
				var o uint8
				switch {
				case v <= 0:
					o = 0
				case v >= 255:
					o = 255
				default:
					o = uint8(v + 0.5)
				}
				d[i+k] = o
				e := int64(o) - int64(s[i+k])
				rowSSE += e * e
			}
		}
		sse += float64(rowSSE)
	}
	return sse / float64(3*len(drow)*b.Dy())
}

// applyDelta16 is applyDelta8 for 16-bit images; the error is returned in 8-bit units.
func applyDelta16(dst, src *image.NRGBA64, r *renderer, g float32) float64 {
	b := src.Bounds()
	var sse float64
	drow := make([]float32, b.Dx())
	for y := 0; y < b.Dy(); y++ {
		s := src.Pix[src.PixOffset(b.Min.X, b.Min.Y+y):]
		d := dst.Pix[dst.PixOffset(b.Min.X, b.Min.Y+y):]
		r.row(y, g, drow)
		for x, dv := range drow {
			i := 8 * x
			if s[i+6] == 0 && s[i+7] == 0 {
				continue
			}
			add := float64(dv) * 257
			for k := 0; k < 3; k++ {
				sv := float64(uint16(s[i+2*k])<<8 | uint16(s[i+2*k+1]))
				v := math.Round(sv + add)
				v = math.Max(0, math.Min(65535, v))
				o := uint16(v)
				d[i+2*k] = uint8(o >> 8)
				d[i+2*k+1] = uint8(o)
				e := (v - sv) / 257
				sse += e * e
			}
		}
	}
	return sse / float64(3*len(drow)*b.Dy())
}
