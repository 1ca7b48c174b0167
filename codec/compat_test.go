package codec

import (
	"image"
	"image/color"
	"math/rand/v2"
	"testing"
)

// TestMarksOfEarlierReleasesStillRead makes marks the way the first perceptual codec did (fine layer only, flat
// floor 0.6 levels: profileV1) and requires the current detector to read them after the attacks a user applies
// most, so that adding the coarse layer and its detection hypotheses did not orphan marks already issued.
func TestMarksOfEarlierReleasesStillRead(t *testing.T) {
	c := testCodec(t)
	id, _ := IDFromJSON([]byte(`{"test":"compat-v1"}`))
	old := profileV1
	marked, _, err := c.Embed(naturalImage(1024, 768, 31), id, EmbedOptions{profile: &old})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 1))
	for name, img := range map[string]image.Image{
		"clean":    marked,
		"jpeg75":   attackJPEG(marked, 75),
		"crop0.71": attackCrop(marked, 0.71, rng.Float64(), rng.Float64()),
		"rot2":     attackRotate(marked, 2),
	} {
		if d := c.Detect(img); !d.Watermarked || *d.WatermarkID != id.String() {
			t.Errorf("%s: a mark of the earlier profile was not read: %+v", name, d)
		}
	}
}

// TestCoarseLayerAloneIsRead marks a smooth gradient with the fine layer's flat floor at zero, so that on its flat
// parts only the coarse layer carries the mark, and requires the detector's coarse hypothesis to read it, clean
// and after JPEG 75.
func TestCoarseLayerAloneIsRead(t *testing.T) {
	c := testCodec(t)
	id, _ := IDFromJSON([]byte(`{"test":"coarse"}`))
	const w, h = 1024, 768
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			u, v := float64(x)/w, float64(y)/h
			img.SetNRGBA(x, y, color.NRGBA{uint8(40 + 120*u + 0.5), uint8(90 + 60*v + 0.5), uint8(150 + 50*u*v + 0.5), 255})
		}
	}
	pr := maskProfile{coarseFloor: profileImage.coarseFloor * 2, coarseAct: profileImage.coarseAct}
	marked, _, err := c.Embed(img, id, EmbedOptions{profile: &pr})
	if err != nil {
		t.Fatal(err)
	}
	y := lumaOf(marked)
	pyr := buildPyramid(y, 16)
	if at := c.tryGeometry(cpuSampler{c: c, pyr: pyr}, nominalAffine(w, h)); at.res.ok {
		t.Fatalf("the fine geometry read a mark that only the coarse layer should carry")
	}
	for name, m := range map[string]image.Image{"clean": marked, "jpeg75": attackJPEG(marked, 75)} {
		if d := c.Detect(m); !d.Watermarked || *d.WatermarkID != id.String() {
			t.Errorf("%s: coarse layer not read: %+v", name, d)
		}
	}
}
