package pdf

import (
	"fmt"
	"math"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"

	"filigrane/codec/pdf/pdftest"
)

// whitePage is a one-page PDF with the given media box and an empty content stream: white paper.
func whitePage(box string) []byte {
	return pdftest.Build([]string{
		"<< /Type /Catalog /Pages 2 0 R >>",
		"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
		"<< /Type /Page /Parent 2 0 R /MediaBox " + box + " /Contents 4 0 R >>",
		pdftest.Stream("", []byte("\n")),
	}, "/Root 1 0 R")
}

// lineScore renders page 1 of path with mutool at dpi, in gray, and measures how far the mean darkening
// (255 − value) of any single pixel column or row lies from the mean over all columns or rows. The overlay is
// fine-grained noise, so every column and row averages to about the same darkening (1.3 to 2 levels at the
// default strength, depending on the resolution); an edge of an image drawn with MuPDF's one-pixel overlap is a column or row that is
// darker than that. The outermost column and row are left out: they are the page's own edge. It returns the
// worst deviation and where it is.
func lineScore(t *testing.T, path string, dpi int) (worst, mean float64, where string) {
	t.Helper()
	g := drawGray(t, path, dpi)
	cols, rows := make([]float64, g.Width), make([]float64, g.Height)
	for y := range g.Height {
		for x := range g.Width {
			d := 255 - float64(g.Pix[y*g.Width+x])
			cols[x] += d / float64(g.Height)
			rows[y] += d / float64(g.Width)
		}
	}
	scan := func(v []float64, what string) {
		inner := v[1 : len(v)-1]
		var m float64
		for _, x := range inner {
			m += x / float64(len(inner))
		}
		mean = m
		for i, x := range inner {
			if d := math.Abs(x - m); d > worst {
				worst, where = d, fmt.Sprintf("%s %d", what, i+1)
			}
		}
	}
	scan(cols, "column")
	scan(rows, "row")
	return worst, mean, where
}

// TestOverlayHasNoTileLines: on a marked white page rendered by MuPDF at 72-200 dpi (A4 and a 16:9 slide,
// whose tile edges fall between device pixels, and Letter, whose edges fall on pixel edges at some
// resolutions), no pixel column or row stands out from the grain. With the overlay drawn as abutting tile
// images every tile edge was a line 2.2 levels off the page's mean darkening of 1.3-2 levels (MuPDF draws
// abutting images with a one-pixel overlap); drawn as one image per page size, the worst column or row is the
// pattern's own noise (at most 0.4 levels measured).
func TestOverlayHasNoTileLines(t *testing.T) {
	a := testAdapter(t)
	dir := t.TempDir()
	for _, box := range []string{"[0 0 595.28 841.89]", "[0 0 612 792]", "[0 0 720 405]"} {
		src := writeTemp(t, "white.pdf", whitePage(box))
		dst := filepath.Join(dir, "marked.pdf")
		if _, err := a.Embed(t.Context(), src, dst, testID("lines"), Options{PageImage: true}); err != nil {
			t.Fatal(err)
		}
		for _, dpi := range []int{72, 96, 150, 200} {
			worst, mean, where := lineScore(t, dst, dpi)
			t.Logf("%s at %d dpi: mean darkening %.2f, worst line %.2f levels off (%s)", box, dpi, mean, worst, where)
			if mean < 0.5 {
				t.Errorf("%s at %d dpi: mean darkening %.2f levels: the overlay is not drawn", box, dpi, mean)
			}
			if worst > 0.8 {
				t.Errorf("%s at %d dpi: %s is %.2f levels off the page's mean darkening of %.2f: a visible line",
					box, dpi, where, worst, mean)
			}
		}
	}
}

// TestElongatedPageFallsBackToTiles: a page whose waxel grid is above maxPageImagePixels (a 14400×491.5-point
// banner: 15000×512 waxels) is drawn with the 128×128 tile images; a 3000×491.5-point one (3125×512) with one
// image covering its waxel grid (3136×512: whole pageImageSteps). Either way the mark is there (the images carry it).
func TestElongatedPageFallsBackToTiles(t *testing.T) {
	a := testAdapter(t)
	for _, c := range []struct {
		box   string
		tiles bool
	}{{"[0 0 14400 491.5]", true}, {"[0 0 3000 491.5]", false}} {
		src := writeTemp(t, "long.pdf", whitePage(c.box))
		dst := filepath.Join(t.TempDir(), "marked.pdf")
		if _, err := a.Embed(t.Context(), src, dst, testID("long"), Options{PageImage: true}); err != nil {
			t.Fatal(err)
		}
		out, err := exec.CommandContext(t.Context(), "mutool", "show", dst, "grep").Output()
		if err != nil {
			t.Fatalf("mutool show: %v", err)
		}
		var images []string
		for _, m := range imageSize.FindAllStringSubmatch(string(out), -1) {
			images = append(images, m[2]+"×"+m[1])
		}
		t.Logf("%s: images %v", c.box, images)
		if len(images) == 0 {
			t.Fatalf("%s: no overlay image", c.box)
		}
		for _, im := range images {
			if (im == "128×128") != c.tiles {
				t.Errorf("%s: image %s, want tile images %v", c.box, im, c.tiles)
			}
		}
	}
}

