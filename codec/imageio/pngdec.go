package imageio

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"image"
	"image/color"
	"io"

	kzlib "github.com/klauspost/compress/zlib"
)

// This file is a decoder for the PNGs most files are: not interlaced, 8 bits a sample, grey (colour type 0), RGB
// (2), palette (3), grey with alpha (4) or RGBA (6), with or without a tRNS chunk. It decodes straight into the
// image the caller wants (the NRGBA of DecodeBytes without image/png's image and the conversion's copy, or
// image/png's own layout for the analysis path), in memory the caller may give (PixelAllocator), unfiltering
// each row in place and writing it once.
//
// It is a fast path, not a second opinion. It walks the chunks the way image/png's state machine does (chunk
// order, lengths, CRCs of every chunk up to IEND, bytes after IEND ignored) before inflating anything, so that a
// truncated or malformed file is refused before its pixels are allocated, and it refuses what image/png refuses
// (with ErrCorrupt, the class classify gives every image/png error once the header has been read); FuzzFastPNG
// checks both directions against image/png. What image/png decides through the accidents of its reading (bytes
// after the end of the zlib stream inside the last IDAT chunk it reads: it accepts them when its 4 kB read-ahead
// swallowed them) and the layouts it does not handle (interlaced, 1, 2, 4 or 16 bits) go to image/png instead
// (errPNGFallback).
//
// Costs: the header's pixel count has been checked against Limits (checkAll) before the pixels are allocated;
// the walk is linear in the file; the inflated data is bounded (one byte past the rows is read to see that the
// stream ends there); ctx is checked every pngCtxRows rows.

// PixelAllocator gives the memory of a decoded image's pixels: a slice of at least n bytes, whose first n bytes
// become the image's Pix. A nil allocator, or a slice shorter than n, means the decoder allocates with make.
// The memory need not be zeroed (every byte is written) and belongs to the caller: the decoder keeps no
// reference to it once the call returns, and the caller may reuse it when it no longer uses the image, or at
// once when the call fails or when the image does not use it (a fallback decoder allocates its own).
type PixelAllocator func(n int) []byte

// get returns n bytes from a, or from make.
func (a PixelAllocator) get(n int) []byte {
	if a != nil {
		if b := a(n); len(b) >= n {
			return b[:n:n]
		}
	}
	return make([]byte, n)
}

// errPNGFallback: the fast decoder does not handle this file; image/png decodes it.
var errPNGFallback = errors.New("imageio: png: not handled by the fast decoder")

// pngRefusal is a reason image/png refuses a file too; decodePNGFast wraps it in ErrCorrupt.
type pngRefusal string

func (e pngRefusal) Error() string { return string(e) }

// pngCtxRows is how often (in rows) the row loop checks ctx: a 12 MP RGB image has 3000 rows of 12 kB.
const pngCtxRows = 32

// Decoding stages, in the order the PNG specification requires (and image/png enforces).
const (
	pngStart = iota
	pngSeenIHDR
	pngSeenPLTE
	pngSeenTRNS
	pngSeenIDAT
	pngSeenIEND
)

// pngFile is what the chunk walk learned.
type pngFile struct {
	w, h      int
	colorType int
	plte      []byte // PLTE entries (3 bytes each) of a palette image
	trns      []byte // the tRNS chunk's data; nil when there is none
	idat      [][]byte
}

