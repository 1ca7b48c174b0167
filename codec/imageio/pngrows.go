package imageio

import (
	"bufio"
	"compress/zlib"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"image"
	"io"

	kzlib "github.com/klauspost/compress/zlib"
)

// PNGRowsFit reports whether EncodePNGRows can write a file with this ICC profile: not when the profile is a
// GRAY one, which EncodePNG may write as a grayscale PNG (and the rows are RGB).
func PNGRowsFit(icc []byte) bool { return iccColorSpace(icc) != "GRAY" }

// EncodePNGRows writes an 8-bit PNG of width×height pixels, RGB (alpha false) or RGBA, from rows that are
// already filtered (per row a filter-type byte and the row's bytes: what the GPU's filter pass gives). With the
// rows EncodePNG's filter gives for the same image (image/png's choice of filter, which the GPU's mirrors), the
// file is byte for byte the one EncodePNG writes: the same header, iCCP and eXIf chunks, deflate mode (chosen
// from the same sample rows) and 32 KiB IDAT chunks. Callers check PNGRowsFit(md.ICC) first.
func EncodePNGRows(w io.Writer, width, height int, alpha bool, rows []byte, md Metadata) error {
	bpp := 3
	if alpha {
		bpp = 4
	}
	if width <= 0 || height <= 0 || len(rows) != height*(1+bpp*width) {
		return fmt.Errorf("imageio: encoding PNG rows: %d bytes for %dx%d pixels of %d bytes", len(rows), width,
			height, bpp)
	}
	md, err := rgbMetadata(md)
	if err != nil {
		return fmt.Errorf("imageio: encoding PNG rows: %w", err)
	}
	rowLen := 1 + bpp*width
	ys := sampleRows(height)
	sample := make([]byte, 0, len(ys)*rowLen)
	for _, y := range ys {
		sample = append(sample, rows[y*rowLen:(y+1)*rowLen]...)
	}
	return writePNGRows(w, width, height, rgb8(alpha), md, chooseDeflate(sample), func(zw io.Writer) error {
		_, err := zw.Write(rows)
		return err
	})
}

// pngLayout is a PNG pixel layout: bit depth, colour type (0 gray, 2 RGB, 6 RGBA) and bytes a pixel.
type pngLayout struct{ depth, colorType, bpp int }

var (
	layoutGray8  = pngLayout{8, 0, 1}
	layoutGray16 = pngLayout{16, 0, 2}
	layoutRGB8   = pngLayout{8, 2, 3}
	layoutRGBA8  = pngLayout{8, 6, 4}
	layoutRGB16  = pngLayout{16, 2, 6}
	layoutRGBA16 = pngLayout{16, 6, 8}
)

// rgb8 is the 8-bit layout of RGB (alpha false) or RGBA rows.
func rgb8(alpha bool) pngLayout {
	if alpha {
		return layoutRGBA8
	}
	return layoutRGB8
}

// encodeNRGBA writes an 8-bit image as EncodePNG does: RGB when it is opaque, else RGBA.
func encodeNRGBA(w io.Writer, m *image.NRGBA, md Metadata) error {
	b := m.Bounds()
	width := b.Dx()
	if !isOpaque(m) {
		return encodeFiltered(w, width, b.Dy(), layoutRGBA8, md, func(y int, dst []byte) {
			copy(dst, m.Pix[m.PixOffset(b.Min.X, b.Min.Y+y):][:4*width])
		})
	}
	return encodeFiltered(w, width, b.Dy(), layoutRGB8, md, func(y int, dst []byte) {
		src := m.Pix[m.PixOffset(b.Min.X, b.Min.Y+y):][:4*width]
		dst = dst[:3*width]
		for x := 0; x < width; x++ {
			p := src[4*x : 4*x+3 : 4*x+3]
			d := dst[3*x : 3*x+3 : 3*x+3]
			d[0], d[1], d[2] = p[0], p[1], p[2]
		}
	})
}

// encodeNRGBA64 writes a 16-bit image as image/png's encoder lays it out: RGB when it is opaque, else RGBA, 16
// bits a sample (NRGBA64's Pix is already big-endian RGBA, PNG's order).
func encodeNRGBA64(w io.Writer, m *image.NRGBA64, md Metadata) error {
	b := m.Bounds()
	width := b.Dx()
	if !m.Opaque() {
		return encodeFiltered(w, width, b.Dy(), layoutRGBA16, md, func(y int, dst []byte) {
			copy(dst, m.Pix[m.PixOffset(b.Min.X, b.Min.Y+y):][:8*width])
		})
	}
	return encodeFiltered(w, width, b.Dy(), layoutRGB16, md, func(y int, dst []byte) {
		src := m.Pix[m.PixOffset(b.Min.X, b.Min.Y+y):][:8*width]
		dst = dst[:6*width]
		for x := 0; x < width; x++ {
			copy(dst[6*x:6*x+6], src[8*x:8*x+6])
		}
	})
}