// imageSize finds the size of each image object in `mutool show file grep` output (one object per line, keys
// in any order after mutool's normalisation: /Height before /Subtype before /Width).
var imageSize = regexp.MustCompile(`/Height (\d+).*/Subtype/Image.*/Width (\d+)`)

// TestPageImageOverlayIsDetected: a document marked with one overlay image per page size (pages of two sizes,
// so two images) gives the exact id from its renderings alone, page by page, as the tiles did, and a page of
// each size gets its own image of its own waxel grid.
func TestPageImageOverlayIsDetected(t *testing.T) {
	a := testAdapter(t)
	dir := t.TempDir()
	src := writeTemp(t, "in.pdf", pdftest.Build([]string{
		"<< /Type /Catalog /Pages 2 0 R >>",
		"<< /Type /Pages /Kids [3 0 R 4 0 R 5 0 R] /Count 3 >>",
		"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 6 0 R >>",
		"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 720 405] /Contents 6 0 R >>",
		"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 6 0 R >>",
		pdftest.Stream("", []byte("0.5 g 72 500 300 200 re f\n")),
	}, "/Root 1 0 R"))
	marked := filepath.Join(dir, "marked.pdf")
	id := testID("page image")
	if _, err := a.Embed(t.Context(), src, marked, id, Options{PageImage: true}); err != nil {
		t.Fatal(err)
	}
	d, err := a.DetectRendered(t.Context(), marked)
	if err != nil {
		t.Fatal(err)
	}
	if !d.Watermarked || d.WatermarkID == nil || *d.WatermarkID != id.String() {
		t.Fatalf("visual layer not recovered: %+v", d)
	}
	for _, u := range d.Units {
		if !u.Watermarked || u.WatermarkID == nil || *u.WatermarkID != id.String() {
			t.Errorf("page %d: visual layer not recovered: %+v", u.Index, u)
		}
	}
	out, err := exec.CommandContext(t.Context(), "mutool", "show", marked, "grep").Output()
	if err != nil {
		t.Fatalf("mutool show: %v", err)
	}
	sizes := map[string]int{}
	for _, m := range imageSize.FindAllStringSubmatch(string(out), -1) {
		sizes[m[2]+"×"+m[1]]++
	}
	// Letter: waxel 612/512 pt, 512×663 waxels; the slide: the 2-pixel minimum waxel, 750×422, reaching
	// three times its width (minWaxelReach: 2250×422), stored transposed (rows along its short side,
	// maskBytes); each rounded up to whole pageImageSteps.
	if want := map[string]int{"512×704": 2, "448×2304": 2}; fmt.Sprint(sizes) != fmt.Sprint(want) {
		t.Errorf("overlay images %v, want %v (image and soft mask per page size)", sizes, want)
	}
}

// TestPageImagesAreSharedAcrossNearSizes: the pages of a scan differ in size by a point or two; they share one
// page image (the output grows by one image, not one per page), while a page of another shape gets its
// own. The overlay's output cost is what this bounds: about 7 KB per image.
func TestPageImagesAreSharedAcrossNearSizes(t *testing.T) {
	a := testAdapter(t)
	boxes := []string{"[0 0 595 842]", "[0 0 596.3 843.1]", "[0 0 594.2 840]", "[0 0 597 845.5]", "[0 0 842 595]"}
	objs := []string{"<< /Type /Catalog /Pages 2 0 R >>", ""}
	kids := ""
	for i, b := range boxes {
		kids += fmt.Sprintf("%d 0 R ", 3+i)
		objs = append(objs, fmt.Sprintf("<< /Type /Page /Parent 2 0 R /MediaBox %s /Contents %d 0 R >>", b, 3+len(boxes)))
	}
	objs[1] = fmt.Sprintf("<< /Type /Pages /Kids [%s] /Count %d >>", kids, len(boxes))
	objs = append(objs, pdftest.Stream("", []byte("\n")))
	src := writeTemp(t, "scan.pdf", pdftest.Build(objs, "/Root 1 0 R"))
	dst := filepath.Join(t.TempDir(), "marked.pdf")
	rep, err := a.Embed(t.Context(), src, dst, testID("scan"), Options{PageImage: true})
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.CommandContext(t.Context(), "mutool", "show", dst, "grep").Output()
	if err != nil {
		t.Fatalf("mutool show: %v", err)
	}
	sizes := map[string]int{}
	for _, m := range imageSize.FindAllStringSubmatch(string(out), -1) {
		sizes[m[2]+"×"+m[1]]++
	}
	t.Logf("%d → %d bytes, images %v", rep.InBytes, rep.OutBytes, sizes)
	// Portrait A4-ish pages: 512 waxels across, 724-729 down, rounded to 768; landscape: 729×512 → 768×512,
	// stored transposed (maskBytes): two images of 512×768, each with its soft mask.
	if want := map[string]int{"512×768": 4}; fmt.Sprint(sizes) != fmt.Sprint(want) {
		t.Errorf("overlay images %v, want %v", sizes, want)
	}
	d, err := a.DetectRendered(t.Context(), dst)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range d.Units {
		if !u.Watermarked || u.WatermarkID == nil || *u.WatermarkID != testID("scan").String() {
			t.Errorf("page %d: visual layer not recovered: %+v", u.Index, u)
		}
	}
}

