package pdf

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// paddedDoc is a document of blank pages, one per media box, whose file size is padded by
// about padBytes with a content stream of comments (stored uncompressed, invisible in any rendering): the file
// size the page-image budget is a fraction of, without changing what the pages show.
func paddedDoc(boxes []string, padBytes int) []byte {
	rng := rand.New(rand.NewPCG(13, 13))
	var pad strings.Builder
	for pad.Len() < padBytes {
		pad.WriteString("%")
		for range 32 {
			fmt.Fprintf(&pad, "%02x", rng.IntN(256))
		}
		pad.WriteString("\n")
	}
	objs := []string{"<< /Type /Catalog /Pages 2 0 R >>", "",
		streamObj("", []byte("\n")),
		streamObj("", []byte(pad.String())),
	}
	var kids []string
	for _, b := range boxes {
		kids = append(kids, fmt.Sprintf("%d 0 R", len(objs)+1))
		objs = append(objs, "<< /Type /Page /Parent 2 0 R /MediaBox "+b+" /Contents [3 0 R 4 0 R] >>")
	}
	objs[1] = fmt.Sprintf("<< /Type /Pages /Kids [%s] /Count %d >>", strings.Join(kids, " "), len(boxes))
	return buildPDF(objs, "/Root 1 0 R")
}

