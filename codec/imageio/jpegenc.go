package imageio

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"image"
	"io"
	"math"
	"math/bits"
	"slices"
	"sort"
)

// EncodeJPEG writes img as a baseline JPEG at quality 1..100 (the IJG scaling of the Annex K tables) with full
// chroma resolution (4:4:4: the marked luma and colour edges are not smeared by subsampling, unlike
// image/jpeg, which always writes 4:2:0), Huffman tables optimised for the image, a JFIF header, md.EXIF (when not
// nil) in an APP1 "Exif" segment, md.XMP (when not nil) in an APP1 XMP segment after it and md.ICC (when not
// nil) in APP2 segments. The pixels are written as they are:
// EXIF that comes from a Picture says orientation 1. Alpha is dropped (JPEG has none): callers that must keep transparency use PNG.
//
// The quantised coefficients of the whole image are kept for the second (entropy-coding) pass, with runs of
// zeros stored as one entry (see runMark): at most 6 bytes per pixel, about half that on photographs at
// quality 95, where most chroma coefficients are zero.
func EncodeJPEG(w io.Writer, img image.Image, quality int, md Metadata) error {
	b := img.Bounds()
	if b.Empty() {
		return errors.New("imageio: encoding JPEG: empty image")
	}
	if b.Dx() > 65535 || b.Dy() > 65535 {
		return fmt.Errorf("imageio: encoding JPEG: %dx%d exceeds 65535 pixels per side", b.Dx(), b.Dy())
	}
	if quality < 1 || quality > 100 {
		return fmt.Errorf("imageio: encoding JPEG: quality %d outside 1..100", quality)
	}
	if err := checkEXIF(md.EXIF); err != nil {
		return fmt.Errorf("imageio: encoding JPEG: %w", err)
	}
	if err := checkXMP(md.XMP); err != nil {
		return fmt.Errorf("imageio: encoding JPEG: %w", err)
	}
	e := newJPEGEncoder(b.Dx(), b.Dy(), quality)
	var stats [4][257]int64 // DC luma, AC luma, DC chroma, AC chroma
	e.transform(img, &stats)
	var tables [4]huffTable
	for i := range tables {
		tables[i] = buildHuffman(stats[i][:])
	}
	bw := bufio.NewWriterSize(w, 1<<16)
	if err := writeJPEGHeaders(bw, e, &tables, md); err != nil {
		return err
	}
	bits := &bitWriter{w: bw, buf: make([]byte, 0, bitBufSize+8)}
	e.write(bits, &tables)
	bits.flush()
	if bits.err != nil {
		return fmt.Errorf("imageio: encoding JPEG: %w", bits.err)
	}
	bw.Write([]byte{0xFF, 0xD9})
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("imageio: encoding JPEG: %w", err)
	}
	return nil
}

// Annex K base quantisation tables in natural (row-major) order.
var baseQuant = [2][64]int{{
	16, 11, 10, 16, 24, 40, 51, 61,
	12, 12, 14, 19, 26, 58, 60, 55,
	14, 13, 16, 24, 40, 57, 69, 56,
	14, 17, 22, 29, 51, 87, 80, 62,
	18, 22, 37, 56, 68, 109, 103, 77,
	24, 35, 55, 64, 81, 104, 113, 92,
	49, 64, 78, 87, 103, 121, 120, 101,
	72, 92, 95, 98, 112, 100, 103, 99,
}, {
	17, 18, 24, 47, 99, 99, 99, 99,
	18, 21, 26, 66, 99, 99, 99, 99,
	24, 26, 56, 99, 99, 99, 99, 99,
	47, 66, 99, 99, 99, 99, 99, 99,
	99, 99, 99, 99, 99, 99, 99, 99,
	99, 99, 99, 99, 99, 99, 99, 99,
	99, 99, 99, 99, 99, 99, 99, 99,
	99, 99, 99, 99, 99, 99, 99, 99,
}}

// zigzag[i] is the natural index of the i-th coefficient in zigzag order.
var zigzag = func() [64]int {
	var z [64]int
	i := 0
	for s := 0; s < 15; s++ { // anti-diagonals x+y = s, alternating direction
		for k := 0; k <= s; k++ {
			x, y := k, s-k
			if s%2 == 1 {
				x, y = s-k, k
			}
			if x < 8 && y < 8 {
				z[i] = y*8 + x
				i++
			}
		}
	}
	return z
}()

