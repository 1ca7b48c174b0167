package imageio

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"image"
	"math"
)

// This file is a decoder for the JPEGs that cameras, phones and this package's own encoder write: baseline or
// extended sequential Huffman, 8-bit, one interleaved scan, grey or YCbCr with 4:4:4, 4:2:2, 4:4:0 or 4:2:0
// chroma, with or without restart markers. It decodes straight into the image the caller wants (the NRGBA of
// DecodeBytes without the YCbCr copy, or image/jpeg's own layout for the analysis and read-back paths), with a
// Huffman decoder that reads whole symbols and small coefficients in one table lookup and a floating-point
// separable inverse DCT (Arai-Agui-Nakajima) that skips blocks without AC coefficients.
//
// It is a fast path, not a second opinion: anything else, and anything odd (progressive or arithmetic coding,
// 12-bit samples, four components, an Adobe APP14 segment that declares RGB, RGB component ids, several scans,
// undefined tables, over-subscribed Huffman tables, coefficients out of the 8-bit range, a marker it does not
// expect, truncation, ...) makes it give up with errJPEGFallback, and image/jpeg decodes the file instead, so what is accepted and
// what is refused, and with which error, stays image/jpeg's. On the files it does decode, samples are within
// ±1 of image/jpeg's (its integer IDCT and this float one round differently); colour conversion is the same
// integer arithmetic as image/color's, so the RGB pixels follow the samples.
//
// Costs are bounded like image/jpeg's: one scan, whose work is proportional to the MCU count given by the
// frame header, which checkAll has already checked against the pixel limit; at most maxJPEGHuffTables table
// builds; ctx is checked every MCU row.

// errJPEGFallback: the fast decoder does not handle this file; image/jpeg decodes it.
var errJPEGFallback = errors.New("imageio: jpeg: not handled by the fast decoder")

// jpegOut selects the layout the fast decoder produces.
type jpegOut int

const (
	jpegNative jpegOut = iota // *image.YCbCr or *image.Gray laid out as image/jpeg lays them out
	jpegNRGBA                 // *image.NRGBA with bounds (0,0)-(w,h), as toNRGBA would make of the native image
)

// maxDequant bounds a dequantised coefficient. Samples of 8 bits give DCT coefficients of magnitude at most
// 1024 (the DC of a flat block at 0 or 255; AC ones stay under 930), plus half a quantiser step of rounding; a
// larger one can only come from a crafted file, which image/jpeg then decodes (its fixed-point IDCT overflows
// differently from this float one: FuzzFastJPEG found pixels 255 apart with coefficients near 8192).
const maxDequant = 2048

// jpegHuff is one Huffman table with its lookups.
type jpegHuff struct {
	defined bool
	// fast maps the next 9 bits to (code length << 8 | symbol); a zero length means a longer code.
	fast [1 << jpegFastBits]uint16
	// fastAC, for AC tables, maps the next 9 bits to a whole coefficient when the code and its extra bits fit
	// in them: value << 16 | run << 8 | bits consumed; zero where they do not.
	fastAC [1 << jpegFastBits]int32
	// Canonical decoding of longer codes: the first l bits c are a code of length l (when no shorter code
	// matched) if c < maxCode[l], one past the last code of that length; delta[l] maps c to its index in vals.
	maxCode [18]uint32
	delta   [17]int32
	vals    [256]uint8
}

const jpegFastBits = 9

// maxJPEGHuffTables bounds the Huffman tables a file may define before the fast decoder leaves it to image/jpeg.
const maxJPEGHuffTables = 32

// jpegComp is a component of the frame: its id, sampling factors, quantiser and (from the scan) Huffman tables.
type jpegComp struct {
	id     uint8
	h, v   int
	tq     uint8
	td, ta uint8
}

// jpegDecoder is the state of one decode: the file, the headers read so far, the bit reader and the DC
// predictors.
type jpegDecoder struct {
	data        []byte
	pos         int
	w, h        int
	ncomp       int
	comps       [3]jpegComp
	order       [3]int // scan order: component indexes
	quant       [4][64]uint16
	qdefined    [4]bool
	huff        [2][4]jpegHuff
	ri          int
	tablesBuilt int
	sof         bool

	// Bit reader: acc holds nbits bits, most significant first; the last pad of them are zeros made up past a
	// marker or the end of data, and reading any of them is an error.
	acc   uint64
	nbits int
	pad   int

	dc [3]int32
}

// decodeJPEGFast decodes data (a whole JPEG file) in layout out, or returns errJPEGFallback (or ctx's error).
func decodeJPEGFast(ctx context.Context, data []byte, out jpegOut) (image.Image, error) {
	d := &jpegDecoder{data: data}
	img, err := d.decode(ctx, out)
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return nil, cerr
		}
		return nil, errJPEGFallback
	}
	return img, nil
}

