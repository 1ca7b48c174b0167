package codec

import (
	"bytes"
	"image"
	"image/jpeg"
	"math"
	"math/rand/v2"

	xdraw "golang.org/x/image/draw"
)

// naturalImage draws a procedural photo-like test image: multi-octave smooth noise (clouds, texture), a lighting
// gradient, and a few soft-edged shapes in different colours, so that the codec sees flat, smooth, edged and
// textured regions as in real photos.
func naturalImage(w, h int, seed uint64) *image.NRGBA {
	rng := rand.New(rand.NewPCG(seed, seed*7919+1))
	// Value noise with octaves from 1/4 of the image down to 2 pixels.
	noise := make([]float64, w*h)
	amp := 1.0
	for cell := float64(max(w, h)) / 4; cell >= 2; cell /= 2 {
		gw, gh := int(float64(w)/cell)+2, int(float64(h)/cell)+2
		grid := make([]float64, gw*gh)
		for i := range grid {
			grid[i] = rng.Float64()*2 - 1
		}
		// The column's cell and weight are the same on every row: computed once per octave (same arithmetic,
		// so the same image; this fixture was a fifth of the package's CPU).
		x0s, txs := make([]int, w), make([]float64, w)
		for x := range x0s {
			fx := float64(x) / cell
			x0s[x] = int(fx)
			txs[x] = smooth(fx - float64(x0s[x]))
		}
		for y := 0; y < h; y++ {
			fy := float64(y) / cell
			y0 := int(fy)
			ty := smooth(fy - float64(y0))
			for x := 0; x < w; x++ {
				x0, tx := x0s[x], txs[x]
				a := grid[y0*gw+x0] + tx*(grid[y0*gw+x0+1]-grid[y0*gw+x0])
				b := grid[(y0+1)*gw+x0] + tx*(grid[(y0+1)*gw+x0+1]-grid[(y0+1)*gw+x0])
				noise[y*w+x] += amp * (a + ty*(b-a))
			}
		}
		amp *= 0.62
	}
	type shape struct {
		cx, cy, r float64
		col       [3]float64
		square    bool
	}
	var shapes []shape
	for i := 0; i < 7; i++ {
		shapes = append(shapes, shape{
			cx: rng.Float64() * float64(w), cy: rng.Float64() * float64(h),
			r:   (0.05 + 0.15*rng.Float64()) * float64(min(w, h)),
			col: [3]float64{rng.Float64() * 255, rng.Float64() * 255, rng.Float64() * 255}, square: i%2 == 0,
		})
	}
	base := [3]float64{60 + 120*rng.Float64(), 60 + 120*rng.Float64(), 60 + 120*rng.Float64()}
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			n := noise[y*w+x]
			light := 0.7 + 0.5*float64(x+y)/float64(w+h)
			var c [3]float64
			for k := range c {
				c[k] = (base[k] + 55*n) * light
			}
			for _, s := range shapes {
				// A shape blends only within a pixel of its edge (a > 0 needs d < 1): skip it without the
				// distance where the pixel is farther than that along either axis.
				if math.Abs(float64(x)-s.cx) >= s.r+1 || math.Abs(float64(y)-s.cy) >= s.r+1 {
					continue
				}
				var d float64
				if s.square {
					d = math.Max(math.Abs(float64(x)-s.cx), math.Abs(float64(y)-s.cy)) - s.r
				} else {
					d = math.Hypot(float64(x)-s.cx, float64(y)-s.cy) - s.r
				}
				if a := math.Max(0, math.Min(1, 0.5-d/2)); a > 0 {
					for k := range c {
						c[k] = (1-a)*c[k] + a*(s.col[k]+30*n)
					}
				}
			}
			i := img.PixOffset(x, y)
			for k := 0; k < 3; k++ {
				img.Pix[i+k] = clampByte(c[k] + 0.5)
			}
			img.Pix[i+3] = 255
		}
	}
	return img
}

// clampByte is v limited to [0, 255] and truncated, as uint8(math.Max(0, math.Min(255, v))) for any v that is
// not NaN: comparisons instead of math.Max and math.Min, whose NaN and signed-zero cases made that line a
// third of naturalImage's CPU.
func clampByte(v float64) uint8 {
	switch {
	case v <= 0:
		return 0
	case v >= 255:
		return 255
	}
	return uint8(v)
}

func smooth(t float64) float64 { return t * t * (3 - 2*t) }

// Attacks used by the robustness tests.

func attackJPEG(img image.Image, q int) image.Image {
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, img, &jpeg.Options{Quality: q}); err != nil {
		panic(err)
	}
	out, err := jpeg.Decode(&buf)
	if err != nil {
		panic(err)
	}
	return out
}

