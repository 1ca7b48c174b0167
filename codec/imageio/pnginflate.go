package imageio

import (
	"encoding/binary"
	"errors"
	"hash"
	"hash/adler32"
	"io"
)

// This file is the PNG decoder's inflate: a zlib stream (RFC 1950, 1951) read straight from the IDAT chunks'
// data in the file, decoded with a 64-bit bit buffer and two-level Huffman tables, into a sliding window that
// the row loop reads from. It is strict where the standard library is lenient in ways that matter only to
// crafted streams, and gives up (errInflate, which sends the file to image/png) on anything it does not take:
// a bad header, a preset dictionary, an incomplete or over-subscribed code (but the single code of one bit that
// zlib writes and compress/flate takes), a block without an end-of-block code, an invalid symbol or distance, a
// wrong checksum, input that runs out. So what it accepts, compress/flate accepts too, with the same bytes; the
// Adler-32 checksum, checked before the image is returned, guards that. FuzzFastPNG checks it against image/png.

// errInflate: the stream is not one this inflater takes; image/png decides.
var errInflate = errors.New("imageio: png: inflate gives up")

const (
	huffPrimaryBits = 11
	huffSubLink     = 1 << 31
	huffPair        = 1 << 30
	// inflateWindow is the output buffer; the last 32 KiB are kept as history when it slides (a memmove of a
	// third of the output: under 1% of the time).
	inflateWindow  = 128 << 10
	inflateHistory = 32 << 10
	maxMatch       = 258
)

// inflateTable decodes one Huffman code: primary is indexed by the next huffPrimaryBits bits of the stream (codes
// are packed from the least significant bit); an entry is sym<<4 | length, or, for codes longer than the
// primary bits, huffSubLink | offset<<4 | subBits, the subtable in sub at offset indexed by the next subBits
// bits. Zero is no code.
type inflateTable struct {
	primary [1 << huffPrimaryBits]uint32
	sub     []uint32
}

// init builds the table of the code with these lengths (0: symbol unused) and reports whether compress/flate
// takes the code: complete, empty (allowed; any use fails), or a single code of length 1.
func (t *inflateTable) init(lengths []uint8) bool {
	var count [16]int
	maxLen := 0
	for _, l := range lengths {
		if l != 0 {
			count[l]++
			maxLen = max(maxLen, int(l))
		}
	}
	clear(t.primary[:])
	t.sub = t.sub[:0]
	if maxLen == 0 {
		return true
	}
	var next [16]int
	code := 0
	for l := 1; l <= 15; l++ {
		code = (code + count[l-1]) << 1
		next[l] = code
	}
	// Kraft: the code space used, in units of 2^-maxLen.
	space := 0
	for l := 1; l <= maxLen; l++ {
		space += count[l] << (maxLen - l)
	}
	if space > 1<<maxLen || (space < 1<<maxLen && !(maxLen == 1 && count[1] == 1)) {
		return false
	}
	subBits := max(0, maxLen-huffPrimaryBits)
	for sym, l := range lengths {
		if l == 0 {
			continue
		}
		c := next[l]
		next[l]++
		rev := int(reverseBits(uint16(c), uint(l)))
		entry := uint32(sym)<<4 | uint32(l)
		if int(l) <= huffPrimaryBits {
			for i := rev; i < len(t.primary); i += 1 << l {
				t.primary[i] = entry
			}
			continue
		}
		p := rev & (1<<huffPrimaryBits - 1)
		link := t.primary[p]
		if link == 0 {
			link = huffSubLink | uint32(len(t.sub))<<4 | uint32(subBits)
			t.primary[p] = link
			t.sub = append(t.sub, make([]uint32, 1<<subBits)...)
		}
		off := int(link>>4) & (1<<26 - 1)
		for i := rev >> huffPrimaryBits; i < 1<<subBits; i += 1 << (int(l) - huffPrimaryBits) {
			t.sub[off+i] = entry
		}
	}
	return true
}

// addPairs makes the primary entries whose bits hold two whole literal codes decode both at once: huffPair |
// len1<<21 | lit2<<13 | lit1<<4 | len1+len2. On photographs, whose filtered bytes have codes of 4 to 7 bits, it
// halves the lookups, each of which waits for the one before.
func (t *inflateTable) addPairs() {
	single := t.primary
	for i, e := range single {
		l1 := e & 15
		if e&huffSubLink != 0 || l1 == 0 || e>>4 >= 256 {
			continue
		}
		e2 := single[i>>l1]
		l2 := e2 & 15
		if e2&huffSubLink != 0 || l2 == 0 || e2>>4 >= 256 || l1+l2 > huffPrimaryBits {
			continue
		}
		t.primary[i] = huffPair | l1<<21 | (e2>>4)<<13 | (e>>4)<<4 | (l1 + l2)
	}
}