// aanScale[k] = √2·cos(kπ/16) (1 for k = 0): the AAN forward DCT (fdct) returns coefficient (u, v) of the JPEG
// FDCT multiplied by 8·aanScale[u]·aanScale[v]; the encoder divides that out together with the quantiser.
var aanScale = func() [8]float64 {
	var s [8]float64
	s[0] = 1
	for k := 1; k < 8; k++ {
		s[k] = math.Sqrt2 * math.Cos(float64(k)*math.Pi/16)
	}
	return s
}()

// Colour conversion tables (JFIF, full range): Y−128, Cb and Cr of a pixel are the sums of three entries, one
// per channel, so the conversion is nine loads and six additions instead of nine multiplications and three
// integer-to-float conversions.
var yccTab = func() (t [9][256]float32) {
	for v := 0; v < 256; v++ {
		f := float32(v)
		t[0][v], t[1][v], t[2][v] = 0.299*f-128, 0.587*f, 0.114*f
		t[3][v], t[4][v], t[5][v] = -0.168736*f, -0.331264*f, 0.5*f
		t[6][v], t[7][v], t[8][v] = 0.5*f, -0.418688*f, -0.081312*f
	}
	return t
}()

type jpegEncoder struct {
	w, h   int
	bw, bh int            // blocks per row and column
	quant  [2][64]int32   // natural order
	rows   [][]int16      // per block row, in scan order (per block Y, Cb, Cr): the DC, then the AC coefficients in zigzag order, zero runs as runMark+length
	scale  [2][64]float32 // zigzag order: 1/(quantiser · 8·aanScale[u]·aanScale[v]), what multiplies fdct's output
}

func newJPEGEncoder(w, h, quality int) *jpegEncoder {
	e := &jpegEncoder{w: w, h: h, bw: (w + 7) / 8, bh: (h + 7) / 8}
	scale := 200 - 2*quality
	if quality < 50 {
		scale = 5000 / quality
	}
	for t := 0; t < 2; t++ {
		for i, q := range baseQuant[t] {
			e.quant[t][i] = int32(min(255, max(1, (q*scale+50)/100)))
		}
		for zi, ni := range zigzag {
			e.scale[t][zi] = float32(1 / (float64(e.quant[t][ni]) * 8 * aanScale[ni%8] * aanScale[ni/8]))
		}
	}
	e.rows = make([][]int16, e.bh)
	return e
}

// transform converts to YCbCr (JFIF, full range), runs the FDCT, quantises every block and counts the Huffman
// symbols of the whole image into stats (DC luma, AC luma, DC chroma, AC chroma). Edge blocks repeat
// the last row and column. The colour conversion runs on whole rows of a block row first (planar, padded to
// whole blocks), so that the block loop only gathers.
func (e *jpegEncoder) transform(img image.Image, stats *[4][257]int64) {
	b := img.Bounds()
	rgb := make([]uint8, 3*e.w)
	pw := e.bw * 8
	var planes [3][8][]float32 // Y, Cb, Cr rows of the current block row
	for c := range planes {
		for i := range planes[c] {
			planes[c][i] = make([]float32, pw)
		}
	}
	var blk [64]float32
	var pred [3]int
	scratch := make([]int16, 0, e.bw*3*64)
	for by := 0; by < e.bh; by++ {
		scratch = scratch[:0]
		for i := 0; i < 8; i++ {
			y := b.Min.Y + min(by*8+i, e.h-1)
			if m, ok := img.(*image.NRGBA); ok { // the usual case: converted in place, alpha skipped
				toYCbCr(m.Pix[m.PixOffset(b.Min.X, y):][:4*e.w], 4, planes[0][i][:pw], planes[1][i][:pw], planes[2][i][:pw])
				continue
			}
			rgbRow(img, b.Min.X, y, rgb)
			toYCbCr(rgb, 3, planes[0][i][:pw], planes[1][i][:pw], planes[2][i][:pw])
		}
		for bx := 0; bx < e.bw; bx++ {
			for c := 0; c < 3; c++ {
				for j := 0; j < 8; j++ {
					copy(blk[j*8:j*8+8], planes[c][j][bx*8:bx*8+8])
				}
				fdct(&blk)
				t := min(c, 1)
				scratch = quantize(scratch, &blk, &e.scale[t], &pred[c], &stats[2*t], &stats[2*t+1])
			}
		}
		e.rows[by] = slices.Clone(scratch)
	}
}