// grainAmplitude renders page 1 of path with mutool at dpi, in gray, and returns the standard deviation of
// its pixels: on a white page, the overlay's rendered amplitude.
func grainAmplitude(t *testing.T, path string, dpi int) float64 {
	t.Helper()
	g := drawGray(t, path, dpi)
	var sum, sq float64
	for _, p := range g.Pix {
		sum += float64(p)
		sq += float64(p) * float64(p)
	}
	n := float64(len(g.Pix))
	return math.Sqrt(sq/n - (sum/n)*(sum/n))
}

// TestPageImageKeepsTheGrainAmplitude: rendered by MuPDF at 150 dpi (the detection resolution) and 96 dpi (a
// screenshot at 100%), the page image draws the pattern as strongly as the tiles do, on a small page whose
// waxel is the 2-pixel minimum (300×245 pt, the size of VectorApple.pdf) and on Letter. Drawn at exactly 2×,
// MuPDF interpolated the page image and the small page's grain fell to two thirds of the tiles' (0.91 against
// 1.37 levels), which cost the mark after rasterising and JPEG q75 in the benchmark.
func TestPageImageKeepsTheGrainAmplitude(t *testing.T) {
	a := testAdapter(t)
	dir := t.TempDir()
	for _, box := range []string{"[0 0 300 245]", "[0 0 612 792]"} {
		src := writeTemp(t, "white.pdf", whitePage(box))
		tiles, image := filepath.Join(dir, "tiles.pdf"), filepath.Join(dir, "image.pdf")
		if _, err := a.Embed(t.Context(), src, tiles, testID("grain"), Options{Tiles: true}); err != nil {
			t.Fatal(err)
		}
		if _, err := a.Embed(t.Context(), src, image, testID("grain"), Options{PageImage: true}); err != nil {
			t.Fatal(err)
		}
		for _, dpi := range []int{150, 96} {
			at, ai := grainAmplitude(t, tiles, dpi), grainAmplitude(t, image, dpi)
			t.Logf("%s at %d dpi: grain %.3f levels with tiles, %.3f with the page image", box, dpi, at, ai)
			if ai < 0.95*at {
				t.Errorf("%s at %d dpi: the page image renders a grain of %.3f levels, below the tiles' %.3f", box, dpi, ai, at)
			}
		}
	}
}

// TestOverlayKeepsItsSwingOnDarkPages: the overlay image (one gray image under a constant soft mask,
// overlayImage) renders the pattern on gray and black paper as strongly as on white (MuPDF, 150 dpi, Letter,
// default strength): the grain's standard deviation on a 50% gray and a black page is at least 0.9 of the
// white page's. With alpha L/255 and gray light/L (no +1), MuPDF's truncation rendered black pages with two
// thirds of the white page's grain (0.99 against 1.43 levels).
func TestOverlayKeepsItsSwingOnDarkPages(t *testing.T) {
	a := testAdapter(t)
	grain := map[string]float64{}
	for _, bg := range []struct{ name, content string }{
		{"white", "\n"}, {"gray", "0.5 g -10 -10 700 900 re f\n"}, {"black", "0 g -10 -10 700 900 re f\n"},
	} {
		src := writeTemp(t, "in.pdf", pdftest.Build([]string{
			"<< /Type /Catalog /Pages 2 0 R >>",
			"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
			"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R >>",
			pdftest.Stream("", []byte(bg.content)),
		}, "/Root 1 0 R"))
		dst := filepath.Join(t.TempDir(), "marked.pdf")
		if _, err := a.Embed(t.Context(), src, dst, testID("swing"), Options{PageImage: true}); err != nil {
			t.Fatal(err)
		}
		grain[bg.name] = grainAmplitude(t, dst, 150)
		t.Logf("%s page: grain %.3f levels", bg.name, grain[bg.name])
	}
	if grain["white"] < 1 {
		t.Fatalf("white page: grain %.3f levels, the overlay is not drawn", grain["white"])
	}
	for _, bg := range []string{"gray", "black"} {
		if grain[bg] < 0.9*grain["white"] {
			t.Errorf("%s page: grain %.3f levels, below 0.9 of the white page's %.3f", bg, grain[bg], grain["white"])
		}
	}
}
