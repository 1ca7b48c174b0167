package codec

import (
	"image"
	"testing"
)

func grayOf(img *image.NRGBA) *image.Gray {
	b := img.Bounds()
	g := image.NewGray(b)
	y := lumaOf(img)
	for i, v := range y.pix {
		g.Pix[i] = uint8(v + 0.5)
	}
	return g
}

func TestLumaPlaneAPI(t *testing.T) {
	c := testCodec(t)
	id := ID{0xab, 0xcd}
	g := grayOf(naturalImage(640, 480, 31))
	// Embed into an 8-bit plane with a stride wider than the image.
	stride := 700
	buf := make([]uint8, stride*480)
	for y := 0; y < 480; y++ {
		copy(buf[y*stride:y*stride+640], g.Pix[y*640:(y+1)*640])
	}
	// Strength 2: frames of a video are re-encoded hard (JPEG 30-40 here) and combined, so they are marked
	// stronger than the still-image default.
	rep, err := c.EmbedLuma8(buf, 640, 480, stride, id, EmbedOptions{PSNR: 40, Strength: 2})
	if err != nil {
		t.Fatal(err)
	}
	if rep.PSNR < 39.9 {
		t.Fatalf("PSNR %.2f", rep.PSNR)
	}
	if d := c.DetectLuma8(buf, 640, 480, stride); !d.Watermarked || *d.WatermarkID != id.String() {
		t.Fatalf("DetectLuma8: %+v", d)
	}
	// The same plane as a Gray image goes through Detect.
	out := image.NewGray(image.Rect(0, 0, 640, 480))
	for y := 0; y < 480; y++ {
		copy(out.Pix[y*640:(y+1)*640], buf[y*stride:])
	}
	if d := c.Detect(out); !d.Watermarked || *d.WatermarkID != id.String() {
		t.Fatalf("Detect on gray: %+v", d)
	}
	// Soft combining of frames: three JPEG-damaged copies decode together.
	var frames []FrameSoft
	for q := 30; q <= 40; q += 5 {
		j := attackJPEG(out, q)
		y := lumaOf(j)
		frames = append(frames, c.AnalyzeLuma(LumaPlane{Pix: y.pix, Width: y.w, Height: y.h, Stride: y.w}))
	}
	if d := c.CombineFrames(frames); !d.Watermarked || *d.WatermarkID != id.String() {
		t.Fatalf("CombineFrames: %+v", d)
	}
	if d := c.CombineFrames(nil); d.Watermarked || d.WatermarkID != nil {
		t.Fatal("empty combination detected a mark")
	}
	if _, err := c.EmbedLuma(LumaPlane{Pix: make([]float32, 10), Width: 300, Height: 300, Stride: 300}, id,
		EmbedOptions{}); err == nil {
		t.Fatal("short buffer accepted")
	}
}