// reverseBits reverses the low n bits of c.
func reverseBits(c uint16, n uint) uint16 {
	c = (c&0x5555)<<1 | (c>>1)&0x5555
	c = (c&0x3333)<<2 | (c>>2)&0x3333
	c = (c&0x0F0F)<<4 | (c>>4)&0x0F0F
	c = c<<8 | c>>8
	return c >> (16 - n)
}

var (
	lengthBase  = [29]uint16{3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258}
	lengthExtra = [29]uint8{0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0}
	distBase    = [30]uint32{1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385, 513, 769, 1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577}
	distExtra   = [30]uint8{0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13}
	codeOrder   = [19]uint8{16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15}
)

// inflater reads a zlib stream from a list of byte slices (the IDAT chunks' data) as an io.Reader.
type inflater struct {
	segs     [][]byte // input not yet reached
	cur      []byte   // the rest of the current input slice
	consumed int64    // bytes taken into the bit buffer
	bits     uint64   // bits not yet used, from the least significant; the bytes above nb are next in cur
	nb       uint

	win      []byte
	w, r     int   // write and read positions in win
	produced int64 // bytes of output so far (for the distance check)
	adler    hash.Hash32

	state       int // what the next decode step is: inflateHeader, inflateBlock, inflateStored, inflateHuff, inflateEnd
	final       bool
	storedLeft  int
	lit, dist   inflateTable
	err         error
	streamBytes int64 // input bytes of the whole stream, once it has ended
}

const (
	inflateHeader = iota
	inflateBlock
	inflateStored
	inflateHuff
	inflateEnd
)

func newInflater(segs [][]byte) *inflater {
	return &inflater{segs: segs, win: make([]byte, inflateWindow), adler: adler32.New()}
}

// refill tops the bit buffer up to at least 56 bits while the input lasts.
func (f *inflater) refill() {
	if len(f.cur) >= 8 {
		f.bits |= binary.LittleEndian.Uint64(f.cur) << f.nb
		k := (63 - f.nb) >> 3
		f.cur = f.cur[k:]
		f.consumed += int64(k)
		f.nb |= 56
		return
	}
	for f.nb <= 56 {
		for len(f.cur) == 0 {
			if len(f.segs) == 0 {
				return
			}
			f.cur, f.segs = f.segs[0], f.segs[1:]
		}
		f.bits |= uint64(f.cur[0]) << f.nb
		f.cur = f.cur[1:]
		f.consumed++
		f.nb += 8
	}
}

// take returns the next n (≤ 32) bits, or false when the input has fewer.
func (f *inflater) take(n uint) (uint32, bool) {
	if f.nb < n {
		f.refill()
		if f.nb < n {
			return 0, false
		}
	}
	v := uint32(f.bits & (1<<n - 1))
	f.bits >>= n
	f.nb -= n
	return v, true
}

// sym decodes one symbol of t; -1 for an invalid code or input that runs out. The caller has refilled.
func (f *inflater) sym(t *inflateTable) int {
	e := t.primary[f.bits&(1<<huffPrimaryBits-1)]
	if e&huffSubLink != 0 {
		off, sb := int(e>>4)&(1<<26-1), e&15
		e = t.sub[off+int((f.bits>>huffPrimaryBits)&(1<<sb-1))]
	}
	l := uint(e & 15)
	if l == 0 || l > f.nb {
		return -1
	}
	f.bits >>= l
	f.nb -= l
	return int(e >> 4)
}

// alignedBytes drops the bits up to a byte boundary and reads n bytes (n ≤ 4) as little-endian, from the bit
// buffer then the input.
func (f *inflater) alignedBytes(n int) (uint32, bool) {
	f.bits >>= f.nb & 7
	f.nb &^= 7
	var v uint32
	for i := 0; i < n; i++ {
		b, ok := f.take(8)
		if !ok {
			return 0, false
		}
		v |= b << (8 * i)
	}
	return v, true
}

// Read gives the inflated bytes; io.EOF once the stream has ended with a correct checksum.
func (f *inflater) Read(p []byte) (int, error) {
	for f.r == f.w {
		if f.err != nil {
			return 0, f.err
		}
		f.step()
	}
	n := copy(p, f.win[f.r:f.w])
	f.r += n
	return n, nil
}

