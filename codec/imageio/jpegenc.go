package imageio

import (
	"bufio"
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
// image/jpeg, which always writes 4:2:0), Huffman tables optimised for the image, a JFIF header and, when icc is
// not nil, the ICC profile in APP2 segments. The pixels are written upright and no EXIF is written, so the
// orientation is the normal one. Alpha is dropped (JPEG has none): callers that must keep transparency use PNG.
//
// The quantised coefficients of the whole image are kept for the second (entropy-coding) pass, with runs of
// zeros stored as one entry (see runMark): at most 6 bytes per pixel, about half that on photographs at
// quality 95, where most chroma coefficients are zero.
func EncodeJPEG(w io.Writer, img image.Image, quality int, icc []byte) error {
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
	e := newJPEGEncoder(b.Dx(), b.Dy(), quality)
	e.transform(img)
	var stats [4][257]int64 // DC luma, AC luma, DC chroma, AC chroma
	e.count(&stats)
	var tables [4]huffTable
	for i := range tables {
		tables[i] = buildHuffman(stats[i][:])
	}
	bw := bufio.NewWriterSize(w, 1<<16)
	if err := writeJPEGHeaders(bw, e, &tables, icc); err != nil {
		return err
	}
	bits := &bitWriter{w: bw}
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

// dctCos[u][x] = c(u)/2 · cos((2x+1)uπ/16), the 1-D DCT-II basis of the JPEG FDCT.
var dctCos = func() [8][8]float32 {
	var t [8][8]float32
	for u := 0; u < 8; u++ {
		c := 1.0
		if u == 0 {
			c = 1 / math.Sqrt2
		}
		for x := 0; x < 8; x++ {
			t[u][x] = float32(c / 2 * math.Cos(float64(2*x+1)*float64(u)*math.Pi/16))
		}
	}
	return t
}()

type jpegEncoder struct {
	w, h   int
	bw, bh int          // blocks per row and column
	quant  [2][64]int32 // natural order
	rows   [][]int16    // per block row, in scan order (per block Y, Cb, Cr): the DC, then the AC coefficients in zigzag order, zero runs as runMark+length
	recipQ [2][64]float32
}

func newJPEGEncoder(w, h, quality int) *jpegEncoder {
	e := &jpegEncoder{w: w, h: h, bw: (w + 7) / 8, bh: (h + 7) / 8}
	scale := 200 - 2*quality
	if quality < 50 {
		scale = 5000 / quality
	}
	for t := 0; t < 2; t++ {
		for i, q := range baseQuant[t] {
			v := int32(min(255, max(1, (q*scale+50)/100)))
			e.quant[t][i] = v
			e.recipQ[t][i] = 1 / float32(v)
		}
	}
	e.rows = make([][]int16, e.bh)
	return e
}

// transform converts to YCbCr (JFIF, full range), runs the FDCT and quantises every block. Edge blocks repeat
// the last row and column. The colour conversion runs on whole rows of a block row first (planar, padded to
// whole blocks), so that the block loop only gathers.
func (e *jpegEncoder) transform(img image.Image) {
	b := img.Bounds()
	rgb := make([]uint8, 3*e.w)
	pw := e.bw * 8
	var planes [3][8][]float32 // Y, Cb, Cr rows of the current block row
	for c := range planes {
		for i := range planes[c] {
			planes[c][i] = make([]float32, pw)
		}
	}
	var blk [3][64]float32
	var out [64]int16
	scratch := make([]int16, 0, e.bw*3*64)
	for by := 0; by < e.bh; by++ {
		scratch = scratch[:0]
		for i := 0; i < 8; i++ {
			rgbRow(img, b.Min.X, b.Min.Y+min(by*8+i, e.h-1), rgb)
			py, pcb, pcr := planes[0][i][:pw], planes[1][i][:pw], planes[2][i][:pw]
			for x := 0; x < e.w; x++ {
				r, g, bl := float32(rgb[3*x]), float32(rgb[3*x+1]), float32(rgb[3*x+2])
				py[x] = 0.299*r + 0.587*g + 0.114*bl - 128
				pcb[x] = -0.168736*r - 0.331264*g + 0.5*bl
				pcr[x] = 0.5*r - 0.418688*g - 0.081312*bl
			}
			for x := e.w; x < pw; x++ {
				py[x], pcb[x], pcr[x] = py[e.w-1], pcb[e.w-1], pcr[e.w-1]
			}
		}
		for bx := 0; bx < e.bw; bx++ {
			for c := 0; c < 3; c++ {
				for j := 0; j < 8; j++ {
					copy(blk[c][j*8:j*8+8], planes[c][j][bx*8:bx*8+8])
				}
				t := min(c, 1)
				fdct(&blk[c])
				q := &e.recipQ[t]
				for zi, ni := range zigzag {
					v := blk[c][ni] * q[ni]
					if v >= 0 {
						out[zi] = int16(v + 0.5)
					} else {
						out[zi] = int16(v - 0.5)
					}
				}
				scratch = append(scratch, out[0])
				run := int16(0)
				for _, v := range out[1:] {
					if v == 0 {
						run++
						continue
					}
					if run > 0 {
						scratch = append(scratch, runMark+run)
						run = 0
					}
					scratch = append(scratch, v)
				}
				if run > 0 {
					scratch = append(scratch, runMark+run)
				}
			}
		}
		e.rows[by] = slices.Clone(scratch)
	}
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

// fdct is the separable 8×8 DCT-II of JPEG (orthonormal scaling: F(0,0) = 8·mean).
func fdct(b *[64]float32) {
	var tmp [64]float32
	for y := 0; y < 8; y++ {
		row := b[y*8 : y*8+8]
		for u := 0; u < 8; u++ {
			c := &dctCos[u]
			tmp[y*8+u] = c[0]*row[0] + c[1]*row[1] + c[2]*row[2] + c[3]*row[3] + c[4]*row[4] + c[5]*row[5] +
				c[6]*row[6] + c[7]*row[7]
		}
	}
	for u := 0; u < 8; u++ {
		for v := 0; v < 8; v++ {
			c := &dctCos[v]
			b[v*8+u] = c[0]*tmp[u] + c[1]*tmp[8+u] + c[2]*tmp[16+u] + c[3]*tmp[24+u] + c[4]*tmp[32+u] +
				c[5]*tmp[40+u] + c[6]*tmp[48+u] + c[7]*tmp[56+u]
		}
	}
}

// count and write walk the coefficients in scan order (interleaved Y, Cb, Cr blocks) and, per Huffman symbol
// (tables: 0 DC luma, 1 AC luma, 2 DC chroma, 3 AC chroma), count it or write its code and its extra bits. They
// are the same walk written twice, without a callback per symbol: the entropy passes are a third of the
// encoder's time.
func (e *jpegEncoder) count(stats *[4][257]int64) {
	var pred [3]int
	for _, st := range e.rows {
		for i := 0; i < len(st); {
			for c := 0; c < 3; c++ {
				dc, ac := &stats[0], &stats[1]
				if c > 0 {
					dc, ac = &stats[2], &stats[3]
				}
				d := int(st[i]) - pred[c]
				pred[c] = int(st[i])
				i++
				s, _ := magnitude(d)
				dc[s]++
				run := 0
				for pos := 1; pos < 64; {
					v := st[i]
					i++
					if v < runLimit {
						n := int(v - runMark)
						run += n
						pos += n
						continue
					}
					pos++
					for run > 15 {
						ac[0xF0]++
						run -= 16
					}
					s, _ := magnitude(int(v))
					ac[uint8(run<<4)|s]++
					run = 0
				}
				if run > 0 {
					ac[0x00]++
				}
			}
		}
	}
}

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
				bits.write(uint32(dc.code[s])<<s|uint32(extra)&(1<<s-1), dc.size[s]+s)
				run := 0
				for pos := 1; pos < 64; {
					v := st[i]
					i++
					if v < runLimit {
						n := int(v - runMark)
						run += n
						pos += n
						continue
					}
					pos++
					for run > 15 {
						bits.write(uint32(ac.code[0xF0]), ac.size[0xF0])
						run -= 16
					}
					s, extra := magnitude(int(v))
					sym := uint8(run<<4) | s
					bits.write(uint32(ac.code[sym])<<s|uint32(extra)&(1<<s-1), ac.size[sym]+s)
					run = 0
				}
				if run > 0 {
					bits.write(uint32(ac.code[0x00]), ac.size[0x00])
				}
			}
		}
	}
}

