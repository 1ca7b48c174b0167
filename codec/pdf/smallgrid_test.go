package pdf

import (
	"fmt"
	"image/jpeg"
	_ "image/png"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"filigrane/codec"
	"filigrane/codec/pdf/pdftest"
)

// gridMatch renders page 1 of path with MuPDF at 150 dpi and returns the share of pixels whose darkening is
// exactly the dark level of the waxel that the codec's grid (2 pixels a waxel from the top-left corner) puts
// there, in each half of the page: left, right, top and bottom.
func gridMatch(t *testing.T, a *Adapter, path string, id codec.ID) [4]float64 {
	t.Helper()
	dark, _ := overlayMasks(a.Codec, id, DefaultStrength)
	g := drawGray(t, path, 150)
	const n = codec.TileSide
	var hits, counts [4]float64
	for y := 1; y < g.Height-1; y++ {
		for x := 1; x < g.Width-1; x++ {
			ok := 0.0
			if int(g.Pix[y*g.Width+x]) == 255-int(dark[(y/2%n)*n+x/2%n]) {
				ok = 1
			}
			h, v := 0, 2
			if x >= g.Width/2 {
				h = 1
			}
			if y >= g.Height/2 {
				v = 3
			}
			hits[h] += ok
			counts[h]++
			hits[v] += ok
			counts[v]++
		}
	}
	var share [4]float64
	for i := range share {
		share[i] = hits[i] / counts[i]
	}
	return share
}

// TestSmallPageImageKeepsItsGrid: on a page at the minimum waxel (short side under 491.5 points: 2 pixels a
// waxel at 150 dpi), MuPDF's rendering of the page image puts every waxel's exact level on its 2×2 pixels, over
// the whole page, portrait and landscape, /Rotate and an offset crop box included. The page image drawn a
// tenth of a point larger than its waxels both ways and no longer than the page (before 2026-11-27) slipped by
// one pixel halfway across both ways: 58-67% of the far halves' pixels and 81-88% of the near halves' were exact on these pages
// (TestDamagedPagesReportTheDocumentID found 3 of 8 pages against the tiles' 7). The tiles slip within each
// tile (45-81% of the pixels exact).
func TestSmallPageImageKeepsItsGrid(t *testing.T) {
	a := testAdapter(t)
	id := testID("grid")
	pages := map[string][]byte{}
	for _, s := range [][2]int{{100, 100}, {252, 144}, {144, 252}, {250, 330}, {330, 250}, {300, 350}, {350, 420},
		{420, 595}, {595, 420}, {491, 491}, {480, 800}, {300, 900}, {900, 300}, {720, 405}, {405, 720}} {
		box := fmt.Sprintf("[0 0 %d %d]", s[0], s[1])
		pages[box] = whitePage(box)
	}
	pages["[0 0 405 720] /Rotate 90"] = pdftest.Build([]string{
		"<< /Type /Catalog /Pages 2 0 R >>",
		"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
		"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 405 720] /Rotate 90 /Contents 4 0 R >>",
		pdftest.Stream("", []byte("\n")),
	}, "/Root 1 0 R")
	pages["[0 0 612 792] cropped to 300×350 at (50.3, 100.7)"] = pdftest.Build([]string{
		"<< /Type /Catalog /Pages 2 0 R >>",
		"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
		"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /CropBox [50.3 100.7 350.3 450.7] /Contents 4 0 R >>",
		pdftest.Stream("", []byte("\n")),
	}, "/Root 1 0 R")
	for name, pdf := range pages {
		src := writeTemp(t, "white.pdf", pdf)
		dst := filepath.Join(t.TempDir(), "marked.pdf")
		rep, err := a.Embed(t.Context(), src, dst, id, Options{PageImage: true})
		if err != nil {
			t.Fatal(err)
		}
		share := gridMatch(t, a, dst, id)
		t.Logf("%s: page image %d bytes; exact pixels: left %.3f, right %.3f, top %.3f, bottom %.3f", name, rep.PageImageBytes,
			share[0], share[1], share[2], share[3])
		for i, half := range []string{"left", "right", "top", "bottom"} {
			if share[i] < 0.999 {
				t.Errorf("%s: %.1f%% of the %s half's pixels off their waxel's level", name, 100*(1-share[i]), half)
			}
		}
	}
}

