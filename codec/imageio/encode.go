package imageio

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"image"
	"image/png"
	"io"
)

// EncodePNG writes img as a PNG, with md.ICC (if not nil) as an iCCP chunk, md.EXIF (if not nil) as an eXIf
// chunk and md.XMP (if not nil) as an uncompressed iTXt "XML:com.adobe.xmp" chunk, all before the image data. 8-bit images are written with 8 bits per
// channel and deeper ones (NRGBA64, RGBA64, Gray16) with 16; an alpha channel is written only when some pixel is
// not opaque. An opaque image whose pixels are all gray and whose profile is a GRAY profile is written as a
// grayscale PNG, because PNG only allows a gray profile on a gray image; a profile whose colour space does not
// match the written colour type (CMYK, Lab, ...) is left out for the same reason.
//
// NRGBA, NRGBA64, Gray and Gray16 images (all the codec produces) are written by this package's encoder, in the
// layout image/png would choose (filters chosen as image/png chooses them; deflate as Huffman coding alone
// unless LZ77 does 10% better on a sample: see chooseDeflate); other image types by image/png at its fastest
// level. The invisible mark is noise-like, so slower levels shrink a marked
// photo by only a few percent while taking several times longer.
func EncodePNG(w io.Writer, img image.Image, md Metadata) error {
	if img.Bounds().Empty() {
		return fmt.Errorf("imageio: encoding PNG: empty image")
	}
	if err := checkEXIF(md.EXIF); err != nil {
		return fmt.Errorf("imageio: encoding PNG: %w", err)
	}
	if err := checkXMP(md.XMP); err != nil {
		return fmt.Errorf("imageio: encoding PNG: %w", err)
	}
	icc := md.ICC
	if len(icc) > 0 {
		switch iccColorSpace(icc) {
		case "GRAY":
			if g, ok := asGray(img); ok {
				img = g
			} else {
				icc = nil
			}
		case "RGB ":
			if isGrayModel(img) {
				icc = nil
			}
		default:
			icc = nil
		}
	}
	md.ICC = icc
	// The layouts the codec produces are filtered here and deflated as encodeFiltered chooses (klauspost's
	// Huffman coding alone or its level 1 on marked photos): image/png at its fastest level took 3.9-4.0 times
	// the CPU for a 16-bit 12 MP image, for the same size (BenchmarkEncodePNG16bit12MP). Anything else goes to
	// image/png.
	switch m := img.(type) {
	case *image.NRGBA:
		return encodeNRGBA(w, m, md)
	case *image.NRGBA64:
		return encodeNRGBA64(w, m, md)
	case *image.Gray:
		return encodeGray(w, m.Pix[m.PixOffset(m.Rect.Min.X, m.Rect.Min.Y):], m.Stride, m.Rect, layoutGray8, md)
	case *image.Gray16:
		return encodeGray(w, m.Pix[m.PixOffset(m.Rect.Min.X, m.Rect.Min.Y):], m.Stride, m.Rect, layoutGray16, md)
	}
	out := w
	var inj *chunkInjector
	if chunks, err := pngMetaChunks(md); err != nil {
		return err
	} else if len(chunks) > 0 {
		inj = &chunkInjector{w: w, chunks: chunks}
		out = inj
	}
	enc := png.Encoder{CompressionLevel: png.BestSpeed}
	if err := enc.Encode(out, img); err != nil {
		return fmt.Errorf("imageio: encoding PNG: %w", err)
	}
	if inj != nil && !inj.done {
		return fmt.Errorf("imageio: encoding PNG: output shorter than its header")
	}
	return nil
}

func isGrayModel(img image.Image) bool {
	switch img.(type) {
	case *image.Gray, *image.Gray16:
		return true
	}
	return false
}