// errJPEG is the decoder's internal reason for giving up; decodeJPEGFast turns it into errJPEGFallback.
var errJPEG = errors.New("jpeg: fallback")

// nextMarker finds the next marker at or after d.pos the way image/jpeg does between segments (bytes before a
// 0xFF are skipped, "FF 00" is skipped, fill bytes before a marker are skipped) and returns it with d.pos after
// it. Like image/jpeg it returns 0 for "FF FF 00" (fill bytes, then a zero), which no caller accepts.
func (d *jpegDecoder) nextMarker() (uint8, error) {
	for {
		for d.pos < len(d.data) && d.data[d.pos] != 0xFF {
			d.pos++
		}
		if d.pos+1 >= len(d.data) {
			return 0, errJPEG
		}
		m := d.data[d.pos+1]
		d.pos += 2
		if m == 0 {
			continue
		}
		for m == 0xFF {
			if d.pos >= len(d.data) {
				return 0, errJPEG
			}
			m = d.data[d.pos]
			d.pos++
		}
		return m, nil
	}
}

func (d *jpegDecoder) decode(ctx context.Context, out jpegOut) (image.Image, error) {
	if err := d.headers(); err != nil {
		return nil, err
	}
	img, err := d.scan(ctx, out)
	if err != nil {
		return nil, err
	}
	return img, d.tail()
}

// headers reads the segments up to and including the start of the scan, leaving d.pos at its entropy-coded data.
func (d *jpegDecoder) headers() error {
	if len(d.data) < 2 || d.data[0] != 0xFF || d.data[1] != 0xD8 {
		return errJPEG
	}
	d.pos = 2
	for {
		m, err := d.nextMarker()
		if err != nil {
			return err
		}
		if m >= 0xD0 && m <= 0xD7 { // a stray restart marker: image/jpeg ignores it
			continue
		}
		if m == 0xD9 || d.pos+2 > len(d.data) {
			return errJPEG // EOI before the scan, or truncated
		}
		n := int(binary.BigEndian.Uint16(d.data[d.pos:])) - 2
		if n < 0 || d.pos+2+n > len(d.data) {
			return errJPEG
		}
		seg := d.data[d.pos+2 : d.pos+2+n]
		d.pos += 2 + n
		switch {
		case m == 0xC0 || m == 0xC1:
			err = d.sofSeg(seg)
		case m == 0xC4:
			err = d.dhtSeg(seg)
		case m == 0xDB:
			err = d.dqtSeg(seg)
		case m == 0xDD:
			if len(seg) != 2 {
				return errJPEG
			}
			d.ri = int(binary.BigEndian.Uint16(seg))
		case m == 0xDA:
			return d.sosSeg(seg)
		case m == 0xEE:
			// Adobe (Photoshop writes it): transform 0 declares RGB samples, which image/jpeg reads as such
			// unless there is a JFIF segment; leave those to it. Transform 1 is YCbCr, as without the segment.
			if len(seg) >= 12 && string(seg[:5]) == "Adobe" && seg[11] == 0 {
				return errJPEG
			}
		case m >= 0xE0 && m <= 0xEF, m == 0xFE:
			// other application segments and comments: nothing for the pixels
		default:
			return errJPEG
		}
		if err != nil {
			return err
		}
	}
}

// tail reads what follows the scan: image/jpeg skips junk and restart markers up to EOI; any other segment there
// (a second scan, new tables) sends the file to image/jpeg.
func (d *jpegDecoder) tail() error {
	for {
		m, err := d.nextMarker()
		if err != nil {
			return err
		}
		switch {
		case m == 0xD9:
			return nil
		case m >= 0xD0 && m <= 0xD7:
			continue
		}
		return errJPEG
	}
}

