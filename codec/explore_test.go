package codec

import (
	"fmt"
	"image"
	"os"
	"testing"
	"time"
)

// TestExplore prints raw statistics for tuning; it runs only with FILIGRANE_EXPLORE=1.
func TestExplore(t *testing.T) {
	if os.Getenv("FILIGRANE_EXPLORE") == "" {
		t.Skip("set FILIGRANE_EXPLORE=1")
	}
	c, _ := New([]byte("filigrane-development-key-000000"))
	id, _ := IDFromJSON([]byte(`{"a":1}`))
	img := naturalImage(1024, 1024, 1)
	t0 := time.Now()
	marked, rep, err := c.Embed(img, id, EmbedOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("embed %v psnr %.2f\n", time.Since(t0), rep.PSNR)
	attacks := []struct {
		name string
		f    func(image.Image) image.Image
	}{
		{"clean", func(i image.Image) image.Image { return i }},
		{"jpeg75", func(i image.Image) image.Image { return attackJPEG(i, 75) }},
		{"jpeg50", func(i image.Image) image.Image { return attackJPEG(i, 50) }},
		{"jpeg30", func(i image.Image) image.Image { return attackJPEG(i, 30) }},
		{"resize0.5", func(i image.Image) image.Image { return attackResize(i, 0.5) }},
		{"resize2", func(i image.Image) image.Image { return attackResize(i, 2) }},
		{"crop71", func(i image.Image) image.Image { return attackCrop(i, 0.71, 0.3, 0.7) }},
		{"rot2", func(i image.Image) image.Image { return attackRotate(i, 2) }},
		{"rot10", func(i image.Image) image.Image { return attackRotate(i, -10) }},
		{"flip", attackFlip},
		{"bright1.3", func(i image.Image) image.Image { return attackLevels(i, 1.3, 1) }},
		{"contrast0.7", func(i image.Image) image.Image { return attackLevels(i, 1, 0.7) }},
		{"unmarked", func(image.Image) image.Image { return img }},
	}
	for _, a := range attacks {
		if only := os.Getenv("FILIGRANE_ATTACK"); only != "" && only != a.name {
			continue
		}
		att := a.f(marked)
		t0 := time.Now()
		d := c.Detect(att)
		fmt.Printf("%-12s %-5v conf %.3f z? %v  %v\n", a.name, d.Watermarked, d.Confidence, d.WatermarkID != nil && *d.WatermarkID == id.String(), time.Since(t0))
	}
}