// toYCbCr converts a row of 8-bit RGB (step bytes per pixel: 3, or 4 with alpha last) to Y−128, Cb and Cr, and
// pads the rows past the image's width with its last pixel.
func toYCbCr(rgb []uint8, step int, py, pcb, pcr []float32) {
	t := &yccTab
	w := len(rgb) / step
	py, pcb, pcr = py[:len(py)], pcb[:len(py)], pcr[:len(py)]
	for x := 0; x < w; x++ {
		p := rgb[step*x : step*x+3 : step*x+3]
		r, g, bl := p[0], p[1], p[2]
		py[x] = t[0][r] + t[1][g] + t[2][bl]
		pcb[x] = t[3][r] + t[4][g] + t[5][bl]
		pcr[x] = t[6][r] + t[7][g] + t[8][bl]
	}
	for x := w; x < len(py); x++ {
		py[x], pcb[x], pcr[x] = py[w-1], pcb[w-1], pcr[w-1]
	}
}

// quantize divides fdct's output by the quantiser (scale, zigzag order: the factor folds in fdct's scaling),
// rounds to the nearest integer (halves to even) and appends the block to dst: the DC, then the non-zero AC
// coefficients in zigzag order with each run of zeros before one, and at the end, as one runMark entry. It
// counts the block's Huffman symbols into dcStats and acStats (pred: the component's previous DC). The
// non-zero coefficients are found through a bit mask, so a block of mostly zeros (most chroma blocks at quality
// 95) costs little past the multiplications.
func quantize(dst []int16, blk *[64]float32, scale *[64]float32, pred *int, dcStats, acStats *[257]int64) []int16 {
	// Adding 1.5·2²³ leaves round(v) in the low bits of the float's mantissa (|v| < 2²² here: quantised
	// coefficients of 8-bit samples stay within ±2048), without a float-to-integer conversion.
	const magic = 1.5 * (1 << 23)
	var out [64]int16
	var nz uint64
	for zi := 0; zi < 64; zi++ {
		q := int16(math.Float32bits(blk[zigzag[zi]&63]*scale[zi] + magic))
		out[zi] = q
		nz |= uint64(uint16(q|-q)>>15) << zi // bit zi set when q ≠ 0
	}
	d := int(out[0]) - *pred
	*pred = int(out[0])
	dcStats[bits.Len(uint(max(d, -d)))]++
	dst = append(dst, out[0])
	last := 0 // zigzag index of the last coefficient written
	for m := nz &^ 1; m != 0; m &= m - 1 {
		zi := bits.TrailingZeros64(m)
		run := zi - last - 1
		if run > 0 {
			dst = append(dst, runMark+int16(run))
		}
		for ; run > 15; run -= 16 {
			acStats[0xF0]++ // ZRL: sixteen zeros
		}
		v := int(out[zi])
		acStats[run<<4|bits.Len(uint(max(v, -v)))]++
		dst = append(dst, out[zi])
		last = zi
	}
	if last < 63 {
		dst = append(dst, runMark+int16(63-last))
		acStats[0x00]++ // EOB
	}
	return dst
}

// runMark+n (n = 1..63) stands for n zero coefficients in a row. Quantised coefficients of 8-bit samples stay
// within ±2048, far from these values.
const runMark = math.MinInt16

// runLimit: entries below it are zero runs.
const runLimit = runMark + 64

