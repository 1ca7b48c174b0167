package imageio

import (
	"image"
	"image/color"
	"image/draw"

	"filigrane/codec/internal/pixel"
)

// toCanonical converts a decoded image to *image.NRGBA (8 bits per channel) or *image.NRGBA64 (deeper inputs) with
// bounds canvas, so that the codec, the orientation step and the PNG writer see two pixel layouts only. A frame
// smaller than the canvas (a GIF frame) is placed at its offset on a transparent canvas.
func toCanonical(img image.Image, canvas image.Rectangle) (image.Image, int) {
	if isDeep(img) {
		return toNRGBA64(img, canvas), 16
	}
	return toNRGBA(img, canvas), 8
}

func isDeep(img image.Image) bool {
	switch img.(type) {
	case *image.Gray16, *image.RGBA64, *image.NRGBA64, *image.Alpha16:
		return true
	}
	switch img.ColorModel() {
	case color.Gray16Model, color.RGBA64Model, color.NRGBA64Model, color.Alpha16Model:
		return true
	}
	return false
}

func toNRGBA(img image.Image, canvas image.Rectangle) *image.NRGBA {
	b := img.Bounds()
	if m, ok := img.(*image.NRGBA); ok && b == canvas && b.Min == (image.Point{}) {
		return m
	}
	dst := image.NewNRGBA(canvas)
	r := b.Intersect(canvas)
	switch m := img.(type) {
	case *image.YCbCr, *image.Gray, *image.CMYK:
		// Opaque sources: image/draw has fast converters into RGBA, whose bytes equal NRGBA's when alpha is 255.
		draw.Draw((*image.RGBA)(dst), r, m, r.Min, draw.Src)
	case *image.NYCbCrA:
		draw.Draw((*image.RGBA)(dst), r, &m.YCbCr, r.Min, draw.Src)
		for y := r.Min.Y; y < r.Max.Y; y++ {
			for x := r.Min.X; x < r.Max.X; x++ {
				dst.Pix[dst.PixOffset(x, y)+3] = m.A[m.AOffset(x, y)]
			}
		}
	case *image.NRGBA:
		for y := r.Min.Y; y < r.Max.Y; y++ {
			copy(dst.Pix[dst.PixOffset(r.Min.X, y):dst.PixOffset(r.Max.X, y)], m.Pix[m.PixOffset(r.Min.X, y):m.PixOffset(r.Max.X, y)])
		}
	case *image.Paletted:
		var lut [256][4]byte
		for i, c := range m.Palette {
			n := color.NRGBAModel.Convert(c).(color.NRGBA)
			lut[i] = [4]byte{n.R, n.G, n.B, n.A}
		}
		for y := r.Min.Y; y < r.Max.Y; y++ {
			d := dst.Pix[dst.PixOffset(r.Min.X, y):]
			s := m.Pix[m.PixOffset(r.Min.X, y):]
			for x := 0; x < r.Dx(); x++ {
				copy(d[4*x:4*x+4], lut[s[x]][:])
			}
		}
	case *image.RGBA:
		for y := r.Min.Y; y < r.Max.Y; y++ {
			pixel.UnpremultiplyRow(dst.Pix[dst.PixOffset(r.Min.X, y):dst.PixOffset(r.Max.X, y)], m.Pix[m.PixOffset(r.Min.X, y):])
		}
	default:
		for y := r.Min.Y; y < r.Max.Y; y++ {
			for x := r.Min.X; x < r.Max.X; x++ {
				dst.SetNRGBA(x, y, color.NRGBAModel.Convert(img.At(x, y)).(color.NRGBA))
			}
		}
	}
	return dst
}

