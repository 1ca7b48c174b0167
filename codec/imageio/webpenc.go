package imageio

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"image"
	"io"

	"github.com/HugoSmits86/nativewebp"
)

// EncodeWebP writes img as a lossless WebP (VP8L, 8 bits per channel, alpha kept), with icc (if not nil) in an
// ICCP chunk of an extended (VP8X) container. The pixels are written upright and no EXIF is written.
func EncodeWebP(w io.Writer, img image.Image, icc []byte) error {
	b := img.Bounds()
	if b.Empty() {
		return errors.New("imageio: encoding WebP: empty image")
	}
	if b.Dx() > 16384 || b.Dy() > 16384 {
		return fmt.Errorf("imageio: encoding WebP: %dx%d exceeds 16384 pixels per side", b.Dx(), b.Dy())
	}
	var simple bytes.Buffer
	if err := nativewebp.Encode(&simple, img, nil); err != nil {
		return fmt.Errorf("imageio: encoding WebP: %w", err)
	}
	if len(icc) == 0 {
		_, err := w.Write(simple.Bytes())
		return wrapWrite(err)
	}
	// Re-wrap the VP8L chunk: RIFF, VP8X (flags, canvas size), ICCP, VP8L.
	data := simple.Bytes()
	if len(data) < 20 || string(data[0:4]) != "RIFF" || string(data[8:12]) != "WEBP" || string(data[12:16]) != "VP8L" {
		return errors.New("imageio: encoding WebP: unexpected encoder output")
	}
	vp8l := data[12:]
	alpha := false
	if o, ok := img.(interface{ Opaque() bool }); ok {
		alpha = !o.Opaque()
	}
	var out bytes.Buffer
	flags := byte(0x20) // ICC profile
	if alpha {
		flags |= 0x10
	}
	x := []byte{'V', 'P', '8', 'X', 10, 0, 0, 0, flags, 0, 0, 0}
	x = append(x, u24(b.Dx()-1)...)
	x = append(x, u24(b.Dy()-1)...)
	iccp := append([]byte("ICCP"), u32(len(icc))...)
	iccp = append(iccp, icc...)
	if len(icc)%2 == 1 {
		iccp = append(iccp, 0)
	}
	size := 4 + len(x) + len(iccp) + len(vp8l)
	out.WriteString("RIFF")
	out.Write(u32(size))
	out.WriteString("WEBP")
	out.Write(x)
	out.Write(iccp)
	out.Write(vp8l)
	_, err := w.Write(out.Bytes())
	return wrapWrite(err)
}

func wrapWrite(err error) error {
	if err != nil {
		return fmt.Errorf("imageio: encoding WebP: %w", err)
	}
	return nil
}

func u24(v int) []byte { return []byte{byte(v), byte(v >> 8), byte(v >> 16)} }

func u32(v int) []byte { return binary.LittleEndian.AppendUint32(nil, uint32(v)) }
