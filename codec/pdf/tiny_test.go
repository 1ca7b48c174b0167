package pdf

import (
	"bufio"
	"bytes"
	"fmt"
	"image"
	"image/jpeg"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// rasterJPEG renders every page of src with MuPDF at 150 dpi (RGB), encodes each as JPEG quality 75 and writes a
// new PDF of those images at the pages' sizes: the benchmark's raster150-jpeg75 attack, what "print to image"
// workflows and scanners produce. It returns the path of the new PDF. The pages cross as PPM, uncompressed:
// the same pixels as PNG, without a deflate in mutool and an inflate here (a third of the function's CPU).
func rasterJPEG(t *testing.T, src string) string {
	t.Helper()
	dir := t.TempDir()
	pattern := filepath.Join(dir, "r%d.ppm")
	if out, err := exec.CommandContext(t.Context(), "mutool", "draw", "-q", "-r", "150", "-c", "rgb", "-F", "ppm", "-o", pattern, src).CombinedOutput(); err != nil {
		t.Fatalf("mutool draw: %v: %s", err, out)
	}
	objs := []string{"<< /Type /Catalog /Pages 2 0 R >>", ""}
	var kids string
	for i := 1; ; i++ {
		page := fmt.Sprintf(pattern, i)
		if _, err := os.Stat(page); os.IsNotExist(err) {
			break
		}
		img := readPPMFile(t, page)
		var buf bytes.Buffer
		if err := jpeg.Encode(&buf, img, &jpeg.Options{Quality: 75}); err != nil {
			t.Fatal(err)
		}
		b := img.Bounds()
		w, h := float64(b.Dx())*72/150, float64(b.Dy())*72/150
		n := len(objs) + 1
		kids += fmt.Sprintf("%d 0 R ", n)
		objs = append(objs,
			fmt.Sprintf("<< /Type /Page /Parent 2 0 R /MediaBox [0 0 %g %g] /Resources << /XObject << /I %d 0 R >> >> /Contents %d 0 R >>", w, h, n+1, n+2),
			streamObj(fmt.Sprintf("/Type /XObject /Subtype /Image /Width %d /Height %d /ColorSpace /DeviceRGB /BitsPerComponent 8 /Filter /DCTDecode", b.Dx(), b.Dy()), buf.Bytes()),
			streamObj("", []byte(fmt.Sprintf("q %g 0 0 %g 0 0 cm /I Do Q", w, h))))
	}
	objs[1] = fmt.Sprintf("<< /Type /Pages /Kids [%s] /Count %d >>", kids, (len(objs)-2)/3)
	out := filepath.Join(dir, "raster.pdf")
	if err := os.WriteFile(out, buildPDF(objs, "/Root 1 0 R"), 0o644); err != nil {
		t.Fatal(err)
	}
	return out
}

// readPPMFile reads the binary 8-bit RGB PPM (P6) that mutool draw wrote at path, as image/png would hand over
// the same page written as PNG: an *image.RGBA, opaque.
func readPPMFile(t *testing.T, path string) *image.RGBA {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	br := bufio.NewReader(f)
	magic := make([]byte, 2)
	if _, err := io.ReadFull(br, magic); err != nil || string(magic) != "P6" {
		t.Fatalf("%s: not a PPM (%q): %v", path, magic, err)
	}
	var v [3]int
	for i := range v {
		if v[i], err = pgmInt(br); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
	}
	if _, err := br.ReadByte(); err != nil { // the one whitespace byte before the samples
		t.Fatalf("%s: %v", path, err)
	}
	w, h := v[0], v[1]
	if w <= 0 || h <= 0 || v[2] != 255 {
		t.Fatalf("%s: a %dx%d PPM with maximum %d", path, w, h, v[2])
	}
	rgb := make([]byte, 3*w*h)
	if _, err := io.ReadFull(br, rgb); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for i := range w * h {
		copy(img.Pix[4*i:4*i+3], rgb[3*i:3*i+3])
		img.Pix[4*i+3] = 255
	}
	return img
}

// jpegOfImageFile decodes the image file at path and encodes it as JPEG at quality q: the image and the JPEG.
func jpegOfImageFile(t *testing.T, path string, q int) (image.Image, *bytes.Buffer) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	img, _, err := image.Decode(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, img, &jpeg.Options{Quality: q}); err != nil {
		t.Fatal(err)
	}
	return img, &buf
}