// rgbRow writes the 8-bit RGB of image row y into out (3 bytes per pixel), compositing nothing: alpha is
// ignored, as JPEG cannot carry it.
func rgbRow(img image.Image, x0, y int, out []uint8) {
	switch m := img.(type) {
	case *image.NRGBA:
		src := m.Pix[m.PixOffset(x0, y):]
		for x := 0; x < len(out)/3; x++ {
			out[3*x], out[3*x+1], out[3*x+2] = src[4*x], src[4*x+1], src[4*x+2]
		}
	case *image.NRGBA64:
		src := m.Pix[m.PixOffset(x0, y):]
		for x := 0; x < len(out)/3; x++ {
			for c := 0; c < 3; c++ {
				v := uint32(src[8*x+2*c])<<8 | uint32(src[8*x+2*c+1])
				out[3*x+c] = uint8((v*255 + 32767) / 65535)
			}
		}
	default:
		for x := 0; x < len(out)/3; x++ {
			r, g, bl, a := img.At(x0+x, y).RGBA()
			if a > 0 && a < 0xffff { // un-premultiply
				r, g, bl = r*0xffff/a, g*0xffff/a, bl*0xffff/a
			}
			out[3*x], out[3*x+1], out[3*x+2] = uint8(r>>8), uint8(g>>8), uint8(bl>>8)
		}
	}
}

// fdct is the separable 8×8 forward DCT by the factorisation of Arai, Agui and Nakajima (5 multiplications and
// 29 additions per 8 samples), in place; coefficient (u, v) comes out multiplied by 8·aanScale[u]·aanScale[v]
// (newJPEGEncoder folds that into the quantisation).
func fdct(b *[64]float32) {
	for i := 0; i < 8; i++ {
		fdct8(b, 8*i, 1)
	}
	for i := 0; i < 8; i++ {
		fdct8(b, i, 8)
	}
}

// fdct8 is the 1-D scaled DCT of the 8 samples b[o], b[o+s], ..., b[o+7s], in place: output k is 2√2·aanScale[k]
// times C(k)/2·Σₙ x[n]·cos((2n+1)kπ/16) (C(0) = 1/√2, else 1), so that the two passes give 8·aanScale[u]·aanScale[v]
// times the JPEG FDCT.
func fdct8(b *[64]float32, o, s int) {
	const (
		c4    = 0.707106781 // cos(4π/16)
		c6s   = 0.382683433 // cos(6π/16)
		c2mc6 = 0.541196100 // cos(2π/16) − cos(6π/16)
		c2pc6 = 1.306562965 // cos(2π/16) + cos(6π/16)
	)
	d := b[o : o+7*s+1 : o+7*s+1]
	d0, d1, d2, d3, d4, d5, d6, d7 := d[0], d[s], d[2*s], d[3*s], d[4*s], d[5*s], d[6*s], d[7*s]
	s07, d07 := d0+d7, d0-d7
	s16, d16 := d1+d6, d1-d6
	s25, d25 := d2+d5, d2-d5
	s34, d34 := d3+d4, d3-d4
	// Even part.
	e0, e3 := s07+s34, s07-s34
	e1, e2 := s16+s25, s16-s25
	d[0], d[4*s] = e0+e1, e0-e1
	z := (e2 + e3) * c4
	d[2*s], d[6*s] = e3+z, e3-z
	// Odd part.
	o0, o1, o2 := d34+d25, d25+d16, d16+d07
	z5 := (o0 - o2) * c6s
	z2 := c2mc6*o0 + z5
	z4 := c2pc6*o2 + z5
	z3 := o1 * c4
	z11, z13 := d07+z3, d07-z3
	d[5*s], d[3*s] = z13+z2, z13-z2
	d[s], d[7*s] = z11+z4, z11-z4
}

// write walks the coefficients in scan order (interleaved Y, Cb, Cr blocks) and writes the code of each
// Huffman symbol (tables: 0 DC luma, 1 AC luma, 2 DC chroma, 3 AC chroma) and its extra bits; quantize counted
// the same symbols.
func (e *jpegEncoder) write(bits *bitWriter, tables *[4]huffTable) {
	var pred [3]int
	for _, st := range e.rows {
		for i := 0; i < len(st); {
			for c := 0; c < 3; c++ {
				dc, ac := &tables[0], &tables[1]
				if c > 0 {
					dc, ac = &tables[2], &tables[3]
				}
				d := int(st[i]) - pred[c]
				pred[c] = int(st[i])
				i++
				s, extra := magnitude(d)
				bits.write(uint64(dc.code[s])<<s|extra, uint(dc.size[s])+s)
				run := uint(0)
				for pos := 1; pos < 64; {
					v := st[i]
					i++
					if v < runLimit {
						n := uint(v - runMark)
						run += n
						pos += int(n)
						continue
					}
					pos++
					for ; run > 15; run -= 16 {
						bits.write(uint64(ac.code[0xF0]), uint(ac.size[0xF0]))
					}
					s, extra := magnitude(int(v))
					sym := uint8(run<<4) | uint8(s)
					bits.write(uint64(ac.code[sym])<<s|extra, uint(ac.size[sym])+s)
					run = 0
				}
				if run > 0 {
					bits.write(uint64(ac.code[0x00]), uint(ac.size[0x00]))
				}
			}
		}
	}
}

