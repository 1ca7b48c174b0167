package codec

import (
	"image"
	"image/color"
	"math"
	"math/rand/v2"
	"sort"
	"testing"
)

// TestInvisibilityAndDetection guards both sides of the perceptual shaping: on a smooth gradient (the sky or
// flat artwork case) the flattest tenth of the 32×32 blocks changes by at most 0.8 levels RMS and no pixel by
// more than 2 levels, while the mark is still read, also after JPEG 50 (through the coarse layer: the fine layer
// alone, profileV1, is lost there already at JPEG 75); on a noise texture the mark takes far more energy (that is
// where it hides) and survives JPEG 75, with the PSNR floor respected.
func TestInvisibilityAndDetection(t *testing.T) {
	c := testCodec(t)
	id, _ := IDFromJSON([]byte(`{"test":"invisibility"}`))
	const w, h = 1024, 768
	gradient := image.NewNRGBA(image.Rect(0, 0, w, h))
	noise := image.NewNRGBA(image.Rect(0, 0, w, h))
	rng := rand.New(rand.NewPCG(4, 5))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			u, v := float64(x)/w, float64(y)/h
			gradient.SetNRGBA(x, y, color.NRGBA{uint8(60 + 90*v + 0.5), uint8(110 + 70*u*v + 0.5), uint8(200 + 40*u + 0.5), 255})
			g := uint8(128 + 90*(rng.Float64()-0.5))
			noise.SetNRGBA(x, y, color.NRGBA{g, g, g, 255})
		}
	}

	markedG, repG, err := c.Embed(gradient, id, EmbedOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mg := markedG.(*image.NRGBA)
	flat, worst := flatRMS(gradient, mg)
	t.Logf("gradient: PSNR %.1f dB, flattest-10%% RMS %.2f levels, max change %.1f", repG.PSNR, flat, worst)
	if flat > 0.8 || worst > 2 {
		t.Errorf("gradient: flat-region RMS %.2f (max 0.8), largest luma change %.1f (max 2)", flat, worst)
	}
	if d := c.Detect(mg); !d.Watermarked || *d.WatermarkID != id.String() {
		t.Errorf("gradient: mark not read: %+v", d)
	}
	if d := c.Detect(attackJPEG(mg, 50)); !d.Watermarked || *d.WatermarkID != id.String() {
		t.Errorf("gradient: mark not read after JPEG 50: %+v", d)
	}

	markedN, repN, err := c.Embed(noise, id, EmbedOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mn := markedN.(*image.NRGBA)
	rmsN := lumaRMS(noise, mn)
	t.Logf("noise: PSNR %.1f dB, RMS luma change %.2f levels", repN.PSNR, rmsN)
	if repN.PSNR < MinPSNR || rmsN < 2*flat || rmsN < 1 {
		t.Errorf("noise: PSNR %.1f dB, RMS change %.2f: the texture should carry far more than the gradient (%.2f)",
			repN.PSNR, rmsN, flat)
	}
	if d := c.Detect(attackJPEG(mn, 75)); !d.Watermarked || *d.WatermarkID != id.String() {
		t.Errorf("noise: mark not read after JPEG 75: %+v", d)
	}
}

// flatRMS is the RMS luma change over the flattest tenth of the 32×32 blocks of a (by luma standard deviation),
// and the largest luma change anywhere.
func flatRMS(a, b *image.NRGBA) (rms, worst float64) {
	type blk struct{ x, y, std float64 }
	var blocks []blk
	la, lb := lumaOf(a), lumaOf(b)
	for y0 := 0; y0+32 <= la.h; y0 += 32 {
		for x0 := 0; x0+32 <= la.w; x0 += 32 {
			var s, ss float64
			for y := y0; y < y0+32; y++ {
				for x := x0; x < x0+32; x++ {
					v := float64(la.pix[y*la.w+x])
					s, ss = s+v, ss+v*v
				}
			}
			blocks = append(blocks, blk{float64(x0), float64(y0), ss/1024 - (s/1024)*(s/1024)})
		}
	}
	sort.Slice(blocks, func(i, j int) bool { return blocks[i].std < blocks[j].std })
	k := len(blocks) / 10
	var se float64
	for _, bl := range blocks[:k] {
		for y := int(bl.y); y < int(bl.y)+32; y++ {
			for x := int(bl.x); x < int(bl.x)+32; x++ {
				d := float64(la.pix[y*la.w+x] - lb.pix[y*la.w+x])
				se += d * d
			}
		}
	}
	for i := range la.pix {
		worst = math.Max(worst, math.Abs(float64(la.pix[i]-lb.pix[i])))
	}
	return math.Sqrt(se / float64(k*1024)), worst
}

func lumaRMS(a, b *image.NRGBA) float64 {
	la, lb := lumaOf(a), lumaOf(b)
	var se float64
	for i := range la.pix {
		d := float64(la.pix[i] - lb.pix[i])
		se += d * d
	}
	return math.Sqrt(se / float64(len(la.pix)))
}