// TestSmallPagesPageImageAgainstTiles is the measurement behind minWaxelReach (FILIGRANE_PDF_MEASURE=1): at the
// weakest strength, on 8 dense pages of each of five small sizes (the pages of
// TestDamagedPagesReportTheDocumentID and four more), how many pages report the exact id from their rendering
// with page images and with tiles.
func TestSmallPagesPageImageAgainstTiles(t *testing.T) {
	if os.Getenv("FILIGRANE_PDF_MEASURE") == "" {
		t.Skip("set FILIGRANE_PDF_MEASURE=1 to run the measurement")
	}
	a := testAdapter(t)
	id := testID("weak-pages")
	total := map[string]int{}
	for _, s := range [][2]float64{{300, 350}, {250, 330}, {330, 250}, {280, 400}, {350, 420}} {
		src := writeTemp(t, "dense.pdf", variedDoc(8, s[0], s[1]))
		for _, c := range []struct {
			name string
			opt  Options
		}{{"page image", Options{Strength: MinStrength, PageImage: true}}, {"tiles", Options{Strength: MinStrength, Tiles: true}}} {
			dst := filepath.Join(t.TempDir(), "marked.pdf")
			if _, err := a.Embed(t.Context(), src, dst, id, c.opt); err != nil {
				t.Fatal(err)
			}
			d, st, err := a.DetectRenderedStats(t.Context(), dst)
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, u := range d.Units {
				if u.Watermarked && u.WatermarkID != nil && *u.WatermarkID == id.String() {
					n++
				}
			}
			total[c.name] += n
			t.Logf("%.0f×%.0f %s: %d of 8 pages (%d by the codeword test)", s[0], s[1], c.name, n, st.Matched)
		}
	}
	t.Logf("in all: page image %d of 40, tiles %d of 40", total["page image"], total["tiles"])
}

// TestSmallPageScreenshots is a measurement (FILIGRANE_PDF_MEASURE=1): one-page text documents of six small
// page sizes (8 ids each, default strength, page images) rendered by MuPDF at 96 dpi (a screenshot at 100%),
// saved as JPEG quality 85 and sent to the image detector; it counts the exact ids. At 96 dpi a waxel is 1.28
// pixels, so this checks that the geometry of minWaxelReach (exact waxels across, three page lengths along)
// costs nothing away from 150 dpi.
func TestSmallPageScreenshots(t *testing.T) {
	if os.Getenv("FILIGRANE_PDF_MEASURE") == "" {
		t.Skip("set FILIGRANE_PDF_MEASURE=1 to run the measurement")
	}
	a := testAdapter(t)
	total := 0
	for _, s := range [][2]float64{{412.8, 624}, {300, 350}, {420, 595}, {720, 405}, {250, 330}, {480, 640}} {
		got := 0
		for k := range 8 {
			id := testID(fmt.Sprint("shot", s, k))
			src := writeTemp(t, "in.pdf", makeDoc(pdftest.Doc{Pages: 1, MediaBox: fmt.Sprintf("[0 0 %g %g]", s[0], s[1])}))
			dst := filepath.Join(t.TempDir(), "marked.pdf")
			if _, err := a.Embed(t.Context(), src, dst, id, Options{PageImage: true}); err != nil {
				t.Fatal(err)
			}
			shot := filepath.Join(t.TempDir(), "shot.png")
			if out, err := exec.CommandContext(t.Context(), "mutool", "draw", "-q", "-r", "96", "-o", shot, dst, "1").CombinedOutput(); err != nil {
				t.Fatalf("mutool draw: %v: %s", err, out)
			}
			_, buf := jpegOfImageFile(t, shot, 85)
			jpg, err := jpeg.Decode(buf)
			if err != nil {
				t.Fatal(err)
			}
			if d := a.Codec.Detect(jpg); d.Watermarked && d.WatermarkID != nil && *d.WatermarkID == id.String() {
				got++
			}
		}
		total += got
		t.Logf("%g×%g points: %d of 8 screenshots give the exact id", s[0], s[1], got)
	}
	t.Logf("in all: %d of 48", total)
}
