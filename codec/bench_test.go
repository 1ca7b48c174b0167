package codec

import (
	"image"
	"testing"
)

func benchImage(b *testing.B, w, h int) image.Image {
	b.Helper()
	return naturalImage(w, h, 77)
}

// BenchmarkEmbed1MP: go test ./codec/ -run x -bench Embed1MP -cpu 1
func BenchmarkEmbed1MP(b *testing.B) {
	c := testCodec(b)
	img := benchImage(b, 1024, 1024)
	b.ResetTimer()
	for b.Loop() {
		if _, _, err := c.Embed(img, ID{1}, EmbedOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDetect1MP(b *testing.B) {
	c := testCodec(b)
	marked, _, _ := c.Embed(benchImage(b, 1024, 1024), ID{1}, EmbedOptions{})
	b.ResetTimer()
	for b.Loop() {
		if d := c.Detect(marked); !d.Watermarked {
			b.Fatal("not detected")
		}
	}
}

// BenchmarkDetectRotated1MP measures the slow path: the image was rotated, so the nominal geometry fails and the
// lattice must be estimated.
func BenchmarkDetectRotated1MP(b *testing.B) {
	c := testCodec(b)
	marked, _, _ := c.Embed(benchImage(b, 1024, 1024), ID{1}, EmbedOptions{})
	rotated := attackRotate(marked, 2)
	b.ResetTimer()
	for b.Loop() {
		if d := c.Detect(rotated); !d.Watermarked {
			b.Fatal("not detected")
		}
	}
}

func BenchmarkDetectUnmarked1MP(b *testing.B) {
	c := testCodec(b)
	img := benchImage(b, 1024, 1024)
	b.ResetTimer()
	for b.Loop() {
		c.Detect(img)
	}
}

func BenchmarkEmbed12MP(b *testing.B) {
	c := testCodec(b)
	img := benchImage(b, 4000, 3000)
	b.ResetTimer()
	for b.Loop() {
		if _, _, err := c.Embed(img, ID{1}, EmbedOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDetect12MP(b *testing.B) {
	c := testCodec(b)
	marked, _, _ := c.Embed(benchImage(b, 4000, 3000), ID{1}, EmbedOptions{})
	b.ResetTimer()
	for b.Loop() {
		if d := c.Detect(marked); !d.Watermarked {
			b.Fatal("not detected")
		}
	}
}

// fastImage is a cheap large test image (gradients and a hash texture) for memory and speed runs at 40 MP, where
// naturalImage would take longer than the embedding.
func fastImage(w, h int) *image.NRGBA {
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		row := img.Pix[y*img.Stride:]
		for x := 0; x < w; x++ {
			hsh := uint32(x)*2654435761 ^ uint32(y)*2246822519
			t := uint8(hsh >> 28)
			row[4*x] = uint8(x*200/w) + t
			row[4*x+1] = uint8(y*200/h) + t
			row[4*x+2] = uint8((x+y)*100/(w+h)) + t
			row[4*x+3] = 255
		}
	}
	return img
}

// BenchmarkEmbed40MP checks the memory bound: run with -benchmem, or under /usr/bin/time -v for the peak RSS.
func BenchmarkEmbed40MP(b *testing.B) {
	c := testCodec(b)
	img := fastImage(7744, 5168)
	b.ResetTimer()
	for b.Loop() {
		if _, _, err := c.Embed(img, ID{1}, EmbedOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEmbedLuma1080p is the per-frame cost of marking a 1920×1080 Y plane (video path), with and without
// informed embedding.
func BenchmarkEmbedLuma1080p(b *testing.B) {
	b.Run("informed", func(b *testing.B) { benchEmbedLuma1080p(b, EmbedOptions{}) })
	b.Run("uninformed", func(b *testing.B) { benchEmbedLuma1080p(b, EmbedOptions{Uninformed: true}) })
}

func benchEmbedLuma1080p(b *testing.B, opt EmbedOptions) {
	c := testCodec(b)
	y := lumaOf(benchImage(b, 1920, 1080))
	pix := make([]uint8, len(y.pix))
	b.ResetTimer()
	for b.Loop() {
		for i, v := range y.pix {
			pix[i] = uint8(v)
		}
		if _, err := c.EmbedLuma8(pix, 1920, 1080, 1920, ID{1}, opt); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDetectHostParts12MP measures the host work of a 12 MP detection on a device that the optional device
// passes (accel.BlockScorer, accel.ConvDecoder) take over: per refinement pass, the block scores of the
// downloaded whitened grid and the fit (refine/scores+fit) against the fit alone (refine/fit); per decode,
// decodeSoft (decode/bcjr+check) against the frame check on the device's info LLRs (decode/check).
// go test ./codec/ -run x -bench DetectHostParts12MP -cpu 1
func BenchmarkDetectHostParts12MP(b *testing.B) {
	c := testCodec(b)
	marked, _, _ := c.Embed(benchImage(b, 4000, 3000), ID{1}, EmbedOptions{})
	det, pr := c.ProbeDetect(marked)
	if !det.Watermarked || len(pr.Blocks) == 0 || len(pr.Decodes) == 0 {
		b.Fatal("not detected")
	}
	p := pr.Blocks[0]
	g := waxelGrid{qx0: p.Plan.QX0, qy0: p.Plan.QY0, w: p.Plan.W, h: p.Plan.H, val: p.Val, ok: p.OK}
	a := nominalAffine(4000, 3000)
	b.Run("refine/scores+fit", func(b *testing.B) {
		for b.Loop() {
			bl, scores := c.layout.refineScoresOf(g, p.Radius)
			c.refineOn(bl, scores, a, p.Radius)
		}
	})
	b.Run("refine/fit", func(b *testing.B) {
		bl := newRefineBlocks(g.qx0, g.qy0, g.w, g.h)
		for b.Loop() {
			c.refineOn(bl, p.Scores, a, p.Radius)
		}
	})
	d := pr.Decodes[0]
	b.Run("decode/bcjr+check", func(b *testing.B) {
		for b.Loop() {
			decodeSoft(d.LLR)
		}
	})
	b.Run("decode/check", func(b *testing.B) {
		for b.Loop() {
			decodeInfo(d.LLR, d.Info)
		}
	})
}