func (d *jpegDecoder) sofSeg(seg []byte) error {
	if d.sof || len(seg) < 6 || seg[0] != 8 {
		return errJPEG
	}
	d.sof = true
	d.h = int(binary.BigEndian.Uint16(seg[1:]))
	d.w = int(binary.BigEndian.Uint16(seg[3:]))
	d.ncomp = int(seg[5])
	if d.w <= 0 || d.h <= 0 || (d.ncomp != 1 && d.ncomp != 3) || len(seg) != 6+3*d.ncomp {
		return errJPEG
	}
	for i := 0; i < d.ncomp; i++ {
		c := &d.comps[i]
		c.id = seg[6+3*i]
		c.h, c.v = int(seg[7+3*i]>>4), int(seg[7+3*i]&15)
		c.tq = seg[8+3*i]
		if c.tq > 3 || c.h < 1 || c.h > 4 || c.v < 1 || c.v > 4 || c.h == 3 || c.v == 3 {
			return errJPEG
		}
		for j := 0; j < i; j++ {
			if d.comps[j].id == c.id {
				return errJPEG
			}
		}
	}
	if d.ncomp == 1 {
		d.comps[0].h, d.comps[0].v = 1, 1 // one component is non-interleaved whatever it says
		return nil
	}
	if d.comps[0].id == 'R' && d.comps[1].id == 'G' && d.comps[2].id == 'B' {
		return errJPEG // image/jpeg reads this as RGB unless there is a JFIF segment
	}
	// Luma at most 2x2; chroma the same for Cb and Cr and dividing luma's, subsampled by at most 2 each way
	// (4:4:4 written as 1x2 everywhere is common).
	y, cb, cr := d.comps[0], d.comps[1], d.comps[2]
	if y.h > 2 || y.v > 2 || cb.h != cr.h || cb.v != cr.v || y.h%cb.h != 0 || y.v%cb.v != 0 {
		return errJPEG
	}
	return nil
}

func (d *jpegDecoder) dqtSeg(seg []byte) error {
	for len(seg) > 0 {
		pq, tq := seg[0]>>4, seg[0]&15
		if tq > 3 || pq != 0 || len(seg) < 65 {
			return errJPEG // 16-bit tables belong to 12-bit files; image/jpeg decides
		}
		for k := 0; k < 64; k++ {
			d.quant[tq][k] = uint16(seg[1+k])
		}
		d.qdefined[tq] = true
		seg = seg[65:]
	}
	return nil
}

func (d *jpegDecoder) dhtSeg(seg []byte) error {
	for len(seg) > 0 {
		if len(seg) < 17 {
			return errJPEG
		}
		tc, th := seg[0]>>4, seg[0]&15
		if tc > 1 || th > 1 {
			return errJPEG // tables 2 and 3 are not baseline; image/jpeg's rules for them depend on the order
		}
		var counts [17]int
		total := 0
		for l := 1; l <= 16; l++ {
			counts[l] = int(seg[l])
			total += counts[l]
		}
		if total == 0 || total > 256 || len(seg) < 17+total {
			return errJPEG
		}
		// Building a table's lookups costs a few thousand operations; a file of nothing but tiny table
		// definitions would multiply that by its size. Real files define 2 to 4 tables.
		if d.tablesBuilt++; d.tablesBuilt > maxJPEGHuffTables {
			return errJPEG
		}
		t := &d.huff[tc][th]
		*t = jpegHuff{}
		copy(t.vals[:], seg[17:17+total])
		code, k := uint32(0), 0
		for l := 1; l <= 16; l++ {
			t.delta[l] = int32(k) - int32(code)
			for range counts[l] {
				if code >= 1<<l {
					return errJPEG // over-subscribed: image/jpeg decodes such tables in its own way
				}
				if l <= jpegFastBits {
					sym := t.vals[k]
					shift := jpegFastBits - l
					for j := uint32(0); j < 1<<shift; j++ {
						idx := code<<shift | j
						t.fast[idx] = uint16(l)<<8 | uint16(sym)
						if tc == 1 {
							run, size := int(sym>>4), int(sym&15)
							if size != 0 && l+size <= jpegFastBits {
								v := int32(idx>>(jpegFastBits-l-size)) & (1<<size - 1)
								if v < 1<<(size-1) {
									v += -1<<size + 1
								}
								t.fastAC[idx] = v<<16 | int32(run)<<8 | int32(l+size)
							}
						}
					}
				}
				code++
				k++
			}
			t.maxCode[l] = code // codes of length l are < code
			code <<= 1
		}
		t.defined = true
		seg = seg[17+total:]
	}
	return nil
}

func (d *jpegDecoder) sosSeg(seg []byte) error {
	if !d.sof || len(seg) < 1 {
		return errJPEG
	}
	n := int(seg[0])
	if n != d.ncomp || len(seg) != 4+2*n {
		return errJPEG
	}
	for i := 0; i < n; i++ {
		id, tables := seg[1+2*i], seg[2+2*i]
		idx := -1
		for j := 0; j < d.ncomp; j++ {
			if d.comps[j].id == id {
				idx = j
			}
		}
		if idx < 0 {
			return errJPEG
		}
		for j := 0; j < i; j++ {
			if d.order[j] == idx {
				return errJPEG
			}
		}
		d.order[i] = idx
		c := &d.comps[idx]
		c.td, c.ta = tables>>4, tables&15
		if c.td > 1 || c.ta > 1 || !d.huff[0][c.td].defined || !d.huff[1][c.ta].defined || !d.qdefined[c.tq] {
			return errJPEG
		}
	}
	if ss, se, a := seg[1+2*n], seg[2+2*n], seg[3+2*n]; ss != 0 || se != 63 || a != 0 {
		return errJPEG
	}
	return nil
}

