// Package attack implements the image transformations of the codec benchmark (re-compression, resampling,
// cropping, rotation, colour changes, noise and filters) and the named attack suite built from them. The
// transforms live here rather than in codec on purpose: the benchmark must not share code with what it measures.
//
// All transforms take and return *image.NRGBA with bounds at the origin, treat alpha as opaque, and are
// deterministic given their arguments (random ones take a seeded generator).
package attack

import (
	"bytes"
	"fmt"
	"image"
	"image/draw"
	"image/jpeg"
	"math"
	"math/rand/v2"
)

// Kernel is a resampling filter: its weight function and its support radius at scale 1.
type Kernel struct {
	Name    string
	Support float64
	At      func(x float64) float64
}

// Bilinear is the triangle filter; Bicubic is the Keys cubic with a = -0.5 (as in PIL and most image tools).
var (
	Bilinear = Kernel{"bilinear", 1, func(x float64) float64 {
		x = math.Abs(x)
		if x < 1 {
			return 1 - x
		}
		return 0
	}}
	Bicubic = Kernel{"bicubic", 2, func(x float64) float64 {
		const a = -0.5
		x = math.Abs(x)
		switch {
		case x < 1:
			return ((a+2)*x-(a+3))*x*x + 1
		case x < 2:
			return ((a*x-5*a)*x+8*a)*x - 4*a
		}
		return 0
	}}
)

// taps holds, for each output coordinate, the first input index and the normalised weights.
type taps struct {
	start   []int
	weights [][]float32
}

// makeTaps computes the filter taps for resampling n input samples to m outputs. When shrinking, the kernel is
// widened by the scale factor so that the result is anti-aliased (what PIL and browsers do).
func makeTaps(n, m int, k Kernel) taps {
	scale := float64(m) / float64(n)
	stretch := 1.0
	if scale < 1 {
		stretch = 1 / scale
	}
	support := k.Support * stretch
	t := taps{start: make([]int, m), weights: make([][]float32, m)}
	for i := 0; i < m; i++ {
		center := (float64(i)+0.5)/scale - 0.5
		lo := int(math.Floor(center - support + 1))
		hi := int(math.Floor(center + support))
		lo, hi = max(lo, 0), min(hi, n-1)
		w := make([]float32, hi-lo+1)
		var sum float64
		for j := lo; j <= hi; j++ {
			v := k.At((float64(j) - center) / stretch)
			w[j-lo] = float32(v)
			sum += v
		}
		if sum != 0 {
			for j := range w {
				w[j] = float32(float64(w[j]) / sum)
			}
		}
		t.start[i], t.weights[i] = lo, w
	}
	return t
}

func clamp8(v float32) uint8 {
	if v <= 0 {
		return 0
	}
	if v >= 255 {
		return 255
	}
	return uint8(v + 0.5)
}

// Resize resamples img to w x h with kernel k. It works one output row at a time (vertical pass into a float
// row, then horizontal), so memory stays at the size of the output even for 40 MP images.
func Resize(img *image.NRGBA, w, h int, k Kernel) *image.NRGBA {
	sw, sh := img.Bounds().Dx(), img.Bounds().Dy()
	dst := image.NewNRGBA(image.Rect(0, 0, w, h))
	tv, th := makeTaps(sh, h, k), makeTaps(sw, w, k)
	row := make([]float32, sw*4)
	for y := 0; y < h; y++ {
		clear(row)
		for j, wt := range tv.weights[y] {
			src := img.Pix[(tv.start[y]+j)*img.Stride:]
			for x := 0; x < sw*4; x++ {
				row[x] += wt * float32(src[x])
			}
		}
		out := dst.Pix[y*dst.Stride:]
		for x := 0; x < w; x++ {
			var r, g, b, a float32
			base := th.start[x] * 4
			for j, wt := range th.weights[x] {
				p := row[base+4*j:]
				r += wt * p[0]
				g += wt * p[1]
				b += wt * p[2]
				a += wt * p[3]
			}
			out[4*x], out[4*x+1], out[4*x+2], out[4*x+3] = clamp8(r), clamp8(g), clamp8(b), clamp8(a)
		}
	}
	return dst
}

// Scale resizes by a factor on both sides (rounded to whole pixels, at least 1).
func Scale(img *image.NRGBA, f float64, k Kernel) *image.NRGBA {
	b := img.Bounds()
	return Resize(img, max(1, int(math.Round(float64(b.Dx())*f))), max(1, int(math.Round(float64(b.Dy())*f))), k)
}

// Crop returns a copy of r (clipped to the image) with bounds moved to the origin.
func Crop(img *image.NRGBA, r image.Rectangle) *image.NRGBA {
	r = r.Intersect(img.Bounds())
	dst := image.NewNRGBA(image.Rect(0, 0, r.Dx(), r.Dy()))
	for y := 0; y < r.Dy(); y++ {
		copy(dst.Pix[y*dst.Stride:(y+1)*dst.Stride], img.Pix[img.PixOffset(r.Min.X, r.Min.Y+y):])
	}
	return dst
}

