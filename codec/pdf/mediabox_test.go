package pdf

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pdfcpu/pdfcpu/pkg/api"
)

// boxDoc is a one-page document whose page dictionary has the media box media and the extra entries ext
// (/CropBox, /Rotate, /UserUnit), and whose Pages node has the entries parent (inherited attributes). Its
// content is content drawn translated by (dx, dy), so that a test can show the same region of a drawing through
// boxes at different origins.
func boxDoc(media, ext, parent string, dx, dy float64, content string) []byte {
	return boxPages(1, media, ext, parent, dx, dy, content)
}

// boxPages is boxDoc with pages copies of the page (sharing one content stream).
func boxPages(pages int, media, ext, parent string, dx, dy float64, content string) []byte {
	if media != "" {
		media = "/MediaBox " + media
	}
	objs := []string{
		"<< /Type /Catalog /Pages 2 0 R >>", "",
		"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
		flateObj("", []byte(fmt.Sprintf("1 0 0 1 %g %g cm\n", dx, dy)+content)),
	}
	var kids []string
	for range pages {
		kids = append(kids, fmt.Sprintf("%d 0 R", len(objs)+1))
		objs = append(objs, "<< /Type /Page /Parent 2 0 R "+media+" "+ext+" /Resources << /Font << /F1 3 0 R >> >> /Contents 4 0 R >>")
	}
	objs[1] = fmt.Sprintf("<< /Type /Pages /Kids [%s] /Count %d %s >>", strings.Join(kids, " "), pages, parent)
	return buildPDF(objs, "/Root 1 0 R")
}

// The overlay is placed in the page as it is displayed: whatever the media box's origin (offset, negative,
// corners given in reverse), the crop box, the /Rotate (also negative, above 360, inherited from the Pages
// node) and the /UserUnit, a marked page of uniform gray renders to exactly the pixels of the same page marked
// with a media box at the origin. Before, rotated pages showed the grid from another corner of the rendering
// (shifted by a fraction of a waxel unless the side is a whole number of waxels) and UserUnit pages showed
// waxels of the wrong size.
func TestOverlayRendersTheSameWhateverTheBoxes(t *testing.T) {
	a := testAdapter(t)
	ctx := context.Background()
	// Mid-gray, so that both the darkening and the lightening image of the overlay show; it covers any box.
	const gray = "0.5 g -100000 -100000 200000 200000 re f\n"
	id := testID("boxes")
	mark := func(t *testing.T, doc []byte) []byte {
		t.Helper()
		src := writeTemp(t, "in.pdf", doc)
		dst := filepath.Join(t.TempDir(), "out.pdf")
		if _, err := a.Embed(ctx, src, dst, id, Options{}); err != nil {
			t.Fatal(err)
		}
		return drawPage(t, dst, 150) // as detection renders it
	}
	// 180 points is 375 pixels at 150 dpi: an odd number of 2-pixel waxels and a half.
	want := mark(t, boxDoc("[0 0 180 180]", "", "", 0, 0, gray))
	for _, c := range []struct{ name, media, ext, parent string }{
		{"offset", "[50 500 230 680]", "", ""},
		{"negative", "[-30.5 -40 149.5 140]", "", ""},
		{"reversed", "[230 680 50 500]", "", ""},
		{"cropbox", "[0 0 612 792]", "/CropBox [40 480 220 660]", ""},
		{"cropbox-beyond-media", "[10 20 190 200]", "/CropBox [-100 -100 400 400]", ""},
		{"rotate90", "[50 500 230 680]", "/Rotate 90", ""},
		{"rotate180", "[50 500 230 680]", "/Rotate 180", ""},
		{"rotate270", "[50 500 230 680]", "/Rotate 270", ""},
		{"rotate-90", "[0 0 180 180]", "/Rotate -90", ""},
		{"rotate450", "[0 0 180 180]", "/Rotate 450", ""},
		{"rotate-inherited", "", "", "/MediaBox [7 9 187 189] /Rotate 180"},
		{"rotate-and-crop", "[0 0 612 792]", "/CropBox [100 200 280 380] /Rotate 270", ""},
		{"userunit", "[0 0 90 90]", "/UserUnit 2", ""},
		{"userunit-rotated", "[10 10 70 70]", "/UserUnit 3 /Rotate 90", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := mark(t, boxDoc(c.media, c.ext, c.parent, 0, 0, gray))
			if len(got) != len(want) {
				t.Fatalf("rendering of %d bytes, want %d (%q)", len(got), len(want), got[:min(len(got), 16)])
			}
			if !bytes.Equal(got, want) {
				n := 0
				for i := range got {
					if got[i] != want[i] {
						n++
					}
				}
				t.Fatalf("%d of %d pixels differ from the page marked at the origin", n, len(got))
			}
		})
	}
}