// walkPNG checks the chunks of data (a PNG file whose signature has been checked) as image/png reads them up to
// IEND, and collects the header, palette, transparency and the data of the run of IDAT chunks that the zlib
// stream is read from. It returns errPNGFallback for a layout the fast decoder does not decode.
func walkPNG(data []byte) (pngFile, error) {
	var f pngFile
	stage := pngStart
	inRun := false // the last chunk was an IDAT of the first run
	for pos := 8; stage != pngSeenIEND; {
		if len(data)-pos < 8 {
			return f, pngRefusal("truncated before IEND")
		}
		n := binary.BigEndian.Uint32(data[pos:])
		typ := string(data[pos+4 : pos+8])
		if int64(n) > int64(len(data)-pos-12) {
			return f, pngRefusal(fmt.Sprintf("%q chunk runs past the end of the file", typ))
		}
		body := data[pos+8 : pos+8+int(n)]
		if crc32.ChecksumIEEE(data[pos+4:pos+8+int(n)]) != binary.BigEndian.Uint32(data[pos+8+int(n):]) {
			return f, pngRefusal(fmt.Sprintf("%q chunk has a bad CRC", typ))
		}
		pos += 12 + int(n)
		wasRun := inRun
		inRun = false
		switch typ {
		case "IHDR":
			if stage != pngStart {
				return f, pngRefusal("chunk out of order")
			}
			stage = pngSeenIHDR
			if n != 13 {
				return f, pngRefusal("bad IHDR length")
			}
			w, h := int32(binary.BigEndian.Uint32(body)), int32(binary.BigEndian.Uint32(body[4:]))
			depth, ct := body[8], body[9]
			if w <= 0 || h <= 0 || depth != 8 || body[10] != 0 || body[11] != 0 || body[12] != 0 ||
				(ct != 0 && ct != 2 && ct != 3 && ct != 4 && ct != 6) {
				return f, errPNGFallback // image/png's verdict: interlaced, other depths, or refused by checkAll
			}
			f.w, f.h, f.colorType = int(w), int(h), int(ct)
		case "PLTE":
			if stage != pngSeenIHDR {
				return f, pngRefusal("chunk out of order")
			}
			stage = pngSeenPLTE
			if n%3 != 0 || n == 0 || n > 3*256 {
				return f, pngRefusal("bad PLTE length")
			}
			switch f.colorType {
			case 3:
				f.plte = body
			case 0, 4:
				return f, pngRefusal("PLTE, color type mismatch")
			} // RGB and RGBA: a suggested palette, ignored
		case "tRNS":
			switch {
			case f.colorType == 3 && stage != pngSeenPLTE,
				f.colorType == 2 && stage != pngSeenIHDR && stage != pngSeenPLTE,
				f.colorType != 2 && f.colorType != 3 && stage != pngSeenIHDR:
				return f, pngRefusal("chunk out of order")
			}
			stage = pngSeenTRNS
			switch {
			case f.colorType == 0 && n == 2, f.colorType == 2 && n == 6, f.colorType == 3 && n <= 256:
				f.trns = body
			default:
				return f, pngRefusal("bad tRNS")
			}
		case "IDAT":
			switch {
			case stage < pngSeenIHDR || (stage == pngSeenIHDR && f.colorType == 3):
				return f, pngRefusal("chunk out of order")
			case stage == pngSeenIDAT:
				// After the first run, image/png ignores IDAT chunks; within it, they carry the stream.
				if wasRun {
					f.idat = append(f.idat, body)
					inRun = true
				}
			default:
				stage = pngSeenIDAT
				f.idat = append(f.idat, body)
				inRun = true
			}
		case "IEND":
			if stage != pngSeenIDAT {
				return f, pngRefusal("chunk out of order")
			}
			if n != 0 {
				return f, pngRefusal("bad IEND length")
			}
			stage = pngSeenIEND
		default:
			if n > 0x7fffffff {
				return f, pngRefusal("bad chunk length")
			}
		}
	}
	return f, nil
}

// idatReader reads the data of a run of IDAT chunks as one stream and counts what it has handed out.
type idatReader struct {
	chunks [][]byte
	read   int64
}

func (r *idatReader) Read(p []byte) (int, error) {
	for len(r.chunks) > 0 && len(r.chunks[0]) == 0 {
		r.chunks = r.chunks[1:]
	}
	if len(r.chunks) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.chunks[0])
	r.chunks[0] = r.chunks[0][n:]
	r.read += int64(n)
	return n, nil
}

// pngLayout of the output: which image type, for a colour type and transparency.
type pngDest struct {
	pix    []byte
	stride int
	img    image.Image
	// inPlace: the output row is the unfiltered row itself (the stream is inflated straight into it).
	inPlace bool
}

// decodePNGFast decodes data (a whole PNG file that checkAll has passed) in layout out (jpegNative: the image
// image/png returns; jpegNRGBA: *image.NRGBA as toNRGBA makes of it) with its pixels in memory from alloc. It
// returns errPNGFallback for files image/png should decode, an error wrapping ErrCorrupt for files image/png
// refuses too, or ctx's error.
func decodePNGFast(ctx context.Context, data []byte, out jpegOut, alloc PixelAllocator) (image.Image, error) {
	f, err := walkPNG(data)
	if err == nil {
		var img image.Image
		if img, err = f.decode(ctx, out, alloc); err == nil {
			return img, nil
		}
	}
	if cerr := ctx.Err(); cerr != nil {
		return nil, cerr
	}
	var refusal pngRefusal
	if errors.As(err, &refusal) {
		return nil, fmt.Errorf("imageio: png decoding: %w: %w", err, ErrCorrupt)
	}
	return nil, errPNGFallback
}

// samples is the bytes a pixel of colour type ct takes in the file (8-bit samples).
func samples(ct int) int {
	switch ct {
	case 2:
		return 3
	case 4:
		return 2
	case 6:
		return 4
	}
	return 1
}