// RandomCrop keeps the fraction f of each side at a random offset.
func RandomCrop(img *image.NRGBA, f float64, rng *rand.Rand) *image.NRGBA {
	b := img.Bounds()
	w, h := max(1, int(math.Round(float64(b.Dx())*f))), max(1, int(math.Round(float64(b.Dy())*f)))
	x0, y0 := rng.IntN(b.Dx()-w+1), rng.IntN(b.Dy()-h+1)
	return Crop(img, image.Rect(x0, y0, x0+w, y0+h))
}

// Rotate turns the image by deg degrees counter-clockwise about its centre, keeping its size (no expansion);
// corners that come from outside are black, as with PIL's rotate. Sampling is bilinear.
func Rotate(img *image.NRGBA, deg float64) *image.NRGBA {
	b := img.Bounds()
	w, h := b.Dx(), b.Dy()
	dst := image.NewNRGBA(b)
	sin, cos := math.Sincos(deg * math.Pi / 180)
	cx, cy := float64(w)/2, float64(h)/2
	for y := 0; y < h; y++ {
		out := dst.Pix[y*dst.Stride:]
		dy := float64(y) + 0.5 - cy
		for x := 0; x < w; x++ {
			dx := float64(x) + 0.5 - cx
			// Inverse mapping: the source point that lands on (x, y). Image y points down, so a counter-clockwise
			// turn on screen is a clockwise one in these coordinates.
			sx := cos*dx - sin*dy + cx - 0.5
			sy := sin*dx + cos*dy + cy - 0.5
			x0, y0 := int(math.Floor(sx)), int(math.Floor(sy))
			fx, fy := float32(sx-float64(x0)), float32(sy-float64(y0))
			var acc [4]float32
			for _, t := range [4]struct {
				x, y int
				w    float32
			}{{x0, y0, (1 - fx) * (1 - fy)}, {x0 + 1, y0, fx * (1 - fy)}, {x0, y0 + 1, (1 - fx) * fy}, {x0 + 1, y0 + 1, fx * fy}} {
				if t.x < 0 || t.y < 0 || t.x >= w || t.y >= h {
					acc[3] += 255 * t.w // outside: opaque black
					continue
				}
				p := img.Pix[t.y*img.Stride+4*t.x:]
				acc[0] += t.w * float32(p[0])
				acc[1] += t.w * float32(p[1])
				acc[2] += t.w * float32(p[2])
				acc[3] += t.w * float32(p[3])
			}
			out[4*x], out[4*x+1], out[4*x+2], out[4*x+3] = clamp8(acc[0]), clamp8(acc[1]), clamp8(acc[2]), clamp8(acc[3])
		}
	}
	return dst
}

// FlipH mirrors left and right.
func FlipH(img *image.NRGBA) *image.NRGBA {
	b := img.Bounds()
	dst := image.NewNRGBA(b)
	for y := 0; y < b.Dy(); y++ {
		s, d := img.Pix[y*img.Stride:], dst.Pix[y*dst.Stride:]
		for x := 0; x < b.Dx(); x++ {
			copy(d[4*(b.Dx()-1-x):4*(b.Dx()-x)], s[4*x:4*x+4])
		}
	}
	return dst
}

// mapRGB applies a 256-entry lookup table to R, G and B.
func mapRGB(img *image.NRGBA, lut *[256]uint8) *image.NRGBA {
	dst := image.NewNRGBA(img.Bounds())
	for i := 0; i < len(img.Pix); i += 4 {
		dst.Pix[i], dst.Pix[i+1], dst.Pix[i+2], dst.Pix[i+3] = lut[img.Pix[i]], lut[img.Pix[i+1]], lut[img.Pix[i+2]], img.Pix[i+3]
	}
	return dst
}

// Brightness multiplies every channel by f (PIL ImageEnhance.Brightness: a blend with black).
func Brightness(img *image.NRGBA, f float64) *image.NRGBA {
	var lut [256]uint8
	for i := range lut {
		lut[i] = clamp8(float32(float64(i) * f))
	}
	return mapRGB(img, &lut)
}

// Contrast scales the distance from the mean gray level by f (PIL ImageEnhance.Contrast).
func Contrast(img *image.NRGBA, f float64) *image.NRGBA {
	var sum float64
	for i := 0; i < len(img.Pix); i += 4 {
		sum += 0.299*float64(img.Pix[i]) + 0.587*float64(img.Pix[i+1]) + 0.114*float64(img.Pix[i+2])
	}
	mean := math.Round(sum / float64(len(img.Pix)/4))
	var lut [256]uint8
	for i := range lut {
		lut[i] = clamp8(float32(mean + f*(float64(i)-mean)))
	}
	return mapRGB(img, &lut)
}