// encodeGray writes an 8- or 16-bit grayscale image (what EncodePNG makes of a gray picture with a GRAY profile).
func encodeGray(w io.Writer, pix []byte, stride int, r image.Rectangle, l pngLayout, md Metadata) error {
	n := l.bpp * r.Dx()
	return encodeFiltered(w, r.Dx(), r.Dy(), l, md, func(y int, dst []byte) {
		copy(dst, pix[y*stride:][:n])
	})
}

// encodeFiltered writes a PNG of width×height pixels in layout l whose unfiltered rows row(y, dst) gives
// (l.bpp·width bytes), filtering them as image/png's encoder does and streaming them to the compressor: no more
// than a few rows are held besides the image.
func encodeFiltered(w io.Writer, width, height int, l pngLayout, md Metadata, row func(y int, dst []byte)) error {
	n := l.bpp * width
	prev, cur, out := make([]byte, n), make([]byte, n), make([]byte, 1+n)
	// The deflate mode is chosen from the filtered sample rows first (each needs its previous row).
	ys := sampleRows(height)
	sample := make([]byte, 0, len(ys)*(1+n)) // sized once: append's growth would allocate it five times over
	for _, y := range ys {
		clear(prev)
		if y > 0 {
			row(y-1, prev)
		}
		row(y, cur)
		filterRow(out, cur, prev, l.bpp)
		sample = append(sample, out...)
	}
	mode := chooseDeflate(sample)
	sample = nil
	return writePNGRows(w, width, height, l, md, mode, func(zw io.Writer) error {
		clear(prev)
		for y := 0; y < height; y++ {
			row(y, cur)
			filterRow(out, cur, prev, l.bpp)
			if _, err := zw.Write(out); err != nil {
				return err
			}
			prev, cur = cur, prev
		}
		return nil
	})
}

// sampleRows are the rows whose filtered bytes choose the deflate mode: up to 16 bands of 8 rows, spread evenly
// over the image.
func sampleRows(height int) []int {
	bands := min(16, height)
	var ys []int
	next := 0
	for k := 0; k < bands; k++ {
		y0 := max(next, (2*k+1)*height/(2*bands)-4)
		for y := y0; y < min(height, y0+8); y++ {
			ys = append(ys, y)
		}
		next = min(height, y0+8)
	}
	return ys
}

// deflateMode is how the image data is compressed.
type deflateMode int

const (
	// huffmanOnly: Huffman coding alone (klauspost/compress, about two thirds of the standard library's
	// time for the same size).
	huffmanOnly deflateMode = iota
	// fastLZ: LZ77 at klauspost/compress's level 1: on marked photos with smooth areas and on most artwork
	// it compresses as well as the standard library's BestSpeed or better in about two thirds of the time.
	fastLZ
	// runsLZ: LZ77 at the standard library's BestSpeed, which keeps long runs (flat graphics, diagrams,
	// screenshots) up to twice as small as klauspost/compress's fast levels do.
	runsLZ
)

// newWriter returns the zlib writer of mode m on w.
func (m deflateMode) newWriter(w io.Writer) io.WriteCloser {
	switch m {
	case fastLZ:
		zw, _ := kzlib.NewWriterLevel(w, 1)
		return zw
	case runsLZ:
		zw, _ := zlib.NewWriterLevel(w, zlib.BestSpeed)
		return zw
	}
	zw, _ := kzlib.NewWriterLevel(w, kzlib.HuffmanOnly)
	return zw
}

// chooseDeflate picks the deflate mode for the image data from a sample of its filtered rows: LZ77 when it
// compresses the sample at least 10% better than Huffman coding alone (flat artwork, screenshots, graphics:
// long runs, which LZ77 shrinks many times more than Huffman coding can), else Huffman coding alone. On
// photographs, and on anything marked (the mark is noise), the filtered bytes are short-range: LZ77 finds
// little to match, gains a few percent at most and takes several times as long. Of the two LZ77 modes the
// faster one is taken unless the sample comes out over 3% larger with it. Measured on real images in
// bench/README.md ("PNG output").
func chooseDeflate(sample []byte) deflateMode {
	huffman, fast, runs := deflatedSize(huffmanOnly, sample), deflatedSize(fastLZ, sample), deflatedSize(runsLZ, sample)
	switch {
	case 10*min(fast, runs) > 9*huffman:
		return huffmanOnly
	case 100*fast <= 103*runs:
		return fastLZ
	}
	return runsLZ
}

// deflatedSize is the size of b compressed in mode m.
func deflatedSize(m deflateMode, b []byte) int {
	var c countWriter
	zw := m.newWriter(&c)
	zw.Write(b)
	zw.Close()
	return c.n
}

type countWriter struct{ n int }

func (c *countWriter) Write(p []byte) (int, error) {
	c.n += len(p)
	return len(p), nil
}

