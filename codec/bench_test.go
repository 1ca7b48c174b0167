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
