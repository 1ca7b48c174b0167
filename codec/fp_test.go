package codec

import (
	"fmt"
	"image"
	"math/rand/v2"
	"os"
	"testing"
)

// TestFalsePositivesExplore runs Detect on many unmarked procedural images under the attack list and counts hits
// (expected: none) and the confidence range. It runs only with FILIGRANE_EXPLORE=1.
func TestFalsePositivesExplore(t *testing.T) {
	if os.Getenv("FILIGRANE_EXPLORE") == "" {
		t.Skip("set FILIGRANE_EXPLORE=1")
	}
	c := testCodec(t)
	rng := rand.New(rand.NewPCG(4, 4))
	hits, n := 0, 0
	var maxConf, sumConf float64
	for seed := uint64(0); seed < 12; seed++ {
		img := image.Image(naturalImage(512+int(seed)*40, 480+int(seed)*30, 1000+seed))
		for _, a := range robustnessAttacks() {
			d := c.Detect(a.f(img, rng))
			n++
			if d.Watermarked || d.WatermarkID != nil {
				hits++
			}
			sumConf += d.Confidence
			maxConf = max(maxConf, d.Confidence)
		}
	}
	fmt.Printf("unmarked detections: %d, hits %d, confidence mean %.3f max %.3f\n", n, hits, sumConf/float64(n), maxConf)
	if hits > 0 {
		t.Fatalf("%d false positives", hits)
	}
}
