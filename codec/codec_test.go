package codec

import (
	"errors"
	"image"
	"image/color"
	"math"
	"testing"
)

var testKey = []byte("filigrane-test-key-0123456789abc")

func testCodec(t testing.TB) *Codec {
	t.Helper()
	c, err := New(testKey)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestEmbedDetectClean(t *testing.T) {
	c := testCodec(t)
	id, _ := IDFromJSON([]byte(`{"customer":"acme","asset":42}`))
	img := naturalImage(1024, 768, 11)
	marked, rep, err := c.Embed(img, id, EmbedOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.PSNR < MinPSNR || rep.Strength <= 0 || rep.Strength > DefaultStrength {
		t.Fatalf("PSNR %.2f (floor %.0f), strength %.2f", rep.PSNR, MinPSNR, rep.Strength)
	}
	if _, ok := marked.(*image.NRGBA); !ok {
		t.Fatalf("result is %T", marked)
	}
	if marked.Bounds() != img.Bounds() {
		t.Fatal("bounds changed")
	}
	d := c.Detect(marked)
	if !d.Watermarked || d.WatermarkID == nil || *d.WatermarkID != id.String() {
		t.Fatalf("detection failed: %+v", d)
	}
	if d.Confidence < 0.9 || len(d.Units) != 1 || !d.Units[0].Watermarked {
		t.Fatalf("bad confidence or units: %+v", d)
	}
	if got, ok := c.Snap(d, []ID{{1}, id}); !ok || got != id {
		t.Fatal("snap did not return the decoded id")
	}
	// Without informed embedding the mark is still read.
	fast, _, err := c.Embed(img, id, EmbedOptions{Uninformed: true})
	if err != nil {
		t.Fatal(err)
	}
	if d := c.Detect(fast); !d.Watermarked || *d.WatermarkID != id.String() {
		t.Fatalf("uninformed embedding not detected: %+v", d)
	}
	// Another key must not read the mark.
	other, _ := New([]byte("another-deployment-key-000000000"))
	if d := other.Detect(marked); d.Watermarked {
		t.Fatal("a different key detected the mark")
	}
}

func TestUnmarkedImages(t *testing.T) {
	c := testCodec(t)
	flat := image.NewGray(image.Rect(0, 0, 600, 400))
	black := image.NewNRGBA(image.Rect(0, 0, 300, 300))
	tiny := image.NewGray(image.Rect(0, 0, 3, 2))
	mid := image.NewUniform(color.Gray{128})
	for name, img := range map[string]image.Image{
		"natural": naturalImage(800, 800, 3), "natural2": naturalImage(1024, 640, 4), "flat": flat, "black": black,
		"tiny": tiny, "empty": image.NewRGBA(image.Rectangle{}), "uniform": &boundedUniform{mid, image.Rect(0, 0, 128, 128)},
	} {
		d := c.Detect(img)
		if d.Watermarked || d.WatermarkID != nil || len(d.Units) != 1 || d.Units[0].Watermarked {
			t.Errorf("%s: %+v", name, d)
		}
	}
}

type boundedUniform struct {
	*image.Uniform
	r image.Rectangle
}

func (b *boundedUniform) Bounds() image.Rectangle { return b.r }

func TestEmbedRejects(t *testing.T) {
	c := testCodec(t)
	img := naturalImage(300, 300, 5)
	for _, p := range []float64{37.9, 48.1, -1} {
		if _, _, err := c.Embed(img, ID{}, EmbedOptions{PSNR: p}); err == nil {
			t.Errorf("PSNR %.1f accepted", p)
		}
	}
	for _, s := range []float64{0.2, 4.1, -1, math.NaN()} {
		if _, _, err := c.Embed(img, ID{}, EmbedOptions{Strength: s}); err == nil {
			t.Errorf("strength %.1f accepted", s)
		}
	}
	if _, _, err := c.Embed(naturalImage(255, 400, 5), ID{}, EmbedOptions{}); !errors.Is(err, ErrTooSmall) {
		t.Errorf("small image: %v", err)
	}
	if _, err := New([]byte("short")); err == nil {
		t.Error("short key accepted")
	}
}

func TestEmbedKeepsAlphaAndDepth(t *testing.T) {
	c := testCodec(t)
	src := naturalImage(512, 512, 6)
	for i := 3; i < len(src.Pix); i += 4 {
		src.Pix[i] = uint8(i / 4 % 256)
	}
	out, _, err := c.Embed(src, ID{7}, EmbedOptions{PSNR: 40})
	if err != nil {
		t.Fatal(err)
	}
	o := out.(*image.NRGBA)
	for i := 3; i < len(src.Pix); i += 4 {
		if o.Pix[i] != src.Pix[i] {
			t.Fatal("alpha changed")
		}
	}
	deep := image.NewNRGBA64(image.Rect(0, 0, 512, 512))
	for y := 0; y < 512; y++ {
		for x := 0; x < 512; x++ {
			r, g, b, _ := src.At(x, y).RGBA()
			deep.SetNRGBA64(x, y, color.NRGBA64{uint16(r), uint16(g), uint16(b), 0xffff})
		}
	}
	out16, rep, err := c.Embed(deep, ID{7}, EmbedOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := out16.(*image.NRGBA64); !ok {
		t.Fatalf("16-bit input gave %T", out16)
	}
	if rep.PSNR < DefaultPSNR {
		t.Fatalf("PSNR %.2f", rep.PSNR)
	}
	if d := c.Detect(out16); !d.Watermarked || *d.WatermarkID != (ID{7}).String() {
		t.Fatalf("16-bit detection failed: %+v", d)
	}
}

func TestDetectDeterministic(t *testing.T) {
	c := testCodec(t)
	img, _, _ := c.Embed(naturalImage(600, 500, 8), ID{9}, EmbedOptions{})
	a, b := c.Detect(img), c.Detect(img)
	if a.Confidence != b.Confidence || a.Watermarked != b.Watermarked {
		t.Fatal("detection is not deterministic")
	}
}

func TestDetectReducedLargeImage(t *testing.T) {
	if testing.Short() {
		t.Skip("large image")
	}
	c := testCodec(t)
	// Exercise the reduced path on a moderate image by comparing with a factor-2 reduction of a marked image.
	marked, _, err := c.Embed(naturalImage(2048, 1536, 41), ID{3}, EmbedOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d := c.detectPlane(lumaReduced(imageRows(marked), 2)); !d.Watermarked || *d.WatermarkID != (ID{3}).String() {
		t.Fatalf("reduced detection failed: %+v", d)
	}
}

func TestConcurrentUse(t *testing.T) {
	c := testCodec(t)
	img, _, err := c.Embed(naturalImage(512, 512, 12), ID{5}, EmbedOptions{})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan Detection, 4)
	for i := 0; i < 4; i++ {
		go func() { done <- c.Detect(img) }()
	}
	for i := 0; i < 4; i++ {
		if d := <-done; !d.Watermarked {
			t.Fatal("concurrent detection failed")
		}
	}
}

func TestOddShapesDoNotPanic(t *testing.T) {
	c := testCodec(t)
	for _, r := range []image.Rectangle{
		image.Rect(0, 0, 1, 1), image.Rect(0, 0, 65, 65), image.Rect(0, 0, 4000, 64), image.Rect(0, 0, 64, 3000),
		image.Rect(0, 0, 300, 2500), image.Rect(-50, -70, 200, 180), image.Rect(10, 10, 129, 77),
	} {
		img := image.NewNRGBA(r)
		for i := range img.Pix {
			img.Pix[i] = uint8(i * 7 % 251)
		}
		if d := c.Detect(img); d.Watermarked || d.WatermarkID != nil || len(d.Units) != 1 {
			t.Errorf("%v: %+v", r, d)
		}
	}
	// A long strip and an offset origin embed and detect.
	strip := naturalImage(2400, 300, 13)
	out, _, err := c.Embed(strip, ID{8}, EmbedOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d := c.Detect(out); !d.Watermarked || *d.WatermarkID != (ID{8}).String() {
		t.Errorf("strip: %+v", d)
	}
	shifted := naturalImage(600, 500, 14)
	shifted.Rect = shifted.Rect.Add(image.Pt(-40, 25))
	out, _, err = c.Embed(shifted, ID{9}, EmbedOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if out.Bounds() != shifted.Rect {
		t.Fatalf("bounds %v want %v", out.Bounds(), shifted.Rect)
	}
	if d := c.Detect(out); !d.Watermarked || *d.WatermarkID != (ID{9}).String() {
		t.Errorf("offset origin: %+v", d)
	}
}