// step decodes until some output is ready or the stream ends (f.err set).
func (f *inflater) step() {
	if f.w+maxMatch >= len(f.win) { // huff stops at len(f.win)-maxMatch
		// Slide: keep the history (every byte has been read when step runs).
		keep := f.w - inflateHistory
		copy(f.win, f.win[keep:f.w])
		f.w -= keep
		f.r -= keep
	}
	start := f.w
	switch f.state {
	case inflateHeader:
		cmf, ok1 := f.take(8)
		flg, ok2 := f.take(8)
		if !ok1 || !ok2 || cmf&15 != 8 || cmf>>4 > 7 || (cmf<<8|flg)%31 != 0 || flg&0x20 != 0 {
			f.err = errInflate
			return
		}
		f.state = inflateBlock
	case inflateBlock:
		f.block()
	case inflateStored:
		f.stored()
	case inflateHuff:
		f.huff()
	case inflateEnd:
		sum, ok := f.alignedBytes(4)
		// The checksum is big-endian; alignedBytes reads little-endian.
		if !ok || swap32(sum) != f.adler.Sum32() {
			f.err = errInflate
			return
		}
		f.streamBytes = f.consumed - int64(f.nb/8)
		f.err = io.EOF
	}
	if f.w > start {
		f.adler.Write(f.win[start:f.w])
		f.produced += int64(f.w - start)
	}
}

func swap32(v uint32) uint32 { return v>>24 | (v>>8)&0xFF00 | (v<<8)&0xFF0000 | v<<24 }

// block reads a block header and its tables.
func (f *inflater) block() {
	if f.final {
		f.state = inflateEnd
		return
	}
	h, ok := f.take(3)
	if !ok {
		f.err = errInflate
		return
	}
	f.final = h&1 != 0
	switch h >> 1 {
	case 0:
		v, ok := f.alignedBytes(4)
		if !ok || uint16(v) != ^uint16(v>>16) {
			f.err = errInflate
			return
		}
		f.storedLeft = int(uint16(v))
		f.state = inflateStored
	case 1:
		var l [288 + 32]uint8
		for i := range 288 {
			switch {
			case i < 144:
				l[i] = 8
			case i < 256:
				l[i] = 9
			case i < 280:
				l[i] = 7
			default:
				l[i] = 8
			}
		}
		for i := 288; i < len(l); i++ {
			l[i] = 5
		}
		f.lit.init(l[:288])
		f.lit.addPairs()
		f.dist.init(l[288:])
		f.state = inflateHuff
	case 2:
		if !f.dynamicTables() {
			f.err = errInflate
			return
		}
		f.state = inflateHuff
	default:
		f.err = errInflate
	}
}

// dynamicTables reads the code lengths of a dynamic block (RFC 1951 section 3.2.7) and builds its tables.
func (f *inflater) dynamicTables() bool {
	h, ok := f.take(14)
	if !ok {
		return false
	}
	nlit, ndist, nclen := int(h&31)+257, int(h>>5&31)+1, int(h>>10)+4
	if nlit > 286 || ndist > 30 {
		return false
	}
	var cl [19]uint8
	for i := 0; i < nclen; i++ {
		v, ok := f.take(3)
		if !ok {
			return false
		}
		cl[codeOrder[i]] = uint8(v)
	}
	var clt inflateTable
	if !clt.init(cl[:]) {
		return false
	}
	var lengths [286 + 30]uint8
	for i, n := 0, nlit+ndist; i < n; {
		f.refill()
		x := f.sym(&clt)
		if x < 0 {
			return false
		}
		if x < 16 {
			lengths[i] = uint8(x)
			i++
			continue
		}
		var rep uint32
		var val uint8
		switch x {
		case 16:
			if i == 0 {
				return false
			}
			v, ok := f.take(2)
			if !ok {
				return false
			}
			rep, val = 3+v, lengths[i-1]
		case 17:
			v, ok := f.take(3)
			if !ok {
				return false
			}
			rep = 3 + v
		default:
			v, ok := f.take(7)
			if !ok {
				return false
			}
			rep = 11 + v
		}
		if i+int(rep) > n {
			return false
		}
		for ; rep > 0; rep-- {
			lengths[i] = val
			i++
		}
	}
	if lengths[256] == 0 {
		return false // no end-of-block code: the block cannot end
	}
	if !f.lit.init(lengths[:nlit]) || !f.dist.init(lengths[nlit:nlit+ndist]) {
		return false
	}
	f.lit.addPairs()
	return true
}