func toNRGBA64(img image.Image, canvas image.Rectangle) *image.NRGBA64 {
	b := img.Bounds()
	if m, ok := img.(*image.NRGBA64); ok && b == canvas && b.Min == (image.Point{}) {
		return m
	}
	dst := image.NewNRGBA64(canvas)
	r := b.Intersect(canvas)
	switch m := img.(type) {
	case *image.Gray16:
		for y := r.Min.Y; y < r.Max.Y; y++ {
			d := dst.Pix[dst.PixOffset(r.Min.X, y):]
			s := m.Pix[m.PixOffset(r.Min.X, y):]
			for x := 0; x < r.Dx(); x++ {
				hi, lo := s[2*x], s[2*x+1]
				p := d[8*x : 8*x+8 : 8*x+8]
				p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7] = hi, lo, hi, lo, hi, lo, 0xFF, 0xFF
			}
		}
	case *image.RGBA64:
		// 16-bit TIFF without alpha decodes to RGBA64; opaque pixels need no unpremultiplication.
		for y := r.Min.Y; y < r.Max.Y; y++ {
			d := dst.Pix[dst.PixOffset(r.Min.X, y):]
			s := m.Pix[m.PixOffset(r.Min.X, y):]
			for x := 0; x < 8*r.Dx(); x += 8 {
				if s[x+6] == 0xFF && s[x+7] == 0xFF {
					copy(d[x:x+8], s[x:x+8])
					continue
				}
				c := color.NRGBA64Model.Convert(m.RGBA64At(r.Min.X+x/8, y)).(color.NRGBA64)
				d[x], d[x+1], d[x+2], d[x+3] = byte(c.R>>8), byte(c.R), byte(c.G>>8), byte(c.G)
				d[x+4], d[x+5], d[x+6], d[x+7] = byte(c.B>>8), byte(c.B), byte(c.A>>8), byte(c.A)
			}
		}
	default:
		for y := r.Min.Y; y < r.Max.Y; y++ {
			for x := r.Min.X; x < r.Max.X; x++ {
				dst.SetNRGBA64(x, y, color.NRGBA64Model.Convert(img.At(x, y)).(color.NRGBA64))
			}
		}
	}
	return dst
}

// isOpaque reports whether every pixel of an NRGBA or NRGBA64 image has full alpha.
func isOpaque(img image.Image) bool {
	switch m := img.(type) {
	case *image.NRGBA:
		for i := 3; i < len(m.Pix); i += 4 {
			if m.Pix[i] != 0xFF {
				return false
			}
		}
		return true
	case *image.NRGBA64:
		for i := 6; i < len(m.Pix); i += 8 {
			if m.Pix[i] != 0xFF || m.Pix[i+1] != 0xFF {
				return false
			}
		}
		return true
	}
	if o, ok := img.(interface{ Opaque() bool }); ok {
		return o.Opaque()
	}
	return false
}

// orient applies an EXIF orientation (1-8) to an NRGBA or NRGBA64 image with bounds at the origin, so that the
// result is upright. Orientations 5-8 swap width and height.
func orient(img image.Image, o int) image.Image {
	if o <= 1 || o > 8 {
		return img
	}
	var (
		pix    []byte
		stride int
		bpp    int
		b      = img.Bounds()
	)
	switch m := img.(type) {
	case *image.NRGBA:
		pix, stride, bpp = m.Pix, m.Stride, 4
	case *image.NRGBA64:
		pix, stride, bpp = m.Pix, m.Stride, 8
	default:
		return img
	}
	w, h := b.Dx(), b.Dy()
	dw, dh := w, h
	if o >= 5 {
		dw, dh = h, w
	}
	dst := make([]byte, dw*dh*bpp)
	dstride := dw * bpp
	for y := 0; y < h; y++ {
		row := pix[y*stride:]
		for x := 0; x < w; x++ {
			var dx, dy int
			switch o {
			case 2: // mirrored horizontally
				dx, dy = w-1-x, y
			case 3: // rotated 180
				dx, dy = w-1-x, h-1-y
			case 4: // mirrored vertically
				dx, dy = x, h-1-y
			case 5: // transposed
				dx, dy = y, x
			case 6: // needs a 90° clockwise turn
				dx, dy = h-1-y, x
			case 7: // transversed
				dx, dy = h-1-y, w-1-x
			case 8: // needs a 90° counter-clockwise turn
				dx, dy = y, w-1-x
			}
			copy(dst[dy*dstride+dx*bpp:dy*dstride+dx*bpp+bpp], row[x*bpp:x*bpp+bpp])
		}
	}
	r := image.Rect(0, 0, dw, dh)
	if bpp == 4 {
		return &image.NRGBA{Pix: dst, Stride: dstride, Rect: r}
	}
	return &image.NRGBA64{Pix: dst, Stride: dstride, Rect: r}
}