// asGray returns img as *image.Gray or *image.Gray16 when it is opaque and every pixel has R = G = B.
func asGray(img image.Image) (image.Image, bool) {
	switch m := img.(type) {
	case *image.Gray, *image.Gray16:
		return m, true
	case *image.NRGBA:
		b := m.Bounds()
		g := image.NewGray(b)
		for y := b.Min.Y; y < b.Max.Y; y++ {
			s := m.Pix[m.PixOffset(b.Min.X, y):]
			d := g.Pix[g.PixOffset(b.Min.X, y):]
			for x := 0; x < b.Dx(); x++ {
				p := s[4*x : 4*x+4]
				if p[3] != 0xFF || p[0] != p[1] || p[0] != p[2] {
					return nil, false
				}
				d[x] = p[0]
			}
		}
		return g, true
	case *image.NRGBA64:
		b := m.Bounds()
		g := image.NewGray16(b)
		for y := b.Min.Y; y < b.Max.Y; y++ {
			s := m.Pix[m.PixOffset(b.Min.X, y):]
			d := g.Pix[g.PixOffset(b.Min.X, y):]
			for x := 0; x < b.Dx(); x++ {
				p := s[8*x : 8*x+8]
				if p[6] != 0xFF || p[7] != 0xFF || !bytes.Equal(p[0:2], p[2:4]) || !bytes.Equal(p[0:2], p[4:6]) {
					return nil, false
				}
				d[2*x], d[2*x+1] = p[0], p[1]
			}
		}
		return g, true
	}
	return nil, false
}

// pngMetaChunks returns the complete chunks (length, type, data, CRC) that carry md: iCCP, eXIf, then the XMP
// iTXt.
func pngMetaChunks(md Metadata) ([]byte, error) {
	var out []byte
	if len(md.ICC) > 0 {
		chunk, err := iccpChunk(md.ICC)
		if err != nil {
			return nil, err
		}
		out = chunk
	}
	if len(md.EXIF) > 0 {
		out = pngChunk(out, "eXIf", md.EXIF)
	}
	if len(md.XMP) > 0 {
		out = pngChunk(out, "iTXt", pngXMPChunk(md.XMP))
	}
	return out, nil
}

// pngChunk appends a complete chunk (length, type, data, CRC) to dst.
func pngChunk(dst []byte, typ string, data []byte) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(data)))
	start := len(dst)
	dst = append(dst, typ...)
	dst = append(dst, data...)
	return binary.BigEndian.AppendUint32(dst, crc32.ChecksumIEEE(dst[start:]))
}

// iccpChunk builds a complete iCCP chunk (length, type, data, CRC) for a raw profile.
func iccpChunk(icc []byte) ([]byte, error) {
	var z bytes.Buffer
	z.WriteString("ICC profile\x00\x00") // keyword, terminator, compression method 0 (zlib)
	zw, err := zlib.NewWriterLevel(&z, zlib.BestCompression)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(icc); err != nil {
		return nil, fmt.Errorf("imageio: compressing ICC profile: %w", err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("imageio: compressing ICC profile: %w", err)
	}
	return pngChunk(make([]byte, 0, z.Len()+12), "iCCP", z.Bytes()), nil
}

// pngHeaderLen is the PNG signature plus the IHDR chunk, which must come first; iCCP and eXIf must precede PLTE
// and IDAT.
const pngHeaderLen = 8 + 4 + 4 + 13 + 4

// chunkInjector passes image/png's output through and inserts the metadata chunks right after IHDR, so the PNG
// is streamed rather than buffered.
type chunkInjector struct {
	w      io.Writer
	chunks []byte
	n      int // bytes passed through so far
	done   bool
}

func (j *chunkInjector) Write(p []byte) (int, error) {
	written := 0
	if !j.done && j.n+len(p) >= pngHeaderLen {
		head := pngHeaderLen - j.n
		if _, err := j.w.Write(p[:head]); err != nil {
			return 0, err
		}
		if _, err := j.w.Write(j.chunks); err != nil {
			return head, err
		}
		j.done = true
		j.n += head
		written = head
		p = p[head:]
	}
	n, err := j.w.Write(p)
	j.n += n
	return written + n, err
}
