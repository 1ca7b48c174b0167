// Package canvas draws the benchmarks' PNG charts (bench/codecbench, bench/loadbench): a white image with
// filled rectangles, thick lines and text in the fixed 7x13 bitmap font, using only image/draw. It owns
// drawing; what a chart shows and where is its benchmark's.
package canvas

import (
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"io"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

// Canvas is a chart being drawn. Coordinates are pixels from the top left corner.
type Canvas struct {
	img *image.RGBA
}

// New returns a white canvas of w by h pixels.
func New(w, h int) *Canvas {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	draw.Draw(img, img.Bounds(), image.White, image.Point{}, draw.Src)
	return &Canvas{img: img}
}

// Image is what has been drawn so far.
func (c *Canvas) Image() *image.RGBA { return c.img }

// Text writes s with its baseline starting at (x, y).
func (c *Canvas) Text(x, y int, s string, col color.Color) {
	d := font.Drawer{Dst: c.img, Src: image.NewUniform(col), Face: basicfont.Face7x13, Dot: fixed.P(x, y)}
	d.DrawString(s)
}

// Fill paints the rectangle from (x0, y0) up to, not including, (x1, y1).
func (c *Canvas) Fill(x0, y0, x1, y1 int, col color.Color) {
	draw.Draw(c.img, image.Rect(x0, y0, x1, y1), image.NewUniform(col), image.Point{}, draw.Src)
}

// Line draws a 2-pixel line from (x0, y0) to (x1, y1).
func (c *Canvas) Line(x0, y0, x1, y1 int, col color.Color) {
	steps := max(abs(x1-x0), abs(y1-y0), 1)
	for s := 0; s <= steps; s++ {
		x := x0 + (x1-x0)*s/steps
		y := y0 + (y1-y0)*s/steps
		c.Fill(x, y, x+2, y+2, col)
	}
}

// WritePNG encodes the canvas as PNG.
func (c *Canvas) WritePNG(w io.Writer) error {
	if err := png.Encode(w, c.img); err != nil {
		return fmt.Errorf("chart: %w", err)
	}
	return nil
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}