// Text pages seen through offset media boxes, crop boxes smaller than the media box, every /Rotate and a
// /UserUnit are marked (with either overlay) and detected with the exact id at the default strength, from the
// rendered pages alone.
// The content moves with the box, so each page shows an ordinary page of text: the small pages show the
// region [10 520 190 700] of a letter page of text (with the top-left gray box), the others a whole letter page.
// Before, the rotated 180-point pages and the UserUnit page were not detected (no pilot found).
func TestOffsetRotatedAndCroppedPagesAreDetected(t *testing.T) {
	a := testAdapter(t)
	ctx := context.Background()
	text := textPage(1)
	for _, c := range []struct {
		name, media, ext string
		dx, dy           float64
		content          string
	}{
		{"offset", "[40 30 652 822]", "", 40, 30, text},
		{"negative-origin", "[-300 -400 312 392]", "", -300, -400, text},
		{"offset-cropbox", "[40 30 652 822]", "/CropBox [80 100 560 700]", 40, 30, text},
		{"offset-rotate90", "[40 30 652 822]", "/Rotate 90", 40, 30, text},
		{"offset-rotate180", "[40 30 652 822]", "/Rotate 180", 40, 30, text},
		{"offset-rotate270", "[40 30 652 822]", "/Rotate 270", 40, 30, text},
		{"rotate90-cropbox", "[40 30 652 822]", "/Rotate 90 /CropBox [100 200 500 600]", 40, 30, text},
		{"small-offset", "[50 500 230 680]", "", 40, -20, text},
		{"small-rotate90", "[50 500 230 680]", "/Rotate 90", 40, -20, text},
		{"small-rotate180", "[50 500 230 680]", "/Rotate 180", 40, -20, text},
		{"small-rotate270", "[50 500 230 680]", "/Rotate 270", 40, -20, text},
		{"small-cropbox-rotate180", "[0 0 612 792]", "/CropBox [10 520 190 700] /Rotate 180", 0, 0, text},
		{"userunit", "[0 0 306 396]", "/UserUnit 2", 0, 0, "0.5 0 0 0.5 0 0 cm\n" + text},
	} {
		for _, pageImage := range []bool{false, true} {
			// Both overlays are placed in the displayed page: tiles, and one image per page shape.
			name := c.name + "/tiles"
			if pageImage {
				name = c.name + "/page-image"
			}
			t.Run(name, func(t *testing.T) {
				src := writeTemp(t, "in.pdf", boxDoc(c.media, c.ext, "", c.dx, c.dy, c.content))
				dst := filepath.Join(t.TempDir(), "out.pdf")
				id := testID(c.name)
				rep, err := a.Embed(ctx, src, dst, id, Options{Tiles: !pageImage, PageImage: pageImage})
				if err != nil {
					t.Fatal(err)
				}
				if rep.Units[0].PageImage != pageImage {
					t.Fatalf("page image %v, want %v: %+v", rep.Units[0].PageImage, pageImage, rep.Units[0])
				}
				d, err := a.DetectRendered(ctx, dst)
				if err != nil {
					t.Fatal(err)
				}
				if !d.Watermarked || d.WatermarkID == nil || *d.WatermarkID != id.String() {
					t.Fatalf("not detected: %+v", d.Units)
				}
			})
		}
	}
}

// Pages beyond the budget of pages decoded alone are analysed only at the geometry the overlay has in the
// rendering (overlayWaxel, anchored at the top-left pixel, upright): on rotated and UserUnit pages they report
// the id through the codeword test like any other page. Before, the analysed UserUnit pages were read at the
// wrong waxel size and the rotated ones half a waxel off, and reported nothing.
func TestAnalysedPagesOfRotatedAndUserUnitPages(t *testing.T) {
	a := testAdapter(t)
	ctx := context.Background()
	for _, c := range []struct {
		name, media, ext string
		dx, dy           float64
		content          string
	}{
		{"small-rotate180", "[50 500 230 680]", "/Rotate 180", 40, -20, textPage(1)},
		{"userunit", "[0 0 306 396]", "/UserUnit 2", 0, 0, "0.5 0 0 0.5 0 0 cm\n" + textPage(1)},
	} {
		t.Run(c.name, func(t *testing.T) {
			const pages = 4
			src := writeTemp(t, "in.pdf", boxPages(pages, c.media, c.ext, "", c.dx, c.dy, c.content))
			dst := filepath.Join(t.TempDir(), "out.pdf")
			id := testID(c.name)
			if _, err := a.Embed(ctx, src, dst, id, Options{}); err != nil {
				t.Fatal(err)
			}
			doc, err := a.open(ctx, dst, false)
			if err != nil {
				t.Fatal(err)
			}
			defer doc.close()
			d, st, err := a.detectRenderedStats(ctx, doc, 1, nil) // page 1 decoded alone, the others analysed
			if err != nil {
				t.Fatal(err)
			}
			want := id.String()
			if !d.Watermarked || d.WatermarkID == nil || *d.WatermarkID != want {
				t.Fatalf("document not detected (stats %+v): %+v", st, d.Units)
			}
			if st.Alone != 1 || st.Analysed != pages-1 || st.Matched != pages-1 {
				t.Fatalf("stats %+v: want 1 page decoded alone, %d analysed and matched", st, pages-1)
			}
			for i, u := range d.Units {
				if !u.Watermarked || u.WatermarkID == nil || *u.WatermarkID != want {
					t.Errorf("unit %d: %+v", i, u)
				}
			}
		})
	}
}

