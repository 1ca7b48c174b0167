package codec

import (
	"image"
	"testing"
)

// TestDetectRegionKeepsTheMark marks a 3072×256 strip (12:1) and detects it on the region DetectRegion keeps:
// the top-left 1024×256, a third of the memory of the whole strip's lattice search.
func TestDetectRegionKeepsTheMark(t *testing.T) {
	c := testCodec(t)
	img := naturalImage(3072, 256, 7)
	id, _ := IDFromJSON([]byte(`{"strip":1}`))
	marked, _, err := c.Embed(img, id, EmbedOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r := DetectRegion(marked.Bounds())
	if r != image.Rect(0, 0, 1024, 256) {
		t.Fatalf("region %v", r)
	}
	d := c.Detect(marked.(*image.NRGBA).SubImage(r))
	if !d.Watermarked || *d.WatermarkID != id.String() {
		t.Fatalf("not detected on the region: %+v", d)
	}
	if full, region := DetectMemory(3072, 256), DetectMemory(r.Dx(), r.Dy()); region*2 > full {
		t.Fatalf("region estimate %d not much below the strip's %d", region, full)
	}
}

func TestDetectMemoryBoundedByRegion(t *testing.T) {
	for _, c := range []struct{ w, h int }{{156250, 256}, {256, 156250}, {40000, 1000}, {7000, 5000}, {20000, 15000}} {
		r := DetectRegion(image.Rect(0, 0, c.w, c.h))
		if m := DetectMemory(r.Dx(), r.Dy()); m > 600<<20 {
			t.Errorf("%dx%d: region %v estimated at %d MB", c.w, c.h, r, m>>20)
		}
	}
	// The estimate tracks the measured 2.3 GB of the uncropped extreme strip.
	if m := DetectMemory(156250, 256); m < 2<<30 {
		t.Errorf("156250x256 uncropped estimated at %d MB", m>>20)
	}
}
