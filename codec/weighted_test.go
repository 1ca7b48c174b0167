package codec

import (
	"image"
	"math/rand/v2"
	"testing"
)

// TestWeightedCoarseReadsPatchyMark covers the case the pilot-weighted fold (weighted.go) is for: only part of
// the image still carries the coarse layer (JPEG left it where a fill sits near a DC quantiser boundary), the
// rest is noise without a mark. A smooth gradient is marked with the coarse layer alone, then the right three quarters of
// the image is replaced by the unmarked gradient plus noise. Folding every waxel with the same weight leaves a
// pilot above the gate but a soft word too noisy to decode; weighting the blocks by their own pilot
// correlation must read the id, and an unmarked copy must still read nothing.
func TestWeightedCoarseReadsPatchyMark(t *testing.T) {
	c := testCodec(t)
	id, _ := IDFromJSON([]byte(`{"test":"weighted"}`))
	img, out := coarseMarkedGradient(t, c, id)
	w, h := img.Rect.Dx(), img.Rect.Dy()
	patchy := out.(*image.NRGBA)
	unmarked := image.NewNRGBA(img.Rect)
	copy(unmarked.Pix, img.Pix)
	rng := rand.New(rand.NewPCG(5, 7))
	for _, dst := range []*image.NRGBA{patchy, unmarked} {
		for y := 0; y < h; y++ {
			for x := w / 4; x < w; x++ {
				o := img.PixOffset(x, y)
				n := rng.IntN(17) - 8
				for ch := range 3 {
					dst.Pix[o+ch] = uint8(max(0, min(255, int(img.Pix[o+ch])+n)))
				}
			}
		}
	}
	pyr := buildPyramid(lumaOf(patchy), 16)
	coarse := c.tryGeometry(cpuSampler{c: c, pyr: pyr}, scaledAffine(coarseFactor*waxelSize(w, h)))
	t.Logf("coarse pilot z %.1f, decoded %v", coarse.pilotZ, coarse.res.ok)
	if !coarse.valid || coarse.res.ok {
		t.Fatalf("want a coarse pilot above the gate that does not decode unweighted (the case under test): z %.1f, decoded %v",
			coarse.pilotZ, coarse.res.ok)
	}
	if d := c.Detect(patchy); !d.Watermarked || *d.WatermarkID != id.String() {
		t.Errorf("patchy coarse layer not read: %+v", d)
	}
	if d := c.Detect(unmarked); d.Watermarked {
		t.Errorf("unmarked copy reported watermarked: %+v", d)
	}
}