// writePNGRows writes a PNG in layout l: the signature, IHDR, the iCCP, eXIf and XMP iTXt chunks of md, the image data
// that body writes (filtered rows) compressed in mode in 32 KiB IDAT chunks, and IEND.
func writePNGRows(w io.Writer, width, height int, l pngLayout, md Metadata, mode deflateMode, body func(zw io.Writer) error) error {
	return writePNGData(w, width, height, l, md, func(idat io.Writer) error {
		bw := bufio.NewWriterSize(idat, 1<<15)
		zw := mode.newWriter(bw)
		if err := body(zw); err != nil {
			return err
		}
		if err := zw.Close(); err != nil {
			return err
		}
		return bw.Flush()
	})
}

// EncodePNGZlib writes an 8-bit PNG of width×height pixels, RGB (alpha false) or RGBA, whose image data is the
// zlib stream z of the filtered rows, compressed elsewhere (a device's deflate, package codec/pardeflate): the
// same header, iCCP, eXIf and XMP iTXt chunks as EncodePNGRows, z in 32 KiB IDAT chunks. The stream is not checked here:
// the caller vouches that it inflates to height rows of 1+bpp·width bytes. Callers check PNGRowsFit(md.ICC).
func EncodePNGZlib(w io.Writer, width, height int, alpha bool, z []byte, md Metadata) error {
	if width <= 0 || height <= 0 || len(z) < 6 {
		return fmt.Errorf("imageio: encoding PNG: a %d-byte zlib stream for %dx%d pixels", len(z), width, height)
	}
	md, err := rgbMetadata(md)
	if err != nil {
		return fmt.Errorf("imageio: encoding PNG: %w", err)
	}
	return writePNGData(w, width, height, rgb8(alpha), md, func(idat io.Writer) error {
		for len(z) > 0 {
			k := min(len(z), 1<<15)
			if _, err := idat.Write(z[:k]); err != nil {
				return err
			}
			z = z[k:]
		}
		return nil
	})
}

// rgbMetadata is md as EncodePNG writes it beside RGB or RGBA rows: refused with a GRAY profile (EncodePNG may
// write that image as grayscale), malformed EXIF or XMP over MaxXMPBytes, and without a profile of another colour space (EncodePNG
// drops one that does not match RGB).
func rgbMetadata(md Metadata) (Metadata, error) {
	if !PNGRowsFit(md.ICC) {
		return md, errors.New("a GRAY profile needs EncodePNG")
	}
	if err := checkEXIF(md.EXIF); err != nil {
		return md, err
	}
	if err := checkXMP(md.XMP); err != nil {
		return md, err
	}
	if iccColorSpace(md.ICC) != "RGB " {
		md.ICC = nil
	}
	return md, nil
}

// writePNGData writes the PNG in layout l around the image data that data writes to idat (each Write one IDAT
// chunk).
func writePNGData(w io.Writer, width, height int, l pngLayout, md Metadata, data func(idat io.Writer) error) error {
	cw := &chunkWriter{w: w}
	if _, err := w.Write([]byte("\x89PNG\r\n\x1a\n")); err != nil {
		return fmt.Errorf("imageio: encoding PNG: %w", err)
	}
	ihdr := make([]byte, 13)
	binary.BigEndian.PutUint32(ihdr[0:], uint32(width))
	binary.BigEndian.PutUint32(ihdr[4:], uint32(height))
	ihdr[8], ihdr[9] = byte(l.depth), byte(l.colorType)
	cw.chunk(ihdr, "IHDR")
	chunks, err := pngMetaChunks(md)
	if err != nil {
		return err
	}
	if _, err := w.Write(chunks); err != nil {
		return fmt.Errorf("imageio: encoding PNG: %w", err)
	}
	if err := data(idatWriter{cw}); err != nil {
		return fmt.Errorf("imageio: encoding PNG: %w", err)
	}
	cw.chunk(nil, "IEND")
	if cw.err != nil {
		return fmt.Errorf("imageio: encoding PNG: %w", cw.err)
	}
	return nil
}

// chunkWriter writes PNG chunks (length, type, data, CRC) and keeps the first error.
type chunkWriter struct {
	w   io.Writer
	err error
}

func (c *chunkWriter) chunk(b []byte, name string) {
	if c.err != nil {
		return
	}
	head := binary.BigEndian.AppendUint32(make([]byte, 0, 8), uint32(len(b)))
	head = append(head, name...)
	crc := crc32.NewIEEE()
	crc.Write(head[4:])
	crc.Write(b)
	if _, c.err = c.w.Write(head); c.err != nil {
		return
	}
	if _, c.err = c.w.Write(b); c.err != nil {
		return
	}
	_, c.err = c.w.Write(binary.BigEndian.AppendUint32(nil, crc.Sum32()))
}

// idatWriter writes each Write as one IDAT chunk.
type idatWriter struct{ c *chunkWriter }

func (i idatWriter) Write(b []byte) (int, error) {
	i.c.chunk(b, "IDAT")
	if i.c.err != nil {
		return 0, i.c.err
	}
	return len(b), nil
}
