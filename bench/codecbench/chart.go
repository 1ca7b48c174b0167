package codecbench

import (
	"fmt"
	"image/color"
	"io"

	"filigrane/bench/canvas"
)

// targets are the exact-id rates the issue asks for, drawn as red ticks on the chart.
var chartTargets = map[string]float64{
	"clean": 1, "jpeg75": 0.99, "jpeg50": 0.97, "jpeg30": 0.85, "resize0.5": 0.99, "crop0.71": 0.95,
	"rot+2": 0.95, "rot-2": 0.95, "bright+30": 0.99, "bright-30": 0.99, "contrast+30": 0.99, "contrast-30": 0.99,
}

var palette = []color.RGBA{{0x2b, 0x6c, 0xb0, 255}, {0xe0, 0x8a, 0x1e, 255}, {0x3a, 0x9a, 0x4a, 255}, {0x8a, 0x4f, 0xb5, 255}}

// WriteChart draws a horizontal bar chart of the exact-id rate per attack, one bar per class, with the
// issue's targets as red ticks, on a bench/canvas.
func (r *Report) WriteChart(w io.Writer) error {
	names := r.attackNames()
	classes := r.classes()
	const (
		left, right, top = 190, 60, 50
		barH, gap        = 13, 8
		plotW            = 560
	)
	groupH := barH*max(1, len(classes)) + gap
	height := top + groupH*max(1, len(names)) + 40
	cv := canvas.New(left+plotW+right, height)
	text, fill := cv.Text, cv.Fill
	text(10, 18, "Exact watermark id recovered (%), per attack; red tick = target", color.Black)
	for i, c := range classes {
		x := 10 + i*170
		fill(x, 28, x+12, 38, palette[i%len(palette)])
		text(x+16, 38, c, color.Black)
	}
	// Grid lines every 10%.
	gridTop, gridBottom := top-4, top+groupH*len(names)
	for p := 0; p <= 10; p++ {
		x := left + p*plotW/10
		fill(x, gridTop, x+1, gridBottom, color.RGBA{0xdd, 0xdd, 0xdd, 255})
		text(x-8, gridBottom+14, fmt.Sprintf("%d", p*10), color.Black)
	}
	for i, name := range names {
		y := top + i*groupH
		text(10, y+barH*len(classes)/2+5, name, color.Black)
		for k, c := range classes {
			a, ok := r.Lookup(name, c)
			if !ok {
				continue
			}
			by := y + k*barH
			end := left + int(a.ExactRate*plotW+0.5)
			fill(left, by, end, by+barH-1, palette[k%len(palette)])
			text(left+plotW+6, by+barH-1, fmt.Sprintf("%.0f", 100*a.ExactRate), palette[k%len(palette)])
		}
		if t, ok := chartTargets[name]; ok {
			x := left + int(t*plotW+0.5)
			fill(x-1, y-2, x+2, y+barH*len(classes)+1, color.RGBA{0xd0, 0x10, 0x10, 255})
		}
	}
	if err := cv.WritePNG(w); err != nil {
		return fmt.Errorf("codecbench: %w", err)
	}
	return nil
}
