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

// EncodeWebP writes img as a lossless WebP (VP8L, 8 bits per channel, alpha kept). With metadata it is an
// extended (VP8X) container: md.ICC (if not nil) in an ICCP chunk before the image data, md.EXIF (if not nil)
// in an EXIF chunk and md.XMP (if not nil) in an "XMP " chunk after it, where the container specification puts
// them. The pixels are written as they are.
func EncodeWebP(w io.Writer, img image.Image, md Metadata) error {
	b := img.Bounds()
	if b.Empty() {
		return errors.New("imageio: encoding WebP: empty image")
	}
	if b.Dx() > 16384 || b.Dy() > 16384 {
		return fmt.Errorf("imageio: encoding WebP: %dx%d exceeds 16384 pixels per side", b.Dx(), b.Dy())
	}
	if err := checkEXIF(md.EXIF); err != nil {
		return fmt.Errorf("imageio: encoding WebP: %w", err)
	}
	if err := checkXMP(md.XMP); err != nil {
		return fmt.Errorf("imageio: encoding WebP: %w", err)
	}
	var simple bytes.Buffer
	if err := nativewebp.Encode(&simple, img, nil); err != nil {
		return fmt.Errorf("imageio: encoding WebP: %w", err)
	}
	icc, exif, xmp := md.ICC, md.EXIF, md.XMP
	if len(icc) == 0 && len(exif) == 0 && len(xmp) == 0 {
		_, err := w.Write(simple.Bytes())
		return wrapWrite(err)
	}
	// Re-wrap the VP8L chunk: RIFF, VP8X (flags, canvas size), ICCP, VP8L, EXIF, XMP.
	data := simple.Bytes()
	if len(data) < 20 || string(data[0:4]) != "RIFF" || string(data[8:12]) != "WEBP" || string(data[12:16]) != "VP8L" {
		return errors.New("imageio: encoding WebP: unexpected encoder output")
	}
	vp8l := data[12:]
	if len(vp8l)%2 == 1 { // a chunk is padded to an even size when another follows it
		vp8l = append(vp8l, 0)
	}
	alpha := false
	if o, ok := img.(interface{ Opaque() bool }); ok {
		alpha = !o.Opaque()
	}
	var out bytes.Buffer
	var flags byte
	if len(icc) > 0 {
		flags |= 0x20
	}
	if len(exif) > 0 {
		flags |= 0x08
	}
	if len(xmp) > 0 {
		flags |= 0x04
	}
	if alpha {
		flags |= 0x10
	}
	x := []byte{'V', 'P', '8', 'X', 10, 0, 0, 0, flags, 0, 0, 0}
	x = append(x, u24(b.Dx()-1)...)
	x = append(x, u24(b.Dy()-1)...)
	iccp, exifc, xmpc := riffChunk("ICCP", icc), riffChunk("EXIF", exif), riffChunk("XMP ", xmp)
	size := 4 + len(x) + len(iccp) + len(vp8l) + len(exifc) + len(xmpc)
	out.WriteString("RIFF")
	out.Write(u32(size))
	out.WriteString("WEBP")
	out.Write(x)
	out.Write(iccp)
	out.Write(vp8l)
	out.Write(exifc)
	out.Write(xmpc)
	_, err := w.Write(out.Bytes())
	return wrapWrite(err)
}

// riffChunk is a chunk of id holding data, padded to an even size; nil for no data.
func riffChunk(id string, data []byte) []byte {
	if len(data) == 0 {
		return nil
	}
	c := append([]byte(id), u32(len(data))...)
	c = append(c, data...)
	if len(data)%2 == 1 {
		c = append(c, 0)
	}
	return c
}

func wrapWrite(err error) error {
	if err != nil {
		return fmt.Errorf("imageio: encoding WebP: %w", err)
	}
	return nil
}

func u24(v int) []byte { return []byte{byte(v), byte(v >> 8), byte(v >> 16)} }

func u32(v int) []byte { return binary.LittleEndian.AppendUint32(nil, uint32(v)) }