// textDoc is a one-page text-only document on a w×h-point page: lines of words in Helvetica, the content
// compressed, a title in its information dictionary, as a word processor's export of a short letter or memo
// would be (a few KB; no embedded font, no image).
func textDoc(w, h float64, lines int) []byte {
	top := fmt.Sprint(h - 30)
	rng := rand.New(rand.NewPCG(uint64(lines), 7))
	vocab := make([]string, 3000)
	for i := range vocab {
		w := make([]byte, 2+rng.IntN(8))
		for j := range w {
			w[j] = byte('a' + rng.IntN(26))
		}
		vocab[i] = string(w)
	}
	var c strings.Builder
	lead := min(9, (h-60)/float64(max(lines, 1)))
	fmt.Fprintf(&c, "BT /F1 %.2f Tf %.2f TL 30 %s Td\n", lead*0.8, lead, top)
	for range lines {
		var l []string
		for range int(w/(5*lead)) + rng.IntN(4) {
			l = append(l, vocab[rng.IntN(len(vocab))])
		}
		fmt.Fprintf(&c, "(%s) '\n", strings.Join(l, " "))
	}
	c.WriteString("ET\n")
	return buildPDF([]string{
		"<< /Type /Catalog /Pages 2 0 R >>",
		"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
		fmt.Sprintf("<< /Type /Page /Parent 2 0 R /MediaBox [0 0 %g %g] /Resources << /Font << /F1 4 0 R >> >> /Contents 5 0 R >>", w, h),
		"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
		flateObj("", []byte(c.String())),
		"<< /Title (Memo) /Producer (a word processor) >>",
	}, "/Root 1 0 R /Info 6 0 R")
}

// tinyFloor is the most the mark adds to a one-page document too small for 2× (binaryLevels): the binary tile
// image (2.1 KB of noise: 128×128 independent chips at one bit each, which no lossless coding stores in much
// less) and the rest of the mark (the structural layer, the soft mask, the form, the page's wrappers and the
// cross-reference stream: about 1.3-1.5 KB). Measured: 3.4-3.6 KB on one-page documents of 0.5-4.7 KB.
const tinyFloor = 3600

// TestTinyTextDocumentStaysWithinTwice: one-page text-only documents of a few kilobytes (Letter, A5, a 16:9
// slide) are marked within twice their size from about 3.6 KB up, drawn with binary levels (binaryLevels:
// the tile, or from about 6 KB (Letter) the page image); below that the mark adds at most tinyFloor. The text stays
// extractable, and the page's mark is found from its rendering alone as written, after a qpdf re-save and after
// rasterising at 150 dpi and rebuilding the PDF from JPEG q75 page images; the re-saved file's structural layer
// gives the id too. Before binary levels the tile image alone was 4.4 KB: a 4.7 KB document ended at 2.27×.
func TestTinyTextDocumentStaysWithinTwice(t *testing.T) {
	a := testAdapter(t)
	for _, c := range []struct {
		name      string
		w, h      float64
		lines     int
		pageImage bool
	}{
		{"letter-1KB", 612, 792, 10, false},
		{"letter-4KB", 612, 792, 60, false},
		{"a5-4KB", 420, 595, 75, false},
		{"slide-4KB", 720, 405, 50, false},
		{"letter-8KB", 612, 792, 110, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			src := writeTemp(t, "in.pdf", textDoc(c.w, c.h, c.lines))
			dst := filepath.Join(t.TempDir(), "marked.pdf")
			id := testID("tiny/" + c.name)
			rep, err := a.Embed(t.Context(), src, dst, id, Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%d → %d bytes (%.2f×), %d-bit overlay, page image %v", rep.InBytes, rep.OutBytes,
				float64(rep.OutBytes)/float64(rep.InBytes), rep.OverlayBits, rep.Units[0].PageImage)
			if rep.OverlayBits != 1 || rep.Units[0].PageImage != c.pageImage {
				t.Errorf("%d-bit overlay, page image %v: want binary levels, page image %v", rep.OverlayBits, rep.Units[0].PageImage, c.pageImage)
			}
			if rep.InBytes >= tinyFloor && rep.OutBytes > 2*rep.InBytes {
				t.Errorf("%d → %d bytes: more than 2×", rep.InBytes, rep.OutBytes)
			}
			if g := rep.OutBytes - rep.InBytes; g > tinyFloor && !c.pageImage {
				t.Errorf("the mark added %d bytes, more than %d", g, tinyFloor)
			}
			if txt := mutoolText(t, dst); !strings.Contains(txt, strings.Fields(mutoolText(t, src))[0]) {
				t.Errorf("the marked file's text lost its first word: %.80q", txt)
			}
			resaved := filepath.Join(t.TempDir(), "resaved.pdf")
			if out, err := exec.CommandContext(t.Context(), "qpdf", dst, resaved).CombinedOutput(); err != nil {
				t.Fatalf("qpdf: %v: %s", err, out)
			}
			if d, err := a.Detect(t.Context(), resaved); err != nil || !d.Watermarked || d.WatermarkID == nil || *d.WatermarkID != id.String() {
				t.Errorf("re-saved, structural layer: %+v, %v", d, err)
			}
			for name, f := range map[string]string{"as written": dst, "re-saved": resaved, "rasterised, JPEG q75": rasterJPEG(t, dst)} {
				d, err := a.DetectRendered(t.Context(), f)
				if err != nil {
					t.Fatal(err)
				}
				u := d.Units[0]
				if !u.Watermarked || u.WatermarkID == nil || *u.WatermarkID != id.String() {
					t.Errorf("%s: the page's mark is not found: %+v", name, u)
				}
			}
		})
	}
}

