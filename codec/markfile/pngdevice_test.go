package markfile

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"image"
	"testing"

	"filigrane/codec"
	"filigrane/codec/accel"
	"filigrane/codec/imageio"
	"filigrane/codec/imageio/imageiotest"
	"filigrane/codec/pardeflate"
)

// cpuPNGDevice offers a device's PNG pass computed on the CPU (the filter as EncodePNG's, the deflate as
// pardeflate's, which the GPU's kernels match byte for byte): the glue between the encoder and a device,
// without a device. It loads nothing (the codec's passes are not what these tests are about).
type cpuPNGDevice struct {
	calls int
	fail  error
}

func (d *cpuPNGDevice) Load(context.Context, accel.Image) (accel.Surface, error) {
	return nil, errors.New("cpuPNGDevice loads nothing")
}

func (d *cpuPNGDevice) rows(img accel.Image) ([]byte, bool, error) {
	m := &image.NRGBA{Pix: img.Pix, Stride: img.Stride, Rect: image.Rect(0, 0, img.Width, img.Height)}
	var file bytes.Buffer
	if err := imageio.EncodePNG(&file, m, imageio.Metadata{}); err != nil {
		return nil, false, err
	}
	_, rows, err := imageiotest.PNGImageData(file.Bytes())
	const colorType = 8 + 8 + 9 // the signature, IHDR's length and type, then width, height and bit depth
	return rows, file.Bytes()[colorType] == 6, err
}

func (d *cpuPNGDevice) DeflatePNG(_ context.Context, img accel.Image) ([]byte, bool, error) {
	d.calls++
	if d.fail != nil {
		return nil, false, d.fail
	}
	rows, alpha, err := d.rows(img)
	if err != nil {
		return nil, false, err
	}
	return pardeflate.Compress(rows), alpha, nil
}

// A device's PNG pass writes a file of the image's pixels, from a sub-image too (the device sees the rows from
// its origin), with the picture's ICC profile, its chunks but for the image data EncodePNG's; a device failure
// is codec.ErrDevice (the job then runs on the CPU).
func TestEncodeWithDevicePNGPasses(t *testing.T) {
	full := image.NewNRGBA(image.Rect(0, 0, 300, 200))
	for i := range full.Pix {
		full.Pix[i] = byte(i*7 + i/1200)
	}
	for i := 3; i < len(full.Pix); i += 4 {
		full.Pix[i] = 255
	}
	sub := full.SubImage(image.Rect(17, 9, 290, 180)).(*image.NRGBA)
	icc := make([]byte, 132)
	copy(icc[16:], "RGB ")
	pic := &imageio.Picture{Image: sub, Metadata: imageio.Metadata{ICC: icc}}
	var want bytes.Buffer
	if err := imageio.EncodePNG(&want, sub, pic.Metadata); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	dev := &cpuPNGDevice{}
	got, err := encode(ctx, dev, sub, pic, PNG)
	if err != nil || dev.calls != 1 {
		t.Fatalf("deflating device: %v, %d calls", err, dev.calls)
	}
	back, err := imageio.DecodeBytes(got, imageio.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	m, ok := back.Image.(*image.NRGBA)
	if !ok || m.Rect.Dx() != sub.Rect.Dx() || m.Rect.Dy() != sub.Rect.Dy() || !bytes.Equal(back.ICC, icc) {
		t.Fatalf("deflating device: read back %T %v, ICC %d bytes", back.Image, back.Image.Bounds(), len(back.ICC))
	}
	for y := 0; y < m.Rect.Dy(); y++ {
		if !bytes.Equal(m.Pix[y*m.Stride:y*m.Stride+4*m.Rect.Dx()], sub.Pix[y*sub.Stride:y*sub.Stride+4*m.Rect.Dx()]) {
			t.Fatalf("deflating device: row %d differs from the image", y)
		}
	}
	if !bytes.Equal(withoutImageData(got), withoutImageData(want.Bytes())) {
		t.Fatal("deflating device: the file's chunks other than IDAT differ from EncodePNG's")
	}
	broken := &cpuPNGDevice{fail: errors.New("device lost")}
	if _, err := encode(ctx, broken, sub, pic, PNG); !errors.Is(err, codec.ErrDevice) {
		t.Fatalf("failing device: %v, want codec.ErrDevice", err)
	}
}

// withoutImageData is a PNG file with its IDAT chunks left out.
func withoutImageData(file []byte) []byte {
	out := append([]byte{}, file[:8]...)
	for p := file[8:]; len(p) >= 12; {
		n := int(binary.BigEndian.Uint32(p))
		if string(p[4:8]) != "IDAT" {
			out = append(out, p[:12+n]...)
		}
		p = p[12+n:]
	}
	return out
}