// refill tops the bit buffer up to at least 57 bits. Past a marker or the end of the data it adds zero bits,
// counted in pad.
func (d *jpegDecoder) refill() {
	// Fast path: the next 8 bytes hold no 0xFF (no stuffing, no marker): take as many whole bytes as fit.
	if d.pad == 0 && d.pos+8 <= len(d.data) {
		x := binary.BigEndian.Uint64(d.data[d.pos:])
		if y := ^x; (y-0x0101010101010101)&^y&0x8080808080808080 == 0 {
			nb := (64 - d.nbits) >> 3
			shift := uint(64 - 8*nb)
			d.acc |= x >> shift << shift >> d.nbits
			d.nbits += 8 * nb
			d.pos += nb
			return
		}
	}
	for d.nbits <= 56 {
		var b byte
		if d.pad == 0 && d.pos < len(d.data) {
			b = d.data[d.pos]
			if b == 0xFF {
				if d.pos+1 < len(d.data) && d.data[d.pos+1] == 0 {
					d.pos += 2
				} else {
					d.pad += 8 // a marker: stay before it
					b = 0
				}
			} else {
				d.pos++
			}
		} else {
			d.pad += 8
		}
		d.acc |= uint64(b) << (56 - d.nbits)
		d.nbits += 8
	}
}

// decodeSym decodes one Huffman symbol; the buffer must hold at least 16 bits (refilled).
func (d *jpegDecoder) decodeSym(t *jpegHuff) (uint8, bool) {
	if e := t.fast[d.acc>>(64-jpegFastBits)]; e != 0 {
		l := int(e >> 8)
		d.acc <<= l
		d.nbits -= l
		return uint8(e), true
	}
	for l := jpegFastBits + 1; l <= 16; l++ {
		code := uint32(d.acc >> (64 - l))
		if code < t.maxCode[l] {
			d.acc <<= l
			d.nbits -= l
			return t.vals[int32(code)+t.delta[l]], true
		}
	}
	return 0, false
}

// receive reads s (≤ 16) bits as a signed coefficient (JPEG's EXTEND).
func (d *jpegDecoder) receive(s int) int32 {
	if s == 0 {
		return 0
	}
	v := int32(d.acc >> (64 - s))
	d.acc <<= s
	d.nbits -= s
	if v < 1<<(s-1) {
		v += -1<<s + 1
	}
	return v
}

// block decodes one block's coefficients into blk (natural order, dequantised and scaled for idct8x8) and
// reports the zig-zag index of its last coefficient (0: DC only).
func (d *jpegDecoder) block(ci int, blk *[64]float32, q *[64]uint16) (int, error) {
	qs := &aanPrescale
	c := &d.comps[ci]
	if d.nbits < 32 {
		d.refill()
	}
	s, ok := d.decodeSym(&d.huff[0][c.td])
	if !ok || s > 11 {
		return 0, errJPEG
	}
	d.dc[ci] += d.receive(int(s))
	dq := d.dc[ci] * int32(q[0])
	if dq > maxDequant || dq < -maxDequant {
		return 0, errJPEG
	}
	*blk = [64]float32{}
	blk[0] = float32(dq) * qs[0]
	last := 0
	ac := &d.huff[1][c.ta]
	for k := 1; k < 64; {
		if d.nbits < 32 {
			d.refill()
		}
		if e := ac.fastAC[d.acc>>(64-jpegFastBits)]; e != 0 {
			l := int(e & 0xFF)
			d.acc <<= l
			d.nbits -= l
			k += int(e>>8) & 0xFF
			if k > 63 {
				return 0, errJPEG
			}
			k &= 63 // known; tells the compiler the indexes below are in range
			v := (e >> 16) * int32(q[k])
			if v > maxDequant || v < -maxDequant {
				return 0, errJPEG
			}
			blk[jpegUnzig[k]&63] = float32(v) * qs[k]
			last = k
			k++
			continue
		}
		sym, ok := d.decodeSym(ac)
		if !ok {
			return 0, errJPEG
		}
		run, size := int(sym>>4), int(sym&15)
		if size == 0 {
			if run == 15 {
				if k+16 > 63 {
					return 0, errJPEG
				}
				k += 16
				continue
			}
			if run != 0 {
				return 0, errJPEG // an EOB run: progressive only; image/jpeg has its own reading of it
			}
			break
		}
		k += run
		if k > 63 {
			return 0, errJPEG
		}
		k &= 63
		v := d.receive(size) * int32(q[k])
		if v > maxDequant || v < -maxDequant {
			return 0, errJPEG
		}
		blk[jpegUnzig[k]&63] = float32(v) * qs[k]
		last = k
		k++
	}
	if d.nbits < d.pad {
		return 0, errJPEG // read past the end of the entropy-coded data
	}
	return last, nil
}

