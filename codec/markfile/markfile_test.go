package markfile

import (
	"bytes"
	"context"
	"errors"
	"image"
	"image/color"
	"image/png"
	"math/rand/v2"
	"slices"
	"testing"

	"filigrane/codec"
	"filigrane/codec/imageio"
)

func testCodec(t *testing.T) *codec.Codec {
	t.Helper()
	c, err := codec.New([]byte("markfile-test-key-0123456789abcd"))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// picture returns a decoded picture of a textured w×h image, as imageio would hand it over.
func picture(t *testing.T, w, h int, alpha uint8) *imageio.Picture {
	t.Helper()
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	rng := rand.New(rand.NewPCG(1, uint64(w)))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			v := uint8(60 + x*100/w + rng.IntN(60))
			img.SetNRGBA(x, y, color.NRGBA{v, v / 2, 255 - v, alpha})
		}
	}
	// The fastest compression: the same pixels reach the decoder, and deflating this noise at the default level
	// was an eighth of the package's CPU.
	var buf bytes.Buffer
	if err := (&png.Encoder{CompressionLevel: png.BestSpeed}).Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	pic, err := imageio.DecodeBytes(buf.Bytes(), imageio.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	return pic
}

// The returned file is a PNG from which the mark reads back after a real decode.
func TestEmbedReturnsVerifiedPNG(t *testing.T) {
	c := testCodec(t)
	id, _ := codec.IDFromJSON([]byte(`{"file":1}`))
	res, err := Embed(context.Background(), c, picture(t, 640, 480, 255), id, PNG, codec.EmbedOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Attempts != 1 || res.Format != PNG || res.Report.PSNR < codec.MinPSNR {
		t.Fatalf("attempts %d, format %s, PSNR %.1f", res.Attempts, res.Format, res.Report.PSNR)
	}
	pic, err := imageio.DecodeBytes(res.Data, imageio.Limits{})
	if err != nil || pic.Format != "png" {
		t.Fatalf("output does not decode as PNG: %v", err)
	}
	if d := c.Detect(pic.Image); !d.Watermarked || *d.WatermarkID != id.String() {
		t.Fatalf("mark not read from the returned file: %+v", d)
	}
}

// JPEG output (4:4:4, quality 95) carries the mark, as read back by a real decode, and refuses transparency.
func TestEmbedReturnsVerifiedJPEG(t *testing.T) {
	c := testCodec(t)
	id, _ := codec.IDFromJSON([]byte(`{"file":2}`))
	res, err := Embed(context.Background(), c, picture(t, 640, 480, 255), id, JPEG, codec.EmbedOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pic, err := imageio.DecodeBytes(res.Data, imageio.Limits{})
	if err != nil || pic.Format != "jpeg" || res.Format.Ext() != "jpg" || res.Format.ContentType() != "image/jpeg" {
		t.Fatalf("output: %v, format %q", err, pic.Format)
	}
	if d := c.Detect(pic.Image); !d.Watermarked || *d.WatermarkID != id.String() {
		t.Fatalf("mark not read from the returned JPEG: %+v", d)
	}
	if _, err := Embed(context.Background(), c, picture(t, 640, 480, 128), id, JPEG, codec.EmbedOptions{}); !errors.Is(err, ErrAlpha) {
		t.Fatalf("transparent image as JPEG: %v", err)
	}
}

// The check of a JPEG (luma decoded alone, row by row) gives exactly the detection the service makes on the
// stored file: Detect on the image DecodeForAnalysis returns, cropped by DetectRegion. Checked on marks that read
// back and marks too weak to (the verdict must agree both ways), and on an image longer than MaxDetectAspect.
func TestJPEGCheckIsTheServiceDetection(t *testing.T) {
	c := testCodec(t)
	ctx := context.Background()
	id, _ := codec.IDFromJSON([]byte(`{"file":4}`))
	read, unread := 0, 0
	for _, tc := range []struct {
		w, h     int
		strength float64
		quality  int
	}{{640, 480, 1, 95}, {600, 400, 0.25, 95}, {640, 480, 1, 30}, {2200, 300, 1, 95}} {
		pic := picture(t, tc.w, tc.h, 255)
		marked, _, err := c.Embed(pic.Image, id, codec.EmbedOptions{Strength: tc.strength})
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if err := imageio.EncodeJPEG(&buf, marked, tc.quality, imageio.Metadata{}); err != nil {
			t.Fatal(err)
		}
		got, err := readBack(ctx, c, nil, nil, buf.Bytes(), JPEG)
		if err != nil {
			t.Fatal(err)
		}
		img, _, err := imageio.DecodeForAnalysis(ctx, buf.Bytes(), imageio.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		sub := img.(*image.YCbCr).SubImage(codec.DetectRegion(img.Bounds()))
		want := c.Detect(sub)
		if got.Watermarked != want.Watermarked || got.Confidence != want.Confidence || !slices.Equal(got.Soft, want.Soft) ||
			(got.WatermarkID == nil) != (want.WatermarkID == nil) || (got.WatermarkID != nil && *got.WatermarkID != *want.WatermarkID) {
			t.Errorf("%dx%d strength %g q%d: check %v %.6f, service detection %v %.6f", tc.w, tc.h, tc.strength,
				tc.quality, got.Watermarked, got.Confidence, want.Watermarked, want.Confidence)
		}
		if want.Watermarked {
			read++
		} else {
			unread++
		}
	}
	if read == 0 || unread == 0 {
		t.Fatalf("the cases must include marks that read back (%d) and marks that do not (%d)", read, unread)
	}
}

// Lossless WebP output carries the mark and keeps transparency.
func TestEmbedReturnsVerifiedWebP(t *testing.T) {
	c := testCodec(t)
	id, _ := codec.IDFromJSON([]byte(`{"file":3}`))
	res, err := Embed(context.Background(), c, picture(t, 640, 480, 200), id, WebP, codec.EmbedOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pic, err := imageio.DecodeBytes(res.Data, imageio.Limits{})
	if err != nil || pic.Format != "webp" || !pic.HasAlpha {
		t.Fatalf("output: %v, format %q, alpha %v", err, pic.Format, pic.HasAlpha)
	}
	if d := c.Detect(pic.Image); !d.Watermarked || *d.WatermarkID != id.String() {
		t.Fatalf("mark not read from the returned WebP: %+v", d)
	}
}

// An image that cannot hold a mark (every pixel transparent, which the codec leaves untouched) fails with
// ErrNotReadable after the stronger retries, instead of being returned unmarked. 256x256, the smallest that
// holds a mark (the same picture opaque is marked): each retry's check reads an unmarked image, every
// hypothesis, and at 512x512 the test took 1 CPU-second.
func TestEmbedFailsWhenMarkDoesNotReadBack(t *testing.T) {
	c := testCodec(t)
	if _, err := Embed(context.Background(), c, picture(t, 256, 256, 255), codec.ID{9}, PNG, codec.EmbedOptions{}); err != nil {
		t.Fatalf("the opaque picture: %v", err)
	}
	_, err := Embed(context.Background(), c, picture(t, 256, 256, 0), codec.ID{9}, PNG, codec.EmbedOptions{})
	if !errors.Is(err, ErrNotReadable) {
		t.Fatalf("got %v, want ErrNotReadable", err)
	}
}

func TestParseFormat(t *testing.T) {
	for in, want := range map[string]Format{"": PNG, "png": PNG, "jpeg": JPEG, "jpg": JPEG, "webp": WebP} {
		if f, err := ParseFormat(in); err != nil || f != want {
			t.Errorf("%q: %v %v", in, f, err)
		}
	}
	if _, err := ParseFormat("gif"); err == nil {
		t.Error("gif accepted")
	}
}

// TestChunks: the encoder output collector gives back exactly what was written, across chunk boundaries.
func TestChunks(t *testing.T) {
	var c chunks
	var want bytes.Buffer
	rng := rand.New(rand.NewPCG(2, 3))
	for _, n := range []int{0, 1, 100, chunkSize - 101, 1, chunkSize, 3*chunkSize + 7, 5} {
		p := make([]byte, n)
		for i := range p {
			p[i] = byte(rng.IntN(256))
		}
		if k, err := c.Write(p); k != n || err != nil {
			t.Fatalf("Write(%d) = %d, %v", n, k, err)
		}
		want.Write(p)
	}
	if got := c.bytes(); !bytes.Equal(got, want.Bytes()) || len(got) != cap(got) {
		t.Fatalf("got %d bytes (cap %d), want %d", len(got), cap(got), want.Len())
	}
	var empty chunks
	if got := empty.bytes(); len(got) != 0 {
		t.Fatalf("empty: %d bytes", len(got))
	}
}