// TestDefaultOverlayFollowsTheByteBudget: with the default options a document gets one overlay image per page
// shape while the images' encoded bytes stay within its budget (pageImageBudget: about its input size less
// 3 KB, at most 64 KB, or a quarter of it if that is more), and tiles for the shapes beyond. A Letter page's
// image is about 7 KB: a 300 KB and a 10 KB document get it (and render with no tile lines); a document too
// small for it gets binary levels (binaryLevels), whose Letter image (2.8 KB) a 6 KB one gets and a 4 KB one
// does not (tiles). Pages at the minimum waxel follow the same rule: a 14 KB document of one 16:9 slide (7.8 KB image) and
// a 10 KB one of a 300×350-point page (5.8 KB) get their images (until 2026-11-27 such pages kept tiles below
// about 28 KB). A 15 KB document of a Letter page and a 16:9 slide gets the Letter image and tiles on the
// slide (the two images together are beyond its budget), and so does one where the slide comes first, before
// three Letter pages; a 300 KB document gets both images; pages of near sizes share one image, or all get
// tiles. Every page gives the exact id from its rendering alone and no output of an input of tinyFloor or
// more is above twice its input (before binary levels: of 10 KB or more).
func TestDefaultOverlayFollowsTheByteBudget(t *testing.T) {
	a := testAdapter(t)
	ctx := context.Background()
	for _, c := range []struct {
		name       string
		boxes      []string
		pad        int
		pageImages []bool // per page: drawn with a page image
	}{
		{"large", []string{"[0 0 612 792]"}, 300 << 10, []bool{true}},
		{"small", []string{"[0 0 612 792]"}, 10 << 10, []bool{true}},
		{"tiny", []string{"[0 0 612 792]"}, 4 << 10, []bool{false}},
		// Too small for the 4-bit image: binary levels (binaryLevels), whose Letter image (2.8 KB) fits.
		{"tiny-image", []string{"[0 0 612 792]"}, 6 << 10, []bool{true}},
		{"slide", []string{"[0 0 720 405]"}, 14 << 10, []bool{true}},
		{"small-page", []string{"[0 0 300 350]"}, 10 << 10, []bool{true}},
		{"two-shapes", []string{"[0 0 612 792]", "[0 0 720 405]"}, 14 << 10, []bool{true, false}},
		{"two-shapes-large", []string{"[0 0 612 792]", "[0 0 720 405]"}, 300 << 10, []bool{true, true}},
		// A cover of another size comes first: the size with the most pages gets the image (plan).
		{"cover", []string{"[0 0 720 405]", "[0 0 612 792]", "[0 0 612 792]", "[0 0 612 792]"}, 14 << 10, []bool{false, true, true, true}},
		// Scanned pages differ by a point or two: they share one image when it fits, and all get tiles when it
		// does not.
		{"scan", []string{"[0 0 595 842]", "[0 0 596.3 843.1]", "[0 0 594.2 840]"}, 300 << 10, []bool{true, true, true}},
		{"small-scan", []string{"[0 0 595 842]", "[0 0 596.3 843.1]", "[0 0 594.2 840]"}, 4 << 10, []bool{false, false, false}},
	} {
		t.Run(c.name, func(t *testing.T) {
			src := writeTemp(t, "in.pdf", paddedDoc(c.boxes, c.pad))
			dst := filepath.Join(t.TempDir(), "out.pdf")
			id := testID(c.name)
			rep, err := a.Embed(ctx, src, dst, id, Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%d → %d bytes (%.2f×), page images %d bytes", rep.InBytes, rep.OutBytes, float64(rep.OutBytes)/float64(rep.InBytes), rep.PageImageBytes)
			for i, u := range rep.Units {
				if u.PageImage != c.pageImages[i] {
					t.Errorf("page %d: page image %v, want %v", i+1, u.PageImage, c.pageImages[i])
				}
			}
			if b := pageImageBudget(rep.InBytes, len(c.boxes)); rep.PageImageBytes > b {
				t.Errorf("page images of %d bytes, above the budget of %d", rep.PageImageBytes, b)
			}
			if rep.InBytes >= tinyFloor && rep.OutBytes > 2*rep.InBytes {
				t.Errorf("%d → %d bytes, more than 2×", rep.InBytes, rep.OutBytes)
			}
			if c.pageImages[0] {
				// The measure of TestOverlayHasNoTileLines, whose tile overlay gives 2.2 levels here.
				if worst, _, where := lineScore(t, dst, 150); worst > 0.8 {
					t.Errorf("a line %.2f levels off the mean at %s", worst, where)
				}
			}
			d, err := a.DetectRendered(ctx, dst)
			if err != nil {
				t.Fatal(err)
			}
			for _, u := range d.Units {
				if !u.Watermarked || u.WatermarkID == nil || *u.WatermarkID != id.String() {
					t.Errorf("page %d: visual layer not recovered: %+v", u.Index+1, u)
				}
			}
			if !d.Watermarked || d.WatermarkID == nil || *d.WatermarkID != id.String() {
				t.Errorf("document: %+v", d)
			}
		})
	}
}

// TestOptionsForceTheOverlay: Options.Tiles draws tiles and Options.PageImage page images whatever the budget
// says, with 4-bit levels (a forced choice is not the budget's: a small document forced to page images keeps
// 4 bits); Options.Binary draws binary levels on a large document too, and the page gives the exact id from its
// rendering; Tiles and PageImage at once is an error that writes nothing.
func TestOptionsForceTheOverlay(t *testing.T) {
	a := testAdapter(t)
	ctx := context.Background()
	large := writeTemp(t, "large.pdf", paddedDoc([]string{"[0 0 612 792]"}, 300<<10))
	small := writeTemp(t, "small.pdf", paddedDoc([]string{"[0 0 612 792]"}, 1<<10))
	dst := filepath.Join(t.TempDir(), "out.pdf")
	for _, c := range []struct {
		src       string
		opt       Options
		pageImage bool
		bits      int
	}{
		{large, Options{Tiles: true}, false, 4},
		{small, Options{PageImage: true}, true, 4},
		{small, Options{Tiles: true}, false, 4},
		{large, Options{Binary: true}, true, 1},
		{large, Options{Binary: true, Tiles: true}, false, 1},
	} {
		rep, err := a.Embed(ctx, c.src, dst, testID("forced"), c.opt)
		if err != nil {
			t.Fatal(err)
		}
		if got := rep.Units[0].PageImage; got != c.pageImage || rep.OverlayBits != c.bits {
			t.Errorf("%+v on %d bytes: page image %v with %d bits, want %v with %d", c.opt, rep.InBytes, got, rep.OverlayBits, c.pageImage, c.bits)
		}
		if c.opt.Binary {
			d, err := a.DetectRendered(ctx, dst)
			if err != nil {
				t.Fatal(err)
			}
			if u := d.Units[0]; !u.Watermarked || u.WatermarkID == nil || *u.WatermarkID != testID("forced").String() {
				t.Errorf("%+v: the page's mark is not found: %+v", c.opt, u)
			}
		}
	}
	both := filepath.Join(t.TempDir(), "both.pdf")
	if _, err := a.Embed(ctx, large, both, testID("forced"), Options{Tiles: true, PageImage: true}); err == nil {
		t.Fatal("Tiles and PageImage together were accepted")
	}
	if _, err := os.Stat(both); err == nil {
		t.Error("an output was written")
	}
}