// jpegUnzig maps a zig-zag index to the natural (row-major) index of a coefficient.
var jpegUnzig = [64]uint8{
	0, 1, 8, 16, 9, 2, 3, 10,
	17, 24, 32, 25, 18, 11, 4, 5,
	12, 19, 26, 33, 40, 48, 41, 34,
	27, 20, 13, 6, 7, 14, 21, 28,
	35, 42, 49, 56, 57, 50, 43, 36,
	29, 22, 15, 23, 30, 37, 44, 51,
	58, 59, 52, 45, 38, 31, 39, 46,
	53, 60, 61, 54, 47, 55, 62, 63,
}

// aanPrescale[k] is the factor of the k-th coefficient in zig-zag order before idct8x8: the Arai-Agui-Nakajima
// prescale s(u)·s(v)/8 of its frequencies (u, v), with s(0) = 1 and s(k) = sqrt(2)·cos(kπ/16).
var aanPrescale = func() (p [64]float32) {
	s := func(k uint8) float64 {
		if k == 0 {
			return 1
		}
		return math.Sqrt2 * math.Cos(float64(k)*math.Pi/16)
	}
	for k := range p {
		n := jpegUnzig[k]
		p[k] = float32(s(n>>3) * s(n&7) / 8)
	}
	return p
}()

// restartSync consumes the restart marker expected after an interval, skipping unread entropy bytes before it as
// image/jpeg's resynchronisation does; any other marker there is left to image/jpeg.
func (d *jpegDecoder) restartSync(expect uint8) error {
	if d.nbits < d.pad {
		return errJPEG
	}
	d.acc, d.nbits, d.pad = 0, 0, 0
	for d.pos+1 < len(d.data) {
		if d.data[d.pos] != 0xFF {
			d.pos++
			continue
		}
		switch m := d.data[d.pos+1]; {
		case m == expect:
			d.pos += 2
			return nil
		case m == 0xFF:
			d.pos++
		case m == 0x00:
			d.pos += 2
		default:
			return errJPEG
		}
	}
	return errJPEG
}

// jpegScan is a scan being decoded one MCU row at a time.
type jpegScan struct {
	mxx, myy int
	planes   [3][]uint8 // per component: the whole image, or one MCU row when local
	stride   [3]int
	local    bool // planes hold the current MCU row only
	skip     bool // entropy decoding only (a validation pass): no IDCT, no planes
	lumaOnly bool // component 0 only is reconstructed (LumaRows): the chroma blocks are entropy-decoded and dropped
	mcu      int
	expect   uint8 // next restart marker
	blk      [64]float32
}

func (d *jpegDecoder) newScan() jpegScan {
	h0, v0 := d.comps[0].h, d.comps[0].v
	return jpegScan{mxx: (d.w + 8*h0 - 1) / (8 * h0), myy: (d.h + 8*v0 - 1) / (8 * v0), expect: 0xD0}
}

// localPlanes gives s planes for one MCU row.
func (d *jpegDecoder) localPlanes(s *jpegScan) {
	s.local = true
	for i := 0; i < d.ncomp; i++ {
		c := d.comps[i]
		s.stride[i] = 8 * c.h * s.mxx
		s.planes[i] = make([]uint8, s.stride[i]*8*c.v)
	}
}

// ratio is the chroma subsampling of a three-component frame.
func (d *jpegDecoder) ratio() image.YCbCrSubsampleRatio {
	hr, vr := d.comps[0].h/d.comps[1].h, d.comps[0].v/d.comps[1].v
	switch {
	case hr == 2 && vr == 2:
		return image.YCbCrSubsampleRatio420
	case hr == 2:
		return image.YCbCrSubsampleRatio422
	case vr == 2:
		return image.YCbCrSubsampleRatio440
	}
	return image.YCbCrSubsampleRatio444
}

