package codec

import (
	"fmt"
	"image"
	"math"
	"os"
	"path/filepath"
	"testing"

	xdraw "golang.org/x/image/draw"
)

func loadPhoto(f string) image.Image {
	fh, err := os.Open(f)
	if err != nil {
		return nil
	}
	defer fh.Close()
	img, _, err := image.Decode(fh)
	if err != nil {
		return nil
	}
	b := img.Bounds()
	if s := min(b.Dx(), b.Dy()); s < 1024 {
		f := 1024.0 / float64(s)
		dst := image.NewNRGBA(image.Rect(0, 0, int(float64(b.Dx())*f), int(float64(b.Dy())*f)))
		xdraw.CatmullRom.Scale(dst, dst.Bounds(), img, b, xdraw.Src, nil)
		img = dst
	}
	return img
}

func TestDebugSync(t *testing.T) {
	if os.Getenv("FILIGRANE_DEBUG") == "" {
		t.Skip()
	}
	c, _ := New([]byte("filigrane-development-key-000000"))
	id, _ := IDFromJSON([]byte(`{"a":1}`))
	files, _ := filepath.Glob("/tmp/photos/*")
	if os.Getenv("PROC") != "" {
		files = []string{"proc"}
	}
	if g := os.Getenv("ONLY"); g != "" {
		files = []string{g}
	}
	for _, f := range files {
		img := loadPhoto(f)
		if f == "proc" {
			img = naturalImage(1024, 1024, 102)
		}
		marked, _, _ := c.Embed(img, id, EmbedOptions{})
		att := attackRotate(marked, 2)
		if os.Getenv("HALF") != "" {
			att = attackResize(marked, 0.5)
		}
		if os.Getenv("COMBINED") != "" {
			att = attackJPEG(attackLevels(attackCrop(marked, 0.71, 0.3, 0.6), 0.5, 1), 40)
		}
		y := lumaOf(att)
		pyr := buildPyramid(y, 16)
		fmt.Println(filepath.Base(f), y.w, y.h)
		for _, a := range latticeCandidates(pyr, 5) {
			g := whiten(sampleGrid(pyr, a))
			acc, _ := fold(g)
			al := c.searchDihedral(acc)
			a2 := al.aligned(a)
			a3 := c.refine(pyr, a2, 2)
			a4 := c.refine(pyr, a3, 1)
			acc4, _ := fold(whiten(sampleGrid(pyr, a4)))
			sw := c.layout.demod(acc4)
			errs := 0
			coded := convEncode(frameBits(id))
			for i, v := range sw.llr {
				if (v > 0) != (coded[i] == 1) {
					errs++
				}
			}
			fmt.Printf("  waxel %.4f ang %.3f  al.z %.1f  final z %.1f errs %d\n", a.waxel(), reduceQuarter(math.Atan2(a.m[2], a.m[0]))*180/3.14159, al.z, sw.pilotZ, errs)
		}
	}
}