// magnitude returns the JPEG size category of v and its extra bits (one's complement for negative values).
func magnitude(v int) (uint8, uint16) {
	a := v
	if a < 0 {
		a = -a
	}
	s := uint8(bits.Len(uint(a)))
	if v < 0 {
		v += (1 << s) - 1
	}
	return s, uint16(v)
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

func writeJPEGHeaders(w *bufio.Writer, e *jpegEncoder, tables *[4]huffTable, icc []byte) error {
	seg := func(marker byte, payload []byte) {
		w.Write([]byte{0xFF, marker, byte((len(payload) + 2) >> 8), byte(len(payload) + 2)})
		w.Write(payload)
	}
	w.Write([]byte{0xFF, 0xD8})
	seg(0xE0, []byte{'J', 'F', 'I', 'F', 0, 1, 1, 0, 0, 1, 0, 1, 0, 0})
	if len(icc) > 0 {
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
// (a code and its extra bits together).
type bitWriter struct {
	w   *bufio.Writer
	acc uint64
	n   uint8 // bits pending in acc, below 8 between writes
	err error
}

func (b *bitWriter) write(v uint32, n uint8) {
	b.acc = b.acc<<n | uint64(v)&(1<<n-1)
	b.n += n
	for b.n >= 8 {
		c := byte(b.acc >> (b.n - 8))
		b.n -= 8
		if err := b.w.WriteByte(c); err != nil && b.err == nil {
			b.err = err
		}
		if c == 0xFF {
			b.w.WriteByte(0)
		}
	}
}

// flush pads the last byte with one bits.
func (b *bitWriter) flush() {
	if b.n > 0 {
		b.write(1<<(8-b.n)-1, 8-b.n)
	}
}