// magnitude returns the JPEG size category s of v and its s extra bits (one's complement for negative values),
// without a branch.
func magnitude(v int) (uint, uint64) {
	sign := v >> 63 // -1 for negative v, else 0
	s := uint(bits.Len(uint((v ^ sign) - sign)))
	return s, uint64(v+sign) & (1<<s - 1)
}

// huffTable is a canonical Huffman code: BITS (codes per length 1..16), HUFFVAL, and the code of each symbol.
type huffTable struct {
	bits [17]uint8
	vals []uint8
	code [256]uint16
	size [256]uint8
}

// buildHuffman makes a length-limited (16 bits) code for the symbol frequencies freq[0..255], by the procedure
// of ITU T.81 Annex K.2 (a reserved symbol 256 keeps any code from being all ones).
func buildHuffman(freq []int64) huffTable {
	var f [257]int64
	copy(f[:], freq[:256])
	f[256] = 1
	var codesize [257]int
	var others [257]int
	for i := range others {
		others[i] = -1
	}
	for {
		v1, v2 := -1, -1
		for i := 0; i < 257; i++ { // least frequency, ties to the larger symbol
			if f[i] > 0 && (v1 < 0 || f[i] <= f[v1]) {
				v1 = i
			}
		}
		for i := 0; i < 257; i++ {
			if i != v1 && f[i] > 0 && (v2 < 0 || f[i] <= f[v2]) {
				v2 = i
			}
		}
		if v2 < 0 {
			break
		}
		f[v1] += f[v2]
		f[v2] = 0
		codesize[v1]++
		for others[v1] >= 0 {
			v1 = others[v1]
			codesize[v1]++
		}
		others[v1] = v2
		codesize[v2]++
		for others[v2] >= 0 {
			v2 = others[v2]
			codesize[v2]++
		}
	}
	var count [33]int
	for _, s := range codesize {
		if s > 0 {
			count[min(s, 32)]++
		}
	}
	for i := 32; i > 16; i-- {
		for count[i] > 0 {
			j := i - 2
			for count[j] == 0 {
				j--
			}
			count[i] -= 2
			count[i-1]++
			count[j+1] += 2
			count[j]--
		}
	}
	i := 16
	for count[i] == 0 {
		i--
	}
	count[i]-- // drop the reserved symbol's code (the longest)
	var t huffTable
	for l := 1; l <= 16; l++ {
		t.bits[l] = uint8(count[l])
	}
	// Symbols by increasing code size (stable in symbol order), the reserved one excluded.
	var syms []int
	for s := 0; s < 256; s++ {
		if codesize[s] > 0 {
			syms = append(syms, s)
		}
	}
	sort.SliceStable(syms, func(a, b int) bool { return codesize[syms[a]] < codesize[syms[b]] })
	for _, s := range syms {
		t.vals = append(t.vals, uint8(s))
	}
	// Canonical codes from BITS and HUFFVAL.
	code, k := uint16(0), 0
	for l := 1; l <= 16; l++ {
		for n := 0; n < int(t.bits[l]); n++ {
			s := t.vals[k]
			t.code[s], t.size[s] = code, uint8(l)
			code++
			k++
		}
		code <<= 1
	}
	return t
}