func (d *jpegDecoder) scan(ctx context.Context, out jpegOut) (image.Image, error) {
	s := d.newScan()
	h0, v0 := d.comps[0].h, d.comps[0].v
	// Planes: for the native layout, the whole image as image/jpeg allocates it; for NRGBA, one MCU row.
	var (
		img   image.Image
		nrgba *image.NRGBA
	)
	full := image.Rect(0, 0, 8*h0*s.mxx, 8*v0*s.myy)
	bounds := image.Rect(0, 0, d.w, d.h)
	switch {
	case out == jpegNative && d.ncomp == 1:
		g := image.NewGray(full)
		s.planes[0], s.stride[0] = g.Pix, g.Stride
		img = g.SubImage(bounds)
	case out == jpegNative:
		m := image.NewYCbCr(full, d.ratio())
		s.planes = [3][]uint8{m.Y, m.Cb, m.Cr}
		s.stride = [3]int{m.YStride, m.CStride, m.CStride}
		img = m.SubImage(bounds)
	default:
		nrgba = image.NewNRGBA(bounds)
		img = nrgba
		d.localPlanes(&s)
	}
	for my := 0; my < s.myy; my++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if err := d.mcuRow(&s, my); err != nil {
			return nil, err
		}
		if nrgba != nil {
			d.toNRGBARows(nrgba, &s.planes, &s.stride, my)
		}
	}
	return img, d.endScan()
}

// mcuRow decodes MCU row my (the next one in the data).
func (d *jpegDecoder) mcuRow(s *jpegScan, my int) error {
	for mx := 0; mx < s.mxx; mx++ {
		for _, ci := range d.order[:d.ncomp] {
			c := &d.comps[ci]
			q := &d.quant[c.tq]
			for j := 0; j < c.h*c.v; j++ {
				last, err := d.block(ci, &s.blk, q)
				if err != nil {
					return err
				}
				if s.skip || (s.lumaOnly && ci != 0) {
					continue
				}
				bx, by := c.h*mx+j%c.h, c.v*my+j/c.h
				if s.local {
					by = j / c.h
				}
				dst := s.planes[ci][8*(by*s.stride[ci]+bx):]
				if last == 0 {
					fillBlock(dst, s.stride[ci], s.blk[0])
				} else {
					idct8x8(&s.blk, dst, s.stride[ci])
				}
			}
		}
		s.mcu++
		if d.ri > 0 && s.mcu%d.ri == 0 && s.mcu < s.mxx*s.myy {
			if err := d.restartSync(s.expect); err != nil {
				return err
			}
			s.expect++
			if s.expect > 0xD7 {
				s.expect = 0xD0
			}
			d.dc = [3]int32{}
		}
	}
	return nil
}

// endScan checks that the scan did not read past its data and moves to the marker that ends it (unread entropy
// bytes before it belong to the scan).
func (d *jpegDecoder) endScan() error {
	if d.nbits < d.pad {
		return errJPEG
	}
	for d.pos < len(d.data) && !(d.data[d.pos] == 0xFF && d.pos+1 < len(d.data) && d.data[d.pos+1] != 0) {
		d.pos++
	}
	return nil
}

// fillBlock writes a block with a DC coefficient only: every sample is the same.
func fillBlock(dst []uint8, stride int, dc float32) {
	v := clampSample(dc)
	for y := 0; y < 8; y++ {
		row := dst[y*stride : y*stride+8 : y*stride+8]
		for x := range row {
			row[x] = v
		}
	}
}

func clampSample(x float32) uint8 {
	v := int32(x + 128.5)
	if uint32(v) > 255 {
		v = ^(v >> 31) & 0xFF
	}
	return uint8(v)
}

