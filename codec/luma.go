package codec

import (
	"image"
	"image/color"
)

// BT.601 luma weights, the ones JPEG's YCbCr uses, so the Y plane of a decoded JPEG is read directly.
const (
	lumaR = 0.299
	lumaG = 0.587
	lumaB = 0.114
)

// lumaOf returns the BT.601 luma plane of img in 0..255 units. Fast paths cover the types the decoders produce;
// anything else goes through At, which is slow but correct.
func lumaOf(img image.Image) plane {
	b := img.Bounds()
	p := newPlane(b.Dx(), b.Dy())
	switch m := img.(type) {
	case *image.YCbCr:
		for y := 0; y < p.h; y++ {
			row := m.Y[m.YOffset(b.Min.X, b.Min.Y+y):]
			out := p.pix[y*p.w : (y+1)*p.w]
			for x := range out {
				out[x] = float32(row[x])
			}
		}
	case *image.Gray:
		for y := 0; y < p.h; y++ {
			row := m.Pix[m.PixOffset(b.Min.X, b.Min.Y+y):]
			out := p.pix[y*p.w : (y+1)*p.w]
			for x := range out {
				out[x] = float32(row[x])
			}
		}
	case *image.NRGBA:
		for y := 0; y < p.h; y++ {
			row := m.Pix[m.PixOffset(b.Min.X, b.Min.Y+y):]
			out := p.pix[y*p.w : (y+1)*p.w]
			for x := range out {
				s := row[4*x : 4*x+3 : 4*x+3]
				out[x] = lumaR*float32(s[0]) + lumaG*float32(s[1]) + lumaB*float32(s[2])
			}
		}
	case *image.RGBA:
		for y := 0; y < p.h; y++ {
			row := m.Pix[m.PixOffset(b.Min.X, b.Min.Y+y):]
			out := p.pix[y*p.w : (y+1)*p.w]
			for x := range out {
				s := row[4*x : 4*x+3 : 4*x+3]
				out[x] = lumaR*float32(s[0]) + lumaG*float32(s[1]) + lumaB*float32(s[2])
			}
		}
	case *image.NRGBA64:
		for y := 0; y < p.h; y++ {
			row := m.Pix[m.PixOffset(b.Min.X, b.Min.Y+y):]
			out := p.pix[y*p.w : (y+1)*p.w]
			for x := range out {
				s := row[8*x : 8*x+6 : 8*x+6]
				r := float32(uint16(s[0])<<8 | uint16(s[1]))
				g := float32(uint16(s[2])<<8 | uint16(s[3]))
				bl := float32(uint16(s[4])<<8 | uint16(s[5]))
				out[x] = (lumaR*r + lumaG*g + lumaB*bl) / 257
			}
		}
	default:
		for y := 0; y < p.h; y++ {
			out := p.pix[y*p.w : (y+1)*p.w]
			for x := range out {
				c := color.NRGBA64Model.Convert(img.At(b.Min.X+x, b.Min.Y+y)).(color.NRGBA64)
				out[x] = (lumaR*float32(c.R) + lumaG*float32(c.G) + lumaB*float32(c.B)) / 257
			}
		}
	}
	return p
}

// isDeep reports whether img carries more than 8 bits per channel.
func isDeep(img image.Image) bool {
	switch img.(type) {
	case *image.NRGBA64, *image.RGBA64, *image.Gray16:
		return true
	}
	switch img.ColorModel() {
	case color.NRGBA64Model, color.RGBA64Model, color.Gray16Model:
		return true
	}
	return false
}
