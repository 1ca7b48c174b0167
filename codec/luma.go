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

// lumaOf returns the BT.601 luma plane of img in 0..255 units.
func lumaOf(img image.Image) plane {
	b := img.Bounds()
	p := newPlane(b.Dx(), b.Dy())
	for y := 0; y < p.h; y++ {
		lumaRow(img, b.Min.Y+y, p.pix[y*p.w:(y+1)*p.w])
	}
	return p
}

// lumaReduced returns the luma plane box-averaged by an integer factor f in both directions (dimensions rounded
// down), without ever holding the full-resolution plane: detection on very large images stays within memory.
func lumaReduced(src rowSource, f int) plane {
	p := newPlane(src.w/f, src.h/f)
	row := make([]float32, src.w)
	inv := 1 / float32(f*f)
	for y := 0; y < p.h; y++ {
		out := p.pix[y*p.w : (y+1)*p.w]
		for k := 0; k < f; k++ {
			src.row(y*f+k, row)
			for x := range out {
				var s float32
				for _, v := range row[x*f : x*f+f] {
					s += v
				}
				out[x] += s
			}
		}
		for x := range out {
			out[x] *= inv
		}
	}
	return p
}

// lumaRow writes the luma of image row y (absolute coordinate) into out (length Dx). Fast paths cover the types
// the decoders produce; anything else goes through At, which is slow but correct.
func lumaRow(img image.Image, y int, out []float32) {
	b := img.Bounds()
	switch m := img.(type) {
	case *image.YCbCr:
		row := m.Y[m.YOffset(b.Min.X, y):]
		for x := range out {
			out[x] = float32(row[x])
		}
	case *image.Gray:
		row := m.Pix[m.PixOffset(b.Min.X, y):]
		for x := range out {
			out[x] = float32(row[x])
		}
	case *image.NRGBA:
		row := m.Pix[m.PixOffset(b.Min.X, y):]
		for x := range out {
			s := row[4*x : 4*x+3 : 4*x+3]
			out[x] = lumaR*float32(s[0]) + lumaG*float32(s[1]) + lumaB*float32(s[2])
		}
	case *image.RGBA:
		row := m.Pix[m.PixOffset(b.Min.X, y):]
		for x := range out {
			s := row[4*x : 4*x+3 : 4*x+3]
			out[x] = lumaR*float32(s[0]) + lumaG*float32(s[1]) + lumaB*float32(s[2])
		}
	case *image.NRGBA64:
		row := m.Pix[m.PixOffset(b.Min.X, y):]
		for x := range out {
			s := row[8*x : 8*x+6 : 8*x+6]
			r := float32(uint16(s[0])<<8 | uint16(s[1]))
			g := float32(uint16(s[2])<<8 | uint16(s[3]))
			bl := float32(uint16(s[4])<<8 | uint16(s[5]))
			out[x] = (lumaR*r + lumaG*g + lumaB*bl) / 257
		}
	default:
		for x := range out {
			c := color.NRGBA64Model.Convert(img.At(b.Min.X+x, y)).(color.NRGBA64)
			out[x] = (lumaR*float32(c.R) + lumaG*float32(c.G) + lumaB*float32(c.B)) / 257
		}
	}
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