// idct8x8 is the separable inverse DCT of a prescaled block (Arai-Agui-Nakajima: 5 multiplications per 8
// samples), level-shifted, rounded and clamped into dst. The two passes are written out (no calls, constant
// indexes) because this is the decoder's hottest loop.
func idct8x8(b *[64]float32, dst []uint8, stride int) {
	const (
		r2   = 1.414213562 // sqrt(2)
		c2   = 1.847759065 // 2·cos(π/8)
		c2m6 = 1.082392200 // 2·(cos(π/8) − cos(3π/8))
		c2p6 = 2.613125930 // 2·(cos(π/8) + cos(3π/8))
	)
	// Columns: many have no AC coefficient (a photo's high vertical frequencies quantise to zero).
	for u := 0; u < 8; u++ {
		c := b[u:64:64]
		i1, i2, i3, i4, i5, i6, i7 := c[8], c[16], c[24], c[32], c[40], c[48], c[56]
		if i1 == 0 && i2 == 0 && i3 == 0 && i4 == 0 && i5 == 0 && i6 == 0 && i7 == 0 {
			v := c[0]
			c[8], c[16], c[24], c[32], c[40], c[48], c[56] = v, v, v, v, v, v, v
			continue
		}
		i0 := c[0]
		t10, t11 := i0+i4, i0-i4
		t13 := i2 + i6
		t12 := (i2-i6)*r2 - t13
		e0, e3 := t10+t13, t10-t13
		e1, e2 := t11+t12, t11-t12
		z13, z10 := i5+i3, i5-i3
		z11, z12 := i1+i7, i1-i7
		o7 := z11 + z13
		o11 := (z11 - z13) * r2
		z5 := (z10 + z12) * c2
		o6 := z5 - c2p6*z10 - o7
		o5 := o11 - o6
		o4 := c2m6*z12 - z5 + o5
		c[0], c[56] = e0+o7, e0-o7
		c[8], c[48] = e1+o6, e1-o6
		c[16], c[40] = e2+o5, e2-o5
		c[24], c[32] = e3-o4, e3+o4
	}
	for y := 0; y < 8; y++ {
		r := b[8*y : 8*y+8 : 8*y+8]
		i0, i1, i2, i3, i4, i5, i6, i7 := r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7]
		t10, t11 := i0+i4, i0-i4
		t13 := i2 + i6
		t12 := (i2-i6)*r2 - t13
		e0, e3 := t10+t13, t10-t13
		e1, e2 := t11+t12, t11-t12
		z13, z10 := i5+i3, i5-i3
		z11, z12 := i1+i7, i1-i7
		o7 := z11 + z13
		o11 := (z11 - z13) * r2
		z5 := (z10 + z12) * c2
		o6 := z5 - c2p6*z10 - o7
		o5 := o11 - o6
		o4 := c2m6*z12 - z5 + o5
		o := dst[y*stride : y*stride+8 : y*stride+8]
		o[0], o[7] = clampSample(e0+o7), clampSample(e0-o7)
		o[1], o[6] = clampSample(e1+o6), clampSample(e1-o6)
		o[2], o[5] = clampSample(e2+o5), clampSample(e2-o5)
		o[3], o[4] = clampSample(e3-o4), clampSample(e3+o4)
	}
}

// YCbCr to RGB, the arithmetic of image/color.YCbCrToRGB (and so of image/draw's conversion) in tables:
// R = (Y·0x10101 + 91881·Cr') >> 16 and so on, with Cb' = Cb − 128, clamped to 0..255.
var ycc = func() (t struct{ crR, cbG, crG, cbB [256]int32 }) {
	for i := 0; i < 256; i++ {
		c := int32(i) - 128
		t.crR[i] = 91881 * c
		t.cbG[i] = -22554 * c
		t.crG[i] = -46802 * c
		t.cbB[i] = 116130 * c
	}
	return t
}()

func clamp16(v int32) uint8 {
	if uint32(v)&0xFF000000 == 0 {
		return uint8(v >> 16)
	}
	return uint8(^(v >> 31))
}

// toNRGBARows converts MCU row my, decoded into the row planes, into its rows of dst. Chroma is replicated
// (nearest sample), as image/draw reads an *image.YCbCr; hr == 2 is the only horizontal subsampling allowed.
func (d *jpegDecoder) toNRGBARows(dst *image.NRGBA, planes *[3][]uint8, stride *[3]int, my int) {
	v0 := d.comps[0].v
	hr, vr := 1, 1 // chroma subsampling
	if d.ncomp == 3 {
		hr, vr = d.comps[0].h/d.comps[1].h, v0/d.comps[1].v
	}
	y0 := 8 * v0 * my
	for ly := 0; ly < 8*v0 && y0+ly < d.h; ly++ {
		o := dst.Pix[(y0+ly)*dst.Stride : (y0+ly)*dst.Stride+4*d.w]
		yr := planes[0][ly*stride[0] : ly*stride[0]+d.w]
		if d.ncomp == 1 {
			for x, v := range yr {
				p := o[4*x : 4*x+4 : 4*x+4]
				p[0], p[1], p[2], p[3] = v, v, v, 0xFF
			}
			continue
		}
		cy := ly / vr
		cb := planes[1][cy*stride[1]:]
		cr := planes[2][cy*stride[2]:]
		if hr == 1 {
			cb, cr = cb[:d.w], cr[:d.w]
			for x, v := range yr {
				yy := int32(v) * 0x10101
				b, r := cb[x], cr[x]
				binary.LittleEndian.PutUint32(o[4*x:], uint32(clamp16(yy+ycc.crR[r]))|uint32(clamp16(yy+ycc.cbG[b]+ycc.crG[r]))<<8|
					uint32(clamp16(yy+ycc.cbB[b]))<<16|0xFF<<24)
			}
			continue
		}
		for x, v := range yr {
			yy := int32(v) * 0x10101
			b, r := cb[x>>1], cr[x>>1]
			binary.LittleEndian.PutUint32(o[4*x:], uint32(clamp16(yy+ycc.crR[r]))|uint32(clamp16(yy+ycc.cbG[b]+ycc.crG[r]))<<8|
				uint32(clamp16(yy+ycc.cbB[b]))<<16|0xFF<<24)
		}
	}
}