// blockStd is the standard deviation of the means of r×r-pixel blocks of g: the part of a grain the eye can
// see at a distance, where single pixels blur together.
func blockStd(g grayPage, r int) float64 {
	var sum, sq, n float64
	for y := 0; y+r <= g.Height; y += r {
		for x := 0; x+r <= g.Width; x += r {
			var s float64
			for j := range r {
				for i := range r {
					s += float64(g.Pix[(y+j)*g.Width+x+i])
				}
			}
			s /= float64(r * r)
			sum += s
			sq += s * s
			n++
		}
	}
	return math.Sqrt(sq/n - (sum/n)*(sum/n))
}

// TestBinaryLevelsKeepTheGrainFine: binary levels (error-diffused, binaryLevels) darken a white page by at
// most the strength, as 4-bit levels do, and the low-frequency part of their grain (8×8-pixel block means of a
// 96-dpi rendering, a screenshot at 100%) stays within 1.5 times the 4-bit one's (1.42× on Letter, 1.35× on
// 300×350 points). Binary levels by the sign of the filtered chips, at three quarters of the strength
// for the same overall grain, had 2.5 times the 4-bit low-frequency part.
func TestBinaryLevelsKeepTheGrainFine(t *testing.T) {
	a := testAdapter(t)
	for _, box := range []string{"[0 0 612 792]", "[0 0 300 350]"} {
		src := writeTemp(t, "white.pdf", whitePage(box))
		var low [2]float64
		for i, opt := range []Options{{PageImage: true}, {PageImage: true, Binary: true}} {
			dst := filepath.Join(t.TempDir(), "marked.pdf")
			rep, err := a.Embed(t.Context(), src, dst, testID("grain"), opt)
			if err != nil {
				t.Fatal(err)
			}
			if want := 4 - 3*i; rep.OverlayBits != want {
				t.Fatalf("%+v: %d-bit overlay, want %d", opt, rep.OverlayBits, want)
			}
			g := drawGray(t, dst, 96)
			for _, p := range g.Pix {
				if int(p) < 255-DefaultStrength {
					t.Fatalf("%s %+v: a pixel darkened to %d, beyond the strength of %d levels", box, opt, p, int(DefaultStrength))
				}
			}
			low[i] = blockStd(g, 8)
		}
		t.Logf("%s: low-frequency grain %.3f levels with 4 bits, %.3f with binary levels", box, low[0], low[1])
		if low[0] < 0.03 {
			t.Fatalf("%s: low-frequency grain %.3f levels with 4 bits: the overlay is not drawn", box, low[0])
		}
		if low[1] > 1.5*low[0] {
			t.Errorf("%s: the binary levels' low-frequency grain is %.3f levels, above 1.5 times the 4-bit %.3f", box, low[1], low[0])
		}
	}
}