// The render resolution is lowered for pages whose rendering would exceed RenderMaxPixels, counting their
// /UserUnit: a 306×396-unit page with a unit of 2 is rendered at the size of a letter page. Before, the unit was
// left out, the page rendered at 150 dpi (2.1 megapixels against a limit of 1) and detection failed with
// "page 1 could not be rendered".
func TestUserUnitPagesStayWithinTheRenderBudget(t *testing.T) {
	a := testAdapter(t)
	a.Limits.RenderMaxPixels = 1 << 20
	ctx := context.Background()
	src := writeTemp(t, "in.pdf", boxDoc("[0 0 306 396]", "/UserUnit 2", "", 0, 0, "0.5 0 0 0.5 0 0 cm\n"+textPage(1)))
	dst := filepath.Join(t.TempDir(), "out.pdf")
	id := testID("userunit-budget")
	if _, err := a.Embed(ctx, src, dst, id, Options{}); err != nil {
		t.Fatal(err)
	}
	d, err := a.DetectRendered(ctx, dst)
	if err != nil {
		t.Fatal(err)
	}
	if !d.Watermarked || d.WatermarkID == nil || *d.WatermarkID != id.String() {
		t.Fatalf("not detected at the lowered resolution: %+v", d.Units)
	}
}

// Files marked before the overlay was placed in the displayed page keep their placement where the geometry did
// not change: an unrotated page with a unit of 1 ends with the same content stream as before, the overlay drawn
// through the translation to its box's lower-left corner; a rotated page gets its rotation.
func TestUnrotatedPlacementIsUnchanged(t *testing.T) {
	a := testAdapter(t)
	ctx := context.Background()
	for _, c := range []struct{ media, ext, want string }{
		{"[0 0 612 792]", "", "\nQ\nq 1 0 0 1 0 0 cm /Fg Do Q\n"},
		{"[50 500 250 700]", "", "\nQ\nq 1 0 0 1 50 500 cm /Fg Do Q\n"},
		{"[-30.5 -40.25 149.5 140]", "/CropBox [-20 -40.25 149.5 130]", "\nQ\nq 1 0 0 1 -20 -40.25 cm /Fg Do Q\n"},
		{"[50 500 250 700]", "/Rotate 90", "\nQ\nq 0 1 -1 0 250 500 cm /Fg Do Q\n"},
		{"[0 0 90 90]", "/UserUnit 2", "\nQ\nq 0.5 0 0 0.5 0 0 cm /Fg Do Q\n"},
	} {
		src := writeTemp(t, "in.pdf", boxDoc(c.media, c.ext, "", 0, 0, "0 g 10 10 20 20 re f"))
		dst := filepath.Join(t.TempDir(), "out.pdf")
		if _, err := a.Embed(ctx, src, dst, testID("placement"), Options{}); err != nil {
			t.Fatal(err)
		}
		pc, err := api.ReadContextFile(dst)
		if err != nil {
			t.Fatal(err)
		}
		pd, _, _, err := pc.XRefTable.PageDict(1, false)
		if err != nil {
			t.Fatal(err)
		}
		contents, err := pc.XRefTable.DereferenceArray(pd["Contents"])
		if err != nil || len(contents) == 0 {
			t.Fatalf("%s %s: page contents %v: %v", c.media, c.ext, pd["Contents"], err)
		}
		sd, _, err := pc.XRefTable.DereferenceStreamDict(contents[len(contents)-1])
		if err != nil || sd == nil {
			t.Fatalf("%s %s: last content stream: %v", c.media, c.ext, err)
		}
		if err := sd.Decode(); err != nil {
			t.Fatal(err)
		}
		if got := string(sd.Content); got != c.want {
			t.Errorf("%s %s: page ends with %q, want %q", c.media, c.ext, got, c.want)
		}
	}
}