func writeJPEGHeaders(w *bufio.Writer, e *jpegEncoder, tables *[4]huffTable, md Metadata) error {
	seg := func(marker byte, payload []byte) {
		w.Write([]byte{0xFF, marker, byte((len(payload) + 2) >> 8), byte(len(payload) + 2)})
		w.Write(payload)
	}
	w.Write([]byte{0xFF, 0xD8})
	seg(0xE0, []byte{'J', 'F', 'I', 'F', 0, 1, 1, 0, 0, 1, 0, 1, 0, 0})
	// JFIF wants its APP0 right after SOI and Exif its APP1; readers of either look through the APPn segments,
	// and JFIF then Exif is the order libjpeg-based tools write.
	if len(md.EXIF) > 0 {
		seg(0xE1, append([]byte(exifHeader), md.EXIF...))
	}
	if len(md.XMP) > 0 { // readers expect the Exif APP1 first when both are there
		seg(0xE1, append([]byte(xmpJPEGHeader), md.XMP...))
	}
	if icc := md.ICC; len(icc) > 0 {
		const chunk = 65519 // 65533 - len("ICC_PROFILE\x00") - 2
		n := (len(icc) + chunk - 1) / chunk
		if n > 255 {
			return errors.New("imageio: encoding JPEG: ICC profile too large")
		}
		for i := 0; i < n; i++ {
			part := icc[i*chunk : min(len(icc), (i+1)*chunk)]
			seg(0xE2, append(append([]byte("ICC_PROFILE\x00"), byte(i+1), byte(n)), part...))
		}
	}
	for t := 0; t < 2; t++ {
		p := []byte{byte(t)}
		for _, ni := range zigzag {
			p = append(p, byte(e.quant[t][ni]))
		}
		seg(0xDB, p)
	}
	seg(0xC0, []byte{8, byte(e.h >> 8), byte(e.h), byte(e.w >> 8), byte(e.w), 3,
		1, 0x11, 0, 2, 0x11, 1, 3, 0x11, 1})
	for i, t := range tables {
		class, id := byte(i%2), byte(i/2) // DC = 0, AC = 1; table 0 luma, 1 chroma
		p := []byte{class<<4 | id}
		p = append(p, t.bits[1:]...)
		p = append(p, t.vals...)
		seg(0xC4, p)
	}
	seg(0xDA, []byte{3, 1, 0x00, 2, 0x11, 3, 0x11, 0, 63, 0})
	return nil
}

// bitWriter packs Huffman codes MSB first, stuffing a zero byte after every 0xFF. One write takes up to 32 bits
// (a code and its extra bits together), with no bits set above them. Bits go out 32 at a time into its own buffer, byte by byte only when
// one of the four bytes is 0xFF.
type bitWriter struct {
	w   io.Writer
	buf []byte
	acc uint64 // pending bits in the low n bits
	n   uint   // below 32 between writes
	err error
}

const bitBufSize = 1 << 16

func (b *bitWriter) write(v uint64, n uint) {
	b.acc = b.acc<<n | v
	b.n += n
	if b.n >= 32 {
		b.put32()
	}
}

// put32 moves the oldest 32 pending bits to the buffer.
func (b *bitWriter) put32() {
	b.n -= 32
	v := uint32(b.acc >> b.n)
	if x := ^v; (x-0x01010101)&^x&0x80808080 == 0 { // no byte of v is 0xFF
		b.buf = binary.BigEndian.AppendUint32(b.buf, v)
	} else {
		for sh := 24; sh >= 0; sh -= 8 {
			c := byte(v >> sh)
			b.buf = append(b.buf, c)
			if c == 0xFF {
				b.buf = append(b.buf, 0)
			}
		}
	}
	if len(b.buf) >= bitBufSize {
		b.drain()
	}
}

func (b *bitWriter) drain() {
	if b.err == nil {
		_, b.err = b.w.Write(b.buf)
	}
	b.buf = b.buf[:0]
}

// flush writes the pending bits, the last byte padded with one bits, and drains the buffer.
func (b *bitWriter) flush() {
	for b.n >= 8 {
		b.n -= 8
		c := byte(b.acc >> b.n)
		b.buf = append(b.buf, c)
		if c == 0xFF {
			b.buf = append(b.buf, 0)
		}
	}
	if b.n > 0 {
		c := byte(b.acc<<(8-b.n)) | byte(1<<(8-b.n)-1)
		b.buf = append(b.buf, c)
		if c == 0xFF {
			b.buf = append(b.buf, 0)
		}
		b.n = 0
	}
	b.drain()
}