// Gamma applies out = 255 (in/255)^g.
func Gamma(img *image.NRGBA, g float64) *image.NRGBA {
	var lut [256]uint8
	for i := range lut {
		lut[i] = clamp8(float32(255 * math.Pow(float64(i)/255, g)))
	}
	return mapRGB(img, &lut)
}

// Noise adds independent Gaussian noise of standard deviation sigma (0-255 scale) to R, G and B.
func Noise(img *image.NRGBA, sigma float64, rng *rand.Rand) *image.NRGBA {
	dst := image.NewNRGBA(img.Bounds())
	for i := 0; i < len(img.Pix); i += 4 {
		for c := 0; c < 3; c++ {
			dst.Pix[i+c] = clamp8(float32(float64(img.Pix[i+c]) + sigma*rng.NormFloat64()))
		}
		dst.Pix[i+3] = img.Pix[i+3]
	}
	return dst
}

// Blur is a separable Gaussian blur with standard deviation sigma pixels (PIL's GaussianBlur radius), edges
// clamped.
func Blur(img *image.NRGBA, sigma float64) *image.NRGBA {
	r := int(math.Ceil(3 * sigma))
	k := make([]float32, 2*r+1)
	var sum float64
	for i := -r; i <= r; i++ {
		v := math.Exp(-float64(i*i) / (2 * sigma * sigma))
		k[i+r] = float32(v)
		sum += v
	}
	for i := range k {
		k[i] = float32(float64(k[i]) / sum)
	}
	b := img.Bounds()
	w, h := b.Dx(), b.Dy()
	dst := image.NewNRGBA(b)
	// Vertical pass into a float row, then horizontal, one output row at a time (as in Resize).
	row := make([]float32, w*4)
	for y := 0; y < h; y++ {
		clear(row)
		for j := -r; j <= r; j++ {
			src := img.Pix[min(max(y+j, 0), h-1)*img.Stride:]
			wt := k[j+r]
			for x := 0; x < w*4; x++ {
				row[x] += wt * float32(src[x])
			}
		}
		out := dst.Pix[y*dst.Stride:]
		for x := 0; x < w; x++ {
			var acc [4]float32
			for j := -r; j <= r; j++ {
				p := row[4*min(max(x+j, 0), w-1):]
				wt := k[j+r]
				acc[0] += wt * p[0]
				acc[1] += wt * p[1]
				acc[2] += wt * p[2]
				acc[3] += wt * p[3]
			}
			out[4*x], out[4*x+1], out[4*x+2], out[4*x+3] = clamp8(acc[0]), clamp8(acc[1]), clamp8(acc[2]), clamp8(acc[3])
		}
	}
	return dst
}

// Median3 is a 3x3 median filter per channel, edges clamped.
func Median3(img *image.NRGBA) *image.NRGBA {
	b := img.Bounds()
	w, h := b.Dx(), b.Dy()
	dst := image.NewNRGBA(b)
	var v [9]uint8
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			o := dst.PixOffset(x, y)
			for c := 0; c < 3; c++ {
				n := 0
				for dy := -1; dy <= 1; dy++ {
					row := img.Pix[min(max(y+dy, 0), h-1)*img.Stride:]
					for dx := -1; dx <= 1; dx++ {
						v[n] = row[4*min(max(x+dx, 0), w-1)+c]
						n++
					}
				}
				dst.Pix[o+c] = median9(&v)
			}
			dst.Pix[o+3] = img.Pix[img.PixOffset(x, y)+3]
		}
	}
	return dst
}

// median9 sorts in place (insertion sort is fastest for nine values) and returns the middle one.
func median9(v *[9]uint8) uint8 {
	for i := 1; i < 9; i++ {
		for j := i; j > 0 && v[j] < v[j-1]; j-- {
			v[j], v[j-1] = v[j-1], v[j]
		}
	}
	return v[4]
}

// JPEG re-encodes with Go's image/jpeg at quality q. That encoder always writes baseline YCbCr with 4:2:0 chroma
// subsampling, the common setting of cameras and web tools; it has no 4:4:4 option.
func JPEG(img *image.NRGBA, q int) (*image.NRGBA, error) {
	var buf bytes.Buffer
	var src image.Image = img
	if img.Opaque() {
		src = (*image.RGBA)(img) // same bytes when opaque, and image/jpeg has a fast path for RGBA
	}
	if err := jpeg.Encode(&buf, src, &jpeg.Options{Quality: q}); err != nil {
		return nil, fmt.Errorf("jpeg q%d: %w", q, err)
	}
	dec, err := jpeg.Decode(&buf)
	if err != nil {
		return nil, fmt.Errorf("jpeg q%d: %w", q, err)
	}
	dst := image.NewNRGBA(dec.Bounds())
	draw.Draw((*image.RGBA)(dst), dst.Bounds(), dec, image.Point{}, draw.Src) // opaque: RGBA bytes == NRGBA bytes
	return dst, nil
}