func attackResize(img image.Image, f float64) image.Image {
	b := img.Bounds()
	dst := image.NewNRGBA(image.Rect(0, 0, int(float64(b.Dx())*f+0.5), int(float64(b.Dy())*f+0.5)))
	xdraw.CatmullRom.Scale(dst, dst.Bounds(), img, b, xdraw.Src, nil)
	return dst
}

// attackCrop keeps frac of each side at an offset given by ox, oy in [0,1].
func attackCrop(img image.Image, frac, ox, oy float64) image.Image {
	b := img.Bounds()
	w, h := int(float64(b.Dx())*frac), int(float64(b.Dy())*frac)
	x0 := b.Min.X + int(ox*float64(b.Dx()-w))
	y0 := b.Min.Y + int(oy*float64(b.Dy()-h))
	dst := image.NewNRGBA(image.Rect(0, 0, w, h))
	xdraw.Copy(dst, image.Point{}, img, image.Rect(x0, y0, x0+w, y0+h), xdraw.Src, nil)
	return dst
}

// attackRotate rotates about the centre by deg degrees without expanding the canvas (corners become black).
func attackRotate(img image.Image, deg float64) image.Image {
	src := toNRGBA(img)
	b := src.Bounds()
	w, h := b.Dx(), b.Dy()
	dst := image.NewNRGBA(image.Rect(0, 0, w, h))
	s, c := math.Sincos(deg * math.Pi / 180)
	cx, cy := float64(w-1)/2, float64(h-1)/2
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			dx, dy := float64(x)-cx, float64(y)-cy
			sx, sy := c*dx+s*dy+cx, -s*dx+c*dy+cy
			if sx < 0 || sy < 0 || sx > float64(w-1) || sy > float64(h-1) {
				dst.Pix[dst.PixOffset(x, y)+3] = 255
				continue
			}
			x0, y0 := int(sx), int(sy)
			x1, y1 := min(x0+1, w-1), min(y0+1, h-1)
			fx, fy := sx-float64(x0), sy-float64(y0)
			o := dst.PixOffset(x, y)
			for k := 0; k < 3; k++ {
				p := func(xx, yy int) float64 { return float64(src.Pix[src.PixOffset(xx, yy)+k]) }
				v := (1-fy)*((1-fx)*p(x0, y0)+fx*p(x1, y0)) + fy*((1-fx)*p(x0, y1)+fx*p(x1, y1))
				dst.Pix[o+k] = uint8(v + 0.5)
			}
			dst.Pix[o+3] = 255
		}
	}
	return dst
}

// attackRotate90 rotates by 90° clockwise (width and height swap).
func attackRotate90(img image.Image) image.Image {
	src := toNRGBA(img)
	b := src.Bounds()
	dst := image.NewNRGBA(image.Rect(0, 0, b.Dy(), b.Dx()))
	for y := 0; y < b.Dy(); y++ {
		for x := 0; x < b.Dx(); x++ {
			copy(dst.Pix[dst.PixOffset(b.Dy()-1-y, x):][:4], src.Pix[src.PixOffset(b.Min.X+x, b.Min.Y+y):][:4])
		}
	}
	return dst
}

func attackFlip(img image.Image) image.Image {
	src := toNRGBA(img)
	b := src.Bounds()
	dst := image.NewNRGBA(image.Rect(0, 0, b.Dx(), b.Dy()))
	for y := 0; y < b.Dy(); y++ {
		for x := 0; x < b.Dx(); x++ {
			copy(dst.Pix[dst.PixOffset(b.Dx()-1-x, y):][:4], src.Pix[src.PixOffset(b.Min.X+x, b.Min.Y+y):][:4])
		}
	}
	return dst
}

// attackLevels applies out = (in - 128)·contrast + 128 + brightness·... as PIL ImageEnhance does: brightness
// scales all values, contrast scales around the mean grey.
func attackLevels(img image.Image, brightness, contrast float64) image.Image {
	src := toNRGBA(img)
	dst := image.NewNRGBA(src.Bounds())
	var mean float64
	for i := 0; i < len(src.Pix); i += 4 {
		mean += lumaR*float64(src.Pix[i]) + lumaG*float64(src.Pix[i+1]) + lumaB*float64(src.Pix[i+2])
	}
	mean /= float64(len(src.Pix) / 4)
	for i := 0; i < len(src.Pix); i += 4 {
		for k := 0; k < 3; k++ {
			v := float64(src.Pix[i+k]) * brightness
			v = (v-mean*brightness)*contrast + mean*brightness
			dst.Pix[i+k] = uint8(math.Max(0, math.Min(255, v+0.5)))
		}
		dst.Pix[i+3] = src.Pix[i+3]
	}
	return dst
}
