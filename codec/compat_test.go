package codec

import (
	"image"
	"image/color"
	"math/rand/v2"
	"testing"
)

// TestMarksOfEarlierReleasesStillRead makes marks the way earlier releases did and requires the current detector
// to read them after the attacks a user applies most, so that changing the embedder did not orphan marks already
// issued: the first perceptual codec (fine layer only, flat floor 0.6 levels: profileV1) on a photo-like image,
// and the first coarse layer (bilinear, 0.3 levels: profileCoarseV1) on flat artwork.
func TestMarksOfEarlierReleasesStillRead(t *testing.T) {
	c := testCodec(t)
	for _, tc := range []struct {
		name    string
		profile maskProfile
		img     image.Image
		jpeg    bool
	}{
		{"v1", profileV1, naturalImage(1024, 768, 31), true},
		// Solid fills: JPEG 75 of this image was not read with this profile either (the detector is unchanged).
		{"coarse-v1", profileCoarseV1, flatArt(1280, 800), false},
	} {
		id, _ := IDFromJSON([]byte(`{"test":"compat-` + tc.name + `"}`))
		pr := tc.profile
		marked, _, err := c.Embed(tc.img, id, EmbedOptions{profile: &pr})
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(3, 1))
		attacked := map[string]image.Image{
			"clean":    marked,
			"crop0.71": attackCrop(marked, 0.71, rng.Float64(), rng.Float64()),
			"rot2":     attackRotate(marked, 2),
		}
		if tc.jpeg {
			attacked["jpeg75"] = attackJPEG(marked, 75)
		}
		for name, img := range attacked {
			if d := c.Detect(img); !d.Watermarked || *d.WatermarkID != id.String() {
				t.Errorf("%s, %s: a mark of the earlier profile was not read: %+v", tc.name, name, d)
			}
		}
	}
}

// coarseMarkedGradient is a smooth 1024x768 colour gradient, and a copy marked with id by the coarse layer
// alone (the fine layer's flat floor at zero), so that on its flat parts only the coarse layer carries the mark.
func coarseMarkedGradient(t *testing.T, c *Codec, id ID) (original *image.NRGBA, marked image.Image) {
	t.Helper()
	const w, h = 1024, 768
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			u, v := float64(x)/w, float64(y)/h
			img.SetNRGBA(x, y, color.NRGBA{uint8(40 + 120*u + 0.5), uint8(90 + 60*v + 0.5), uint8(150 + 50*u*v + 0.5), 255})
		}
	}
	// 0.6 levels: with no fine layer to dither the rounding to 8 bits, a weaker coarse layer rounds to nothing.
	pr := maskProfile{coarseFloor: 0.6, coarseAct: profileImage.coarseAct}
	marked, _, err := c.Embed(img, id, EmbedOptions{profile: &pr})
	if err != nil {
		t.Fatal(err)
	}
	return img, marked
}

// TestCoarseLayerAloneIsRead marks a smooth gradient with the fine layer's flat floor at zero, so that on its flat
// parts only the coarse layer carries the mark, and requires the detector's coarse hypothesis to read it, clean
// and after JPEG 75.
func TestCoarseLayerAloneIsRead(t *testing.T) {
	c := testCodec(t)
	id, _ := IDFromJSON([]byte(`{"test":"coarse"}`))
	img, marked := coarseMarkedGradient(t, c, id)
	pyr := buildPyramid(lumaOf(marked), 16)
	if at := c.tryGeometry(cpuSampler{c: c, pyr: pyr}, nominalAffine(img.Rect.Dx(), img.Rect.Dy())); at.res.ok {
		t.Fatalf("the fine geometry read a mark that only the coarse layer should carry")
	}
	for name, m := range map[string]image.Image{"clean": marked, "jpeg75": attackJPEG(marked, 75)} {
		if d := c.Detect(m); !d.Watermarked || *d.WatermarkID != id.String() {
			t.Errorf("%s: coarse layer not read: %+v", name, d)
		}
	}
}