// palette is the palette image/png builds from PLTE and tRNS: PLTE's entries, opaque, extended to tRNS's
// length with opaque black, tRNS's alpha on the first entries (as color.NRGBA); maxIndex+1 entries at least
// (image/png lengthens the palette to the largest index found, again with opaque black).
func (f *pngFile) palette(maxIndex int) color.Palette {
	np := len(f.plte) / 3
	p := make(color.Palette, 256)
	for i := range p {
		c := color.RGBA{0, 0, 0, 0xFF}
		if i < np {
			c.R, c.G, c.B = f.plte[3*i], f.plte[3*i+1], f.plte[3*i+2]
		}
		p[i] = c
	}
	for i, a := range f.trns {
		c := p[i].(color.RGBA)
		p[i] = color.NRGBA{c.R, c.G, c.B, a}
	}
	return p[:max(np, len(f.trns), maxIndex+1)]
}

// destination allocates the output image for out and says whether rows are inflated into it in place.
func (f *pngFile) destination(out jpegOut, alloc PixelAllocator) pngDest {
	r := image.Rect(0, 0, f.w, f.h)
	ct, trns := f.colorType, f.trns != nil
	switch {
	case out == jpegNative && ct == 0 && !trns:
		d := pngDest{pix: alloc.get(f.w * f.h), stride: f.w, inPlace: true}
		d.img = &image.Gray{Pix: d.pix, Stride: d.stride, Rect: r}
		return d
	case out == jpegNative && ct == 3:
		d := pngDest{pix: alloc.get(f.w * f.h), stride: f.w, inPlace: true}
		d.img = &image.Paletted{Pix: d.pix, Stride: d.stride, Rect: r} // the palette is set once the indexes are known
		return d
	case out == jpegNative && ct == 2 && !trns:
		d := pngDest{pix: alloc.get(4 * f.w * f.h), stride: 4 * f.w}
		d.img = &image.RGBA{Pix: d.pix, Stride: d.stride, Rect: r}
		return d
	}
	d := pngDest{pix: alloc.get(4 * f.w * f.h), stride: 4 * f.w, inPlace: ct == 6}
	d.img = &image.NRGBA{Pix: d.pix, Stride: d.stride, Rect: r}
	return d
}

// decode inflates the image data and writes the rows into the output image.
func (f *pngFile) decode(ctx context.Context, out jpegOut, alloc PixelAllocator) (image.Image, error) {
	bpp := samples(f.colorType)
	rowLen := int64(bpp) * int64(f.w)
	if rowLen*int64(f.h) > 1<<40 {
		return nil, errPNGFallback // beyond any limit checkAll lets through
	}
	n := int(rowLen)
	src := &idatReader{chunks: append([][]byte(nil), f.idat...)} // its own list: Read shortens the entries
	br := bufio.NewReaderSize(src, 32<<10)
	zr, err := kzlib.NewReader(br)
	if err != nil {
		return nil, pngRefusal(fmt.Sprintf("zlib header: %v", err))
	}
	dst := f.destination(out, alloc)
	var lut [256][4]byte
	if f.colorType == 3 && out == jpegNRGBA {
		for i, c := range f.palette(255) {
			nc := color.NRGBAModel.Convert(c).(color.NRGBA)
			lut[i] = [4]byte{nc.R, nc.G, nc.B, nc.A}
		}
	}
	var (
		zero     = make([]byte, n)
		prev     = zero
		cur      []byte
		spare    [2][]byte
		ft       [1]byte
		maxIndex = -1
	)
	if !dst.inPlace {
		spare[0], spare[1] = make([]byte, n), make([]byte, n)
	}
	for y := 0; y < f.h; y++ {
		if y%pngCtxRows == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		if dst.inPlace {
			cur = dst.pix[y*dst.stride : y*dst.stride+n]
		} else {
			cur = spare[y&1]
		}
		if _, err := io.ReadFull(zr, ft[:]); err != nil {
			return nil, inflateRefusal(err)
		}
		if _, err := io.ReadFull(zr, cur); err != nil {
			return nil, inflateRefusal(err)
		}
		if err := unfilter(ft[0], cur, prev, bpp); err != nil {
			return nil, err
		}
		f.writeRow(dst.pix[y*dst.stride:], cur, out, &lut, &maxIndex)
		prev = cur
	}
	// The stream must end here: image/png reads one more byte and wants the end of the stream (the zlib
	// checksum verified), then wants the stream to have ended at the end of an IDAT chunk.
	var one [1]byte
	if k, err := io.ReadFull(zr, one[:]); k != 0 {
		return nil, pngRefusal("too much pixel data")
	} else if err != io.EOF {
		return nil, pngRefusal(fmt.Sprintf("image data: %v", err))
	}
	end, at := src.read-int64(br.Buffered()), int64(0)
	chunkEnd := false
	for _, c := range f.idat {
		at += int64(len(c))
		chunkEnd = chunkEnd || at == end
	}
	if !chunkEnd {
		return nil, errPNGFallback // bytes after the stream inside an IDAT chunk: image/png may take them or not
	}
	if p, ok := dst.img.(*image.Paletted); ok {
		p.Palette = f.palette(maxIndex)
	}
	return dst.img, nil
}

