package pdf

import (
	"context"
	"fmt"
	"math"
	"os/exec"
	"path/filepath"
	"testing"

	"filigrane/codec/pdf/pdftest"
)

// blankPage is a one-page PDF of the given media box with nothing drawn: white paper.
func blankPage(box string) []byte {
	return pdftest.Build([]string{
		"<< /Type /Catalog /Pages 2 0 R >>",
		"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
		"<< /Type /Page /Parent 2 0 R /MediaBox " + box + " /Contents 4 0 R >>",
		pdftest.Stream("", []byte("% nothing\n")),
	}, "/Root 1 0 R")
}

// seamScore renders page 1 of path at dpi and returns the largest deviation, in 8-bit levels, of one pixel
// column's or row's mean darkening from the median over all columns or rows. The overlay is noise whose
// column means are close to strength/2 everywhere; a tile edge that renders lighter or darker than the
// tile's inside stands out as a line.
func seamScore(t *testing.T, path string, dpi int) (float64, int, int) {
	t.Helper()
	out, err := exec.Command("mutool", "draw", "-q", "-r", fmt.Sprint(dpi), "-c", "gray", "-F", "pgm", "-o", "-", path, "1").Output()
	if err != nil {
		t.Fatal(err)
	}
	g, err := readPGM(bufioReader(out), 1<<26)
	if err != nil {
		t.Fatal(err)
	}
	col := make([]float64, g.Width)
	row := make([]float64, g.Height)
	for y := 0; y < g.Height; y++ {
		for x := 0; x < g.Width; x++ {
			d := 255 - float64(g.Pix[y*g.Width+x])
			col[x] += d / float64(g.Height)
			row[y] += d / float64(g.Width)
		}
	}
	worst := func(v []float64) (float64, int) {
		var mean float64
		for _, x := range v[1 : len(v)-1] {
			mean += x / float64(len(v)-2)
		}
		w, at := 0.0, 0
		for i, x := range v[1 : len(v)-1] { // the outermost lines are the page's own edge
			if d := math.Abs(x - mean); d > w {
				w, at = d, i+1
			}
		}
		return w, at
	}
	wc, atc := worst(col)
	wr, atr := worst(row)
	return max(wc, wr), atc, atr
}

// TestOverlayTileSeams: the overlay's tile edges do not show as lines in a rendering of a white page, at page
// sizes whose tile edges fall between device pixels (A4, a 16:9 slide) and at one where they fall on pixel
// edges at some resolutions (Letter). Abutting tile images gave lines of 2.2 levels (a pattern whose mean
// darkening is about 1.1); the tiling pattern leaves MuPDF's one-pixel overlap of its cells, about 1.3 levels
// at 150 dpi: smaller, not gone (bench/README.md, PDF "Visual check").
func TestOverlayTileSeams(t *testing.T) {
	a := testAdapter(t)
	dir := t.TempDir()
	for _, box := range []string{"[0 0 595.28 841.89]", "[0 0 612 792]", "[0 0 720 405]"} {
		src := writeTemp(t, "blank.pdf", blankPage(box))
		dst := filepath.Join(dir, "marked.pdf")
		if _, err := a.Embed(context.Background(), src, dst, testID("seams"), Options{}); err != nil {
			t.Fatal(err)
		}
		for _, dpi := range []int{72, 96, 150, 200} {
			s, c, r := seamScore(t, dst, dpi)
			t.Logf("%s at %d dpi: worst line %.3f levels (column %d, row %d)", box, dpi, s, c, r)
			if s > 1.5 {
				t.Errorf("%s at %d dpi: a line %.2f levels off the page's mean darkening (column %d, row %d)", box, dpi, s, c, r)
			}
		}
	}
}