// stored copies the rest of a stored block, as much as the window takes.
func (f *inflater) stored() {
	// Whole bytes still in the bit buffer come first.
	for f.storedLeft > 0 && f.nb >= 8 && f.w < len(f.win) {
		f.win[f.w] = byte(f.bits)
		f.bits >>= 8
		f.nb -= 8
		f.w++
		f.storedLeft--
	}
	if f.nb == 0 {
		f.bits = 0 // the bytes above nb are skipped over below
	}
	for f.storedLeft > 0 && f.w < len(f.win) && f.nb == 0 {
		for len(f.cur) == 0 {
			if len(f.segs) == 0 {
				f.err = errInflate
				return
			}
			f.cur, f.segs = f.segs[0], f.segs[1:]
		}
		n := copy(f.win[f.w:min(len(f.win), f.w+f.storedLeft)], f.cur)
		f.cur = f.cur[n:]
		f.consumed += int64(n)
		f.w += n
		f.storedLeft -= n
	}
	if f.storedLeft == 0 {
		f.state = inflateBlock
	}
}

// huff decodes the symbols of a Huffman block until the block ends or the window is nearly full. The bit
// buffer and the input are kept in locals and the common steps written out: called per symbol, sym and
// refill cost a third of the time.
func (f *inflater) huff() {
	win, w := f.win, f.w
	limit := len(win) - maxMatch
	lit, dist := &f.lit.primary, &f.dist
	bits, nb, cur := f.bits, f.nb, f.cur
	for w < limit {
		if nb < 48 {
			if len(cur) >= 8 {
				bits |= binary.LittleEndian.Uint64(cur) << nb
				cur = cur[(63-nb)>>3:]
				nb |= 56
			} else {
				f.consumed += int64(len(f.cur) - len(cur))
				f.bits, f.nb, f.cur = bits, nb, cur
				f.refill()
				bits, nb, cur = f.bits, f.nb, f.cur
			}
		}
		e := lit[bits&(1<<huffPrimaryBits-1)]
		if e&huffPair != 0 {
			if l := uint(e & 15); l <= nb {
				win[w], win[w+1] = byte(e>>4), byte(e>>13)
				w += 2
				bits >>= l
				nb -= l
				continue
			}
			e = e>>21&15 | e&(255<<4) // the bits of the second code are not all in: the first alone
		}
		if e&huffSubLink != 0 {
			off, sb := int(e>>4)&(1<<26-1), e&15
			e = f.lit.sub[off+int((bits>>huffPrimaryBits)&(1<<sb-1))]
		}
		l := uint(e & 15)
		if l == 0 || l > nb {
			f.err = errInflate
			break
		}
		bits >>= l
		nb -= l
		s := int(e >> 4)
		if s < 256 {
			win[w] = byte(s)
			w++
			continue
		}
		if s == 256 {
			f.state = inflateBlock
			break
		}
		s -= 257
		if s >= len(lengthBase) {
			f.err = errInflate
			break
		}
		eb := uint(lengthExtra[s])
		if nb < eb {
			f.err = errInflate
			break
		}
		length := int(lengthBase[s]) + int(bits&(1<<eb-1))
		bits >>= eb
		nb -= eb
		e = dist.primary[bits&(1<<huffPrimaryBits-1)]
		if e&huffSubLink != 0 {
			off, sb := int(e>>4)&(1<<26-1), e&15
			e = dist.sub[off+int((bits>>huffPrimaryBits)&(1<<sb-1))]
		}
		l = uint(e & 15)
		d := int(e >> 4)
		if l == 0 || l > nb || d >= len(distBase) {
			f.err = errInflate
			break
		}
		bits >>= l
		nb -= l
		eb = uint(distExtra[d])
		if nb < eb {
			f.err = errInflate
			break
		}
		dd := int(distBase[d]) + int(bits&(1<<eb-1))
		bits >>= eb
		nb -= eb
		if int64(dd) > f.produced+int64(w-f.w) {
			f.err = errInflate
			break
		}
		if dd >= length {
			copy(win[w:w+length], win[w-dd:])
		} else {
			for i := w; i < w+length; i++ {
				win[i] = win[i-dd]
			}
		}
		w += length
	}
	f.consumed += int64(len(f.cur) - len(cur))
	f.bits, f.nb, f.cur = bits, nb, cur
	f.w = w
}
