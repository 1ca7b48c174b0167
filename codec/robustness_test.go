package codec

import (
	"image"
	"math/rand/v2"
	"testing"
)

// TestRobustness embeds into procedural 1024×1024 images and requires exact id recovery after each attack of the
// issue's target list. The full table over photos is TestExplore (FILIGRANE_EXPLORE=1) and `filigrane bench`.
func TestRobustness(t *testing.T) {
	c := testCodec(t)
	attacks := []struct {
		name string
		f    func(image.Image, *rand.Rand) image.Image
	}{
		{"jpeg75", func(i image.Image, _ *rand.Rand) image.Image { return attackJPEG(i, 75) }},
		{"jpeg50", func(i image.Image, _ *rand.Rand) image.Image { return attackJPEG(i, 50) }},
		{"resize0.5", func(i image.Image, _ *rand.Rand) image.Image { return attackResize(i, 0.5) }},
		{"crop0.71", func(i image.Image, r *rand.Rand) image.Image { return attackCrop(i, 0.71, r.Float64(), r.Float64()) }},
		{"rot2", func(i image.Image, _ *rand.Rand) image.Image { return attackRotate(i, 2) }},
		{"flip", func(i image.Image, _ *rand.Rand) image.Image { return attackFlip(i) }},
		{"bright1.3", func(i image.Image, _ *rand.Rand) image.Image { return attackLevels(i, 1.3, 1) }},
		{"contrast0.7", func(i image.Image, _ *rand.Rand) image.Image { return attackLevels(i, 1, 0.7) }},
	}
	seeds := []uint64{21, 22}
	if testing.Short() {
		seeds = seeds[:1]
	}
	rng := rand.New(rand.NewPCG(9, 9))
	for _, seed := range seeds {
		var id ID
		id[0], id[1] = byte(seed), 0xc3
		marked, _, err := c.Embed(naturalImage(1024, 1024, seed), id, EmbedOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range attacks {
			d := c.Detect(a.f(marked, rng))
			if !d.Watermarked || d.WatermarkID == nil || *d.WatermarkID != id.String() {
				t.Errorf("seed %d, %s: id not recovered (confidence %.3f)", seed, a.name, d.Confidence)
			}
		}
	}
}
