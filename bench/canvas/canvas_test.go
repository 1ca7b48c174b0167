package canvas

import (
	"bytes"
	"image/color"
	"image/png"
	"testing"
)

var red = color.RGBA{0xd0, 0x10, 0x10, 255}

// TestDrawing: a new canvas is white; Fill paints its rectangle and nothing past it; Line covers both ends;
// Text inks pixels above its baseline only; the PNG decodes to the same pixels.
func TestDrawing(t *testing.T) {
	c := New(100, 50)
	white := color.RGBA{255, 255, 255, 255}
	if got := c.Image().RGBAAt(99, 49); got != white {
		t.Fatalf("background %v", got)
	}
	c.Fill(10, 10, 20, 15, red)
	if c.Image().RGBAAt(10, 10) != red || c.Image().RGBAAt(19, 14) != red || c.Image().RGBAAt(20, 14) != white || c.Image().RGBAAt(19, 15) != white {
		t.Fatal("Fill painted outside [10,20)x[10,15) or not all of it")
	}
	c.Line(30, 40, 60, 30, red)
	if c.Image().RGBAAt(30, 40) != red || c.Image().RGBAAt(60, 30) != red || c.Image().RGBAAt(45, 35) != red {
		t.Fatal("Line misses an end or its middle")
	}
	c.Text(70, 20, "W", color.Black)
	inked := 0
	for y := 0; y < 50; y++ {
		for x := 70; x < 77; x++ {
			if c.Image().RGBAAt(x, y) != white {
				if y < 7 || y > 22 {
					t.Fatalf("Text inked (%d,%d), far from its baseline 20", x, y)
				}
				inked++
			}
		}
	}
	if inked == 0 {
		t.Fatal("Text inked nothing")
	}
	var b bytes.Buffer
	if err := c.WritePNG(&b); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(&b)
	if err != nil || img.Bounds() != c.Image().Bounds() {
		t.Fatalf("PNG: %v %v", err, img.Bounds())
	}
	if r, _, _, _ := img.At(15, 12).RGBA(); r>>8 != 0xd0 {
		t.Fatalf("PNG pixel (15,12) red %x", r>>8)
	}
}
