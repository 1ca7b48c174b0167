package markfile

import (
	"bytes"
	"context"
	"errors"
	"image"
	"math/rand/v2"
	"testing"

	"filigrane/codec"
	"filigrane/codec/accel"
	"filigrane/codec/imageio"
)

// lumaDevice records the image a detection loads on it, packed, and then fails: what the read-back check hands a
// device, without one.
type lumaDevice struct {
	got    accel.Image
	loaded []byte
}

var errNoSurface = errors.New("lumaDevice loads no surface")

func (d *lumaDevice) Load(_ context.Context, in accel.Image) (accel.Surface, error) {
	d.got = in
	bpp := 4
	if in.Format == accel.Gray8 {
		bpp = 1
	}
	d.loaded = nil
	for y := 0; y < in.Height; y++ {
		d.loaded = append(d.loaded, in.Pix[y*in.Stride:y*in.Stride+in.Width*bpp]...)
	}
	return nil, errNoSurface
}

// noisyJPEG is a w×h photo-like JPEG of quality 90 (a gradient under grain).
func noisyJPEG(t testing.TB, w, h int) []byte {
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range img.Pix {
		img.Pix[i] = uint8(60 + (i/4%w)*100/w + rng.IntN(30))
	}
	var buf bytes.Buffer
	if err := imageio.EncodeJPEG(&buf, img, 90, imageio.Metadata{}); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// The read-back check of a JPEG output on a device loads the Y plane of the decoded file, within the detection
// region (the luma the CPU check reads), and a device failure is codec.ErrDevice.
func TestReadBackLoadsTheYPlaneOnADevice(t *testing.T) {
	ctx := context.Background()
	for _, size := range [][2]int{{640, 480}, {2200, 300}} {
		data := noisyJPEG(t, size[0], size[1])
		dev := &lumaDevice{}
		if _, err := readBack(ctx, testCodec(t), dev, nil, data, JPEG); !errors.Is(err, codec.ErrDevice) ||
			!errors.Is(err, errNoSurface) {
			t.Fatalf("%v: %v, want the device's failure as codec.ErrDevice", size, err)
		}
		img, _, err := imageio.DecodeForAnalysis(ctx, data, imageio.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		y := img.(*image.YCbCr)
		r := codec.DetectRegion(y.Bounds())
		var want []byte
		for j := r.Min.Y; j < r.Max.Y; j++ {
			want = append(want, y.Y[y.YOffset(r.Min.X, j):y.YOffset(r.Max.X-1, j)+1]...)
		}
		if dev.got.Format != accel.Gray8 || dev.got.Width != r.Dx() || dev.got.Height != r.Dy() || !bytes.Equal(dev.loaded, want) {
			t.Errorf("%v: the device loaded a %dx%d image of format %d (%d bytes), want the %dx%d Y plane", size,
				dev.got.Width, dev.got.Height, dev.got.Format, len(dev.loaded), r.Dx(), r.Dy())
		}
	}
}

// BenchmarkReadBackOnDevice12MP: the host's work in the read-back check of a 12 MP JPEG output on a device before
// the device's first call (decoding; the device here fails at once). `go test ./codec/markfile -run x -bench
// ReadBackOnDevice12MP -cpu 1 -benchtime 5x`.
func BenchmarkReadBackOnDevice12MP(b *testing.B) {
	data := noisyJPEG(b, 4000, 3000)
	c, err := codec.New([]byte("markfile-test-key-0123456789abcd"))
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := readBack(context.Background(), c, &lumaDevice{}, nil, data, JPEG); !errors.Is(err, errNoSurface) {
			b.Fatal(err)
		}
	}
}