// inflateRefusal is the refusal for an error reading the rows from the zlib stream.
func inflateRefusal(err error) error {
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return pngRefusal("not enough pixel data")
	}
	return pngRefusal(fmt.Sprintf("image data: %v", err))
}

// writeRow writes the unfiltered row cur into the output row d (skipped when cur is d: the in-place layouts),
// in the layout image/png gives (jpegNative) or NRGBA.
func (f *pngFile) writeRow(d, cur []byte, out jpegOut, lut *[256][4]byte, maxIndex *int) {
	w := f.w
	switch f.colorType {
	case 0:
		switch {
		case f.trns != nil:
			t := f.trns[1] // image/png compares the low byte of the 16-bit value
			for x, v := range cur[:w] {
				a := byte(0xFF)
				if v == t {
					a = 0
				}
				binary.LittleEndian.PutUint32(d[4*x:], uint32(v)*0x010101|uint32(a)<<24)
			}
		case out == jpegNRGBA:
			for x, v := range cur[:w] {
				binary.LittleEndian.PutUint32(d[4*x:], uint32(v)*0x010101|0xFF000000)
			}
		}
	case 2:
		d = d[:4*w]
		if f.trns != nil {
			tr, tg, tb := f.trns[1], f.trns[3], f.trns[5]
			for x := 0; x < w; x++ {
				s := cur[3*x : 3*x+3 : 3*x+3]
				a := byte(0xFF)
				if s[0] == tr && s[1] == tg && s[2] == tb {
					a = 0
				}
				p := d[4*x : 4*x+4 : 4*x+4]
				p[0], p[1], p[2], p[3] = s[0], s[1], s[2], a
			}
			return
		}
		for x := 0; x < w; x++ {
			s := cur[3*x : 3*x+3 : 3*x+3]
			p := d[4*x : 4*x+4 : 4*x+4]
			p[0], p[1], p[2], p[3] = s[0], s[1], s[2], 0xFF
		}
	case 3:
		if out == jpegNRGBA {
			d = d[:4*w]
			for x, v := range cur[:w] {
				copy(d[4*x:4*x+4], lut[v][:])
			}
			return
		}
		m := *maxIndex
		for _, v := range cur[:w] {
			m = max(m, int(v))
		}
		*maxIndex = m
	case 4:
		d = d[:4*w]
		for x := 0; x < w; x++ {
			v, a := cur[2*x], cur[2*x+1]
			binary.LittleEndian.PutUint32(d[4*x:], uint32(v)*0x010101|uint32(a)<<24)
		}
	}
}

// unfilter reverses the row filter ft (PNG specification, section 9) on cur in place, given prev, the
// unfiltered previous row (zeros above the first), with bpp bytes a pixel.
func unfilter(ft byte, cur, prev []byte, bpp int) error {
	n := len(cur)
	prev = prev[:n]
	switch ft {
	case ftNone:
	case ftSub:
		for i := bpp; i < n; i++ {
			cur[i] += cur[i-bpp]
		}
	case ftUp:
		for i, p := range prev {
			cur[i] += p
		}
	case ftAverage:
		for i := 0; i < bpp && i < n; i++ {
			cur[i] += prev[i] / 2
		}
		for i := bpp; i < n; i++ {
			cur[i] += uint8((uint(cur[i-bpp]) + uint(prev[i])) / 2)
		}
	case ftPaeth:
		for i := 0; i < bpp && i < n; i++ {
			cur[i] += prev[i] // the predictor of the first pixel is the byte above
		}
		for i := bpp; i < n; i++ {
			// The Paeth predictor of left a, up b and up-left c: of the three, the one nearest a+b−c, ties in
			// the order a, b, c (as in filterRow).
			a, b, c := int(cur[i-bpp]), int(prev[i]), int(prev[i-bpp])
			pa, pb, pc := iabs(b-c), iabs(a-c), iabs(a+b-2*c)
			p, best := c, pc
			if pb <= best {
				p, best = b, pb
			}
			if pa <= best {
				p = a
			}
			cur[i] += uint8(p)
		}
	default:
		return pngRefusal("bad filter type")
	}
	return nil
}
