package codecbench

import (
	"bytes"
	"context"
	"image/jpeg"
	"testing"

	"filigrane/codec"
	"filigrane/codec/imageio"
	"filigrane/codec/markfile"
)

// BenchmarkEndToEnd12MP is the service's path from the bytes of a 12 MP camera-like JPEG (image/jpeg q90 of the
// memory probe's texture): decode, embed, verify, encode as JPEG q95 4:4:4 or PNG, and the same decode and encode
// without the mark as the baseline. For profiles:
//
//	go test ./bench/codecbench/ -run x -bench EndToEnd12MP -cpu 1 -cpuprofile cpu.out -memprofile mem.out
func BenchmarkEndToEnd12MP(b *testing.B) {
	c, err := codec.New([]byte(codec.DevelopmentKey))
	if err != nil {
		b.Fatal(err)
	}
	var jpg bytes.Buffer
	if err := jpeg.Encode(&jpg, Texture(4000, 3000, 40), &jpeg.Options{Quality: 90}); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for _, f := range []markfile.Format{markfile.JPEG, markfile.PNG} {
		b.Run("mark-"+string(f), func(b *testing.B) {
			for b.Loop() {
				pic, err := imageio.DecodeBytes(jpg.Bytes(), imageio.Limits{})
				if err != nil {
					b.Fatal(err)
				}
				if _, err := markfile.Embed(ctx, c, pic, codec.ID{1, 2, 3}, f, codec.EmbedOptions{}); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("reencode-"+string(f), func(b *testing.B) {
			for b.Loop() {
				pic, err := imageio.DecodeBytes(jpg.Bytes(), imageio.Limits{})
				if err != nil {
					b.Fatal(err)
				}
				var out bytes.Buffer
				if f == markfile.PNG {
					err = imageio.EncodePNG(&out, pic.Image, pic.Metadata)
				} else {
					err = imageio.EncodeJPEG(&out, pic.Image, markfile.JPEGQuality, pic.Metadata)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