// decodeAs is decodeCtx with, for a JPEG or a PNG, the fast decoder tried first, in layout out (jpegNative: the
// image image/jpeg or image/png returns; jpegNRGBA: possibly an *image.NRGBA instead, for callers that convert
// to it anyway). A PNG the fast decoder decodes has its pixels in memory from alloc.
func (f format) decodeAs(ctx context.Context, data []byte, out jpegOut, alloc PixelAllocator) (image.Image, error) {
	var (
		img image.Image
		err error
	)
	switch f.name {
	case "jpeg":
		if img, err = decodeJPEGFast(ctx, data, out); errors.Is(err, errJPEGFallback) {
			return f.decodeCtx(ctx, data)
		}
	case "png":
		if img, err = decodePNGFast(ctx, data, out, alloc); errors.Is(err, errPNGFallback) {
			return f.decodeCtx(ctx, data)
		}
		if errors.Is(err, ErrCorrupt) {
			return nil, err
		}
	default:
		return f.decodeCtx(ctx, data)
	}
	if err != nil {
		return nil, fmt.Errorf("imageio: %s decoding: %w", f.name, err)
	}
	return img, nil
}

// jpegRows decodes a JPEG one MCU row at a time, on demand (DecodeLumaRows): the memory of one MCU row instead of the
// image, for one more pass of entropy decoding (the check) and a full decode per pass over the rows.
type jpegRows struct {
	start  jpegDecoder // after the headers, where the scan begins
	d      jpegDecoder
	s      jpegScan
	cur    int         // the MCU row in s.planes; -1 when none
	mcuRow image.YCbCr // s.planes as an image, for the row conversion
}

// newJPEGRows reads the headers and decodes the entropy-coded data of the whole scan without reconstructing
// pixels, so that what can fail fails here, with image/jpeg's verdict (errJPEGFallback sends the file to
// image/jpeg, like decodeJPEGFast). Grey files are left to the other paths.
func newJPEGRows(ctx context.Context, data []byte) (*jpegRows, error) {
	d := jpegDecoder{data: data}
	err := d.headers()
	if err == nil && d.ncomp != 3 {
		err = errJPEG
	}
	r := &jpegRows{start: d, cur: -1}
	if err == nil {
		s := d.newScan()
		s.skip = true
		for my := 0; my < s.myy && err == nil; my++ {
			if err = ctx.Err(); err == nil {
				err = d.mcuRow(&s, my)
			}
		}
		if err == nil {
			err = d.endScan()
		}
		if err == nil {
			err = d.tail()
		}
	}
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return nil, cerr
		}
		return nil, errJPEGFallback
	}
	r.d = r.start
	r.s = r.d.newScan()
	r.d.localPlanes(&r.s)
	h0, v0 := d.comps[0].h, d.comps[0].v
	r.mcuRow = image.YCbCr{Y: r.s.planes[0], Cb: r.s.planes[1], Cr: r.s.planes[2], YStride: r.s.stride[0],
		CStride: r.s.stride[1], SubsampleRatio: d.ratio(), Rect: image.Rect(0, 0, 8*h0*r.s.mxx, 8*v0)}
	return r, nil
}

// lumaRow copies the first len(out) Y samples of pixel row y into out; r must have been made with lumaOnly set
// (the chroma planes are not reconstructed).
func (r *jpegRows) lumaRow(y int, out []uint8) {
	ly := r.seek(y)
	copy(out, r.mcuRow.Y[ly*r.mcuRow.YStride:])
}

// seek decodes up to the MCU row of pixel row y (from the start of the scan when y lies above the current one)
// and returns y's row within it.
func (r *jpegRows) seek(y int) int {
	rows := 8 * r.start.comps[0].v
	my := y / rows
	if my < r.cur {
		planes, stride, lumaOnly := r.s.planes, r.s.stride, r.s.lumaOnly
		r.d = r.start
		r.s = r.d.newScan()
		r.s.planes, r.s.stride, r.s.local, r.s.lumaOnly = planes, stride, true, lumaOnly
		r.cur = -1
	}
	for r.cur < my {
		r.cur++
		if err := r.d.mcuRow(&r.s, r.cur); err != nil {
			// Unreachable: newJPEGRows decoded the same bytes without error. Zeros rather than stale pixels.
			clear(r.mcuRow.Y)
			clear(r.mcuRow.Cb)
			clear(r.mcuRow.Cr)
		}
	}
	return y - my*rows
}
