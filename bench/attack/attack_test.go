package attack

import (
	"image"
	"image/color"
	"math"
	"math/rand/v2"
	"testing"
)

func gradient(w, h int) *image.NRGBA {
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			img.SetNRGBA(x, y, color.NRGBA{uint8(x * 255 / (w - 1)), uint8(y * 255 / (h - 1)), 128, 255})
		}
	}
	return img
}

func TestResizeKeepsSmoothContent(t *testing.T) {
	src := gradient(200, 100)
	for _, k := range []Kernel{Bilinear, Bicubic} {
		for _, f := range []float64{0.5, 0.75, 1.5} {
			out := Scale(src, f, k)
			b := out.Bounds()
			if b.Dx() != int(math.Round(200*f)) || b.Dy() != int(math.Round(100*f)) {
				t.Fatalf("%s %.2f: size %v", k.Name, f, b)
			}
			// The centre pixel of a linear gradient stays at mid-gray.
			c := out.NRGBAAt(b.Dx()/2, b.Dy()/2)
			if math.Abs(float64(c.R)-127.5) > 3 || c.B != 128 || c.A != 255 {
				t.Fatalf("%s %.2f: centre %v", k.Name, f, c)
			}
		}
	}
}

func TestRotateDirection(t *testing.T) {
	img := image.NewNRGBA(image.Rect(0, 0, 101, 101))
	for i := range img.Pix {
		img.Pix[i] = 255
	}
	// A red dot right of the centre moves up (to smaller y) under a counter-clockwise turn.
	img.SetNRGBA(90, 50, color.NRGBA{255, 0, 0, 255})
	out := Rotate(img, 90)
	if c := out.NRGBAAt(50, 10); c.G > 10 {
		t.Fatalf("counter-clockwise 90°: pixel at (50,10) is %v", c)
	}
	if c := Rotate(img, 0).NRGBAAt(90, 50); c != (color.NRGBA{255, 0, 0, 255}) {
		t.Fatalf("rotation by 0 changed pixels: %v", c)
	}
}

func TestSuiteRuns(t *testing.T) {
	src := gradient(160, 120)
	for _, a := range Suite() {
		out, err := a.Apply(src, rand.New(rand.NewPCG(1, 2)))
		if err != nil {
			t.Fatalf("%s: %v", a.Name, err)
		}
		if out.Bounds().Empty() || out.Bounds().Min != (image.Point{}) {
			t.Fatalf("%s: bounds %v", a.Name, out.Bounds())
		}
	}
	// Determinism: the same seed gives the same crop and noise.
	var noise Attack
	for _, a := range Suite() {
		if a.Name == "noise0.04" {
			noise = a
		}
	}
	a, _ := noise.Apply(src, rand.New(rand.NewPCG(7, 7)))
	b, _ := noise.Apply(src, rand.New(rand.NewPCG(7, 7)))
	if string(a.Pix) != string(b.Pix) {
		t.Fatal("noise attack not reproducible")
	}
}

func TestWebPOnLargeImage(t *testing.T) {
	if !FFmpegAvailable() {
		t.Skip("no ffmpeg")
	}
	// Large enough that the encoder's output does not fit one write (the case that needs a seekable output).
	src := gradient(1600, 1200)
	out, err := WebP(src, 75)
	if err != nil {
		t.Fatal(err)
	}
	if out.Bounds() != src.Bounds() {
		t.Fatalf("bounds %v", out.Bounds())
	}
	if c := out.NRGBAAt(800, 600); c.R < 110 || c.R > 145 {
		t.Fatalf("centre %v", c)
	}
}

func TestFilters(t *testing.T) {
	img := image.NewNRGBA(image.Rect(0, 0, 9, 9))
	for i := range img.Pix {
		img.Pix[i] = 100
	}
	img.SetNRGBA(4, 4, color.NRGBA{255, 255, 255, 255}) // salt
	if c := Median3(img).NRGBAAt(4, 4); c.R != 100 {
		t.Fatalf("median kept the outlier: %v", c)
	}
	if c := Blur(img, 1).NRGBAAt(4, 4); c.R <= 100 || c.R >= 200 {
		t.Fatalf("blur: %v", c)
	}
	if c := Brightness(img, 0.5).NRGBAAt(0, 0); c.R != 50 {
		t.Fatalf("brightness: %v", c)
	}
	if c := Gamma(img, 1).NRGBAAt(0, 0); c.R != 100 {
		t.Fatalf("gamma 1: %v", c)
	}
}
