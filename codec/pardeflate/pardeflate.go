// Package pardeflate defines a zlib stream that many processors write at once: the input is cut into segments
// that are tokenised (LZ77) independently, groups of segments form deflate blocks with their own Huffman codes,
// and every block ends on a byte boundary (a sync flush: an empty stored block), so each block is written
// independently at an offset known before any is written. A GPU runs the two per-segment and per-block passes
// (package gpu/cudacodec mirrors Tokenize and EncodeBlock, instruction for instruction, so that its stream is
// byte for byte the one Compress writes here); the host builds the codes and headers between them (Plan).
//
// It owns the stream's format: the segment and block sizes, the token encoding, the match finder, the Huffman
// code construction and the block headers, and the Adler-32 of a stream from its segments' parts. It must not
// choose whether to use the format (the PNG encoders choose) nor run anything on a device.
//
// The stream costs a little size against a sequential deflate: matches never reach across a segment (a window of
// SegmentSize bytes instead of 32 KiB), and each block carries its own code (about 60-100 bytes) and 5 bytes of
// flush.
package pardeflate

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
)

const (
	// SegmentSize is the bytes one tokenising thread reads: matches stay within a segment.
	SegmentSize = 16 << 10
	// BlockSegments is the segments of one deflate block, encoded by one thread with one code.
	BlockSegments = 4
	// HashBits sizes a segment's match table: 1<<HashBits entries of a uint16 position (plus one; 0 is empty).
	HashBits = 13
	// NumLitLen and NumDist are the deflate alphabets: literals, end of block and lengths; distances.
	NumLitLen = 286
	NumDist   = 30
	// HistWords is a block's code histogram: NumLitLen then NumDist counts of its tokens' symbols.
	HistWords = NumLitLen + NumDist
	// BlockHistWords is a block's whole histogram: HistWords, then the 256 byte values of its input (the
	// histogram of the block coded as literals alone).
	BlockHistWords = HistWords + 256

	endOfBlock = 256
	// ShortMatch and ShortDist: a match shorter than ShortMatch bytes from further back than ShortDist is
	// coded as literals (its length and distance codes cost more than the bytes in noisy data; zlib's
	// TOO_FAR rule for 3-byte matches, one byte longer here).
	ShortMatch = 5
	ShortDist  = 512
	minMatch   = 4
	maxMatch   = 258
	maxBits    = 15 // longest litlen or distance code
	maxCLBits  = 7  // longest code-length code
	// MaxHeaderBytes bounds a block header (3 bits of block type, HLIT/HDIST/HCLEN, 19 code-length lengths, at
	// most 316 run-length symbols of at most 7+7 bits): 4498 bits.
	MaxHeaderBytes = 576
	// PlanWords is a block's plan as a device reads it (Plan.Words): the litlen and distance codes, the header's
	// bit count, the block's byte offset, the last-block flag, the literals-only flag, then the header's bytes.
	PlanWords = HistWords + 4 + MaxHeaderBytes/4
)

// Token is one LZ77 token: a literal byte (bit 31 clear), or a match (bit 31 set) of Len() bytes at Dist() back.
type Token uint32

func literal(b byte) Token        { return Token(b) }
func match(l, d int) Token        { return Token(1<<31 | uint32(l)<<16 | uint32(d)) }
func (t Token) IsMatch() bool     { return t&(1<<31) != 0 }
func (t Token) Len() int          { return int(t>>16) & 0x1ff }
func (t Token) Dist() int         { return int(t & 0xffff) }
func (t Token) Literal() byte     { return byte(t) }
func hash4(v uint32) uint32       { return (v * 2654435761) >> (32 - HashBits) }
func le32(b []byte, i int) uint32 { return binary.LittleEndian.Uint32(b[i:]) }

// Deflate's length and distance symbols: base value and extra bits of each.
var (
	lengthBase  = [29]uint16{3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258}
	lengthExtra = [29]uint8{0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0}
	distBase    = [30]uint16{1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385, 513, 769, 1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577}
	distExtra   = [30]uint8{0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13}
)

// lengthCode is the index (0..28) of length l's symbol (257 + index); distCode is distance d's symbol. Both scan
// from the top, as the kernels do.
func lengthCode(l int) int {
	i := 28
	for int(lengthBase[i]) > l {
		i--
	}
	return i
}

func distCode(d int) int {
	i := 29
	for int(distBase[i]) > d {
		i--
	}
	return i
}

// Segments is the number of segments of an n-byte input; Blocks the number of blocks.
func Segments(n int) int { return (n + SegmentSize - 1) / SegmentSize }
func Blocks(n int) int   { return (Segments(n) + BlockSegments - 1) / BlockSegments }

// Tokenize is the match finder of one segment: greedy, one 4-byte hash table of the last position per hash,
// matches of 4 to 258 bytes found by comparing forward. It writes the tokens (at most len(seg)) and returns how
// many, and adds their symbols and the segment's byte values to hist (a block's histogram, BlockHistWords
// counts). table has 1<<HashBits entries; it is cleared first.
func Tokenize(seg []byte, table []uint16, tokens []Token, hist []uint32) int {
	clear(table)
	n, nt, pos := len(seg), 0, 0
	for pos < n {
		if pos+minMatch <= n {
			v := le32(seg, pos)
			h := hash4(v)
			c := int(table[h]) - 1
			table[h] = uint16(pos + 1)
			if c >= 0 && le32(seg, c) == v {
				l := minMatch
				for pos+l < n && l < maxMatch && seg[c+l] == seg[pos+l] {
					l++
				}
				if l < ShortMatch && pos-c > ShortDist {
					goto lit
				}
				tokens[nt] = match(l, pos-c)
				nt++
				hist[257+lengthCode(l)]++
				hist[NumLitLen+distCode(pos-c)]++
				// The match's last position goes in the table too: a run continues from there.
				if end := pos + l - 1; end+minMatch <= n {
					table[hash4(le32(seg, end))] = uint16(end + 1)
				}
				pos += l
				continue
			}
		}
	lit:
		tokens[nt] = literal(seg[pos])
		nt++
		hist[seg[pos]]++
		pos++
	}
	for _, c := range seg {
		hist[HistWords+int(c)]++
	}
	return nt
}

// AdlerPart is a segment's share of the stream's Adler-32: A = Σ b mod 65521 and B = Σ (len−i)·b mod 65521.
func AdlerPart(seg []byte) (a, b uint32) {
	var sa, sb uint64
	l := uint64(len(seg))
	for i, c := range seg {
		sa += uint64(c)
		sb += (l - uint64(i)) * uint64(c)
	}
	return uint32(sa % 65521), uint32(sb % 65521)
}

// CombineAdler is the Adler-32 of the whole input from its segments' parts, in order (parts[2k] = A, [2k+1] = B;
// the last segment may be short: n is the input's length).
func CombineAdler(parts []uint32, n int) uint32 {
	s1, s2 := uint64(1), uint64(0)
	for k := 0; 2*k+1 < len(parts); k++ {
		l := uint64(min(SegmentSize, n-k*SegmentSize))
		s2 = (s2 + l%65521*s1 + uint64(parts[2*k+1])) % 65521
		s1 = (s1 + uint64(parts[2*k])) % 65521
	}
	return uint32(s2<<16 | s1)
}

// Code is a block's Huffman code: per symbol the code (bit-reversed, to be written least significant bit first)
// and its length.
type Code struct {
	Bits [HistWords]uint16
	Len  [HistWords]uint8
}

// Plan is one block ready to encode: its code, its header (the block-type bits, then the dynamic header) and
// where it goes.
type Plan struct {
	Code       Code
	Header     []byte // bits least significant first; HeaderBits of them
	HeaderBits int
	Offset     int  // byte offset of the block in the deflate data
	Size       int  // bytes of the block, its flush included
	Last       bool // the final block: BFINAL set, no flush after it
	// Literals: the block is coded as its input bytes alone, its matches dropped. Short matches in noisy data
	// (a marked photo's filtered rows) cost more bits than the literals they replace and spoil the literals'
	// code; each block takes whichever coding is smaller.
	Literals bool
}

// PlanBlock builds a block's code from its histogram (BlockHistWords counts) and writes its header: coded with
// its matches or as literals alone, whichever is smaller (the matches on a tie). The size is exact: header,
// symbols, end of block, then (unless last) an empty stored block and the padding to a byte.
func PlanBlock(hist []uint32, last bool) (Plan, error) {
	if len(hist) != BlockHistWords {
		return Plan{}, fmt.Errorf("pardeflate: histogram of %d counts, want %d", len(hist), BlockHistWords)
	}
	withMatches, err := planCode(hist[:HistWords], last)
	if err != nil {
		return Plan{}, err
	}
	lits := make([]uint32, HistWords)
	copy(lits, hist[HistWords:])
	literals, err := planCode(lits, last)
	if err != nil {
		return Plan{}, err
	}
	if literals.Size < withMatches.Size {
		literals.Literals = true
		return literals, nil
	}
	return withMatches, nil
}

// planCode is PlanBlock for one histogram of symbols (HistWords counts).
func planCode(hist []uint32, last bool) (Plan, error) {
	var p Plan
	p.Last = last
	lit := make([]uint32, NumLitLen)
	copy(lit, hist[:NumLitLen])
	lit[endOfBlock] = 1
	dist := make([]uint32, NumDist)
	copy(dist, hist[NumLitLen:])
	litLen := codeLengths(lit, maxBits)
	distLen := codeLengths(dist, maxBits)
	copy(p.Code.Len[:NumLitLen], litLen)
	copy(p.Code.Len[NumLitLen:], distLen)
	canonical(p.Code.Len[:NumLitLen], p.Code.Bits[:NumLitLen])
	canonical(p.Code.Len[NumLitLen:], p.Code.Bits[NumLitLen:])

	var w bitWriter
	btype := uint64(2 << 1) // BTYPE 10 (dynamic), after BFINAL
	if last {
		btype |= 1
	}
	w.put(btype, 3)
	if err := writeHeader(&w, litLen, distLen); err != nil {
		return Plan{}, err
	}
	p.HeaderBits = w.bits()
	p.Header = w.flush()
	bits := p.HeaderBits + int(p.Code.Len[endOfBlock])
	for s := 0; s < NumLitLen; s++ {
		if s == endOfBlock || hist[s] == 0 {
			continue
		}
		l := int(p.Code.Len[s])
		if s > endOfBlock {
			l += int(lengthExtra[s-257])
		}
		bits += int(hist[s]) * l
	}
	for s := 0; s < NumDist; s++ {
		bits += int(hist[NumLitLen+s]) * (int(p.Code.Len[NumLitLen+s]) + int(distExtra[s]))
	}
	if last {
		p.Size = (bits + 7) / 8
	} else {
		p.Size = (bits+3+7)/8 + 4
	}
	return p, nil
}

// codeLengths is a length-limited Huffman code for freq: Huffman's construction over the symbols sorted by
// count, then symbol (Moffat and Katajainen's in-place computation), and while its longest code is over limit
// the counts halved (rounded up) and the code built again. At least two symbols get a code (deflate decoders want
// a complete code): the first unused ones are given a count of one.
func codeLengths(freq []uint32, limit int) []uint8 {
	lens := make([]uint8, len(freq))
	keys := make([]uint64, 0, len(freq)) // count<<16 | symbol
	for i, v := range freq {
		if v > 0 {
			keys = append(keys, uint64(v)<<16|uint64(i))
		}
	}
	for i := 0; len(keys) < 2 && i < len(freq); i++ {
		if freq[i] == 0 {
			keys = append(keys, 1<<16|uint64(i))
		}
	}
	slices.Sort(keys)
	a := make([]int64, len(keys))
	for {
		for i, k := range keys {
			a[i] = int64(k >> 16)
		}
		minimumRedundancy(a)
		if int(a[0]) <= limit { // a[0], the rarest symbol's, is the longest
			for i, k := range keys {
				lens[k&0xffff] = uint8(a[i])
			}
			return lens
		}
		for i, k := range keys {
			keys[i] = ((k>>16)+1)/2<<16 | k&0xffff
		}
		slices.Sort(keys)
	}
}

// minimumRedundancy replaces the weights a (at least two, ascending) by the lengths of an optimal prefix code,
// in place (A. Moffat and J. Katajainen, "In-place calculation of minimum-redundancy codes", 1995).
func minimumRedundancy(a []int64) {
	n := len(a)
	// First pass, left to right: the internal nodes' weights, then their parents.
	a[0] += a[1]
	root, leaf := 0, 2
	for next := 1; next < n-1; next++ {
		if leaf >= n || a[root] < a[leaf] {
			a[next] = a[root]
			a[root] = int64(next)
			root++
		} else {
			a[next] = a[leaf]
			leaf++
		}
		if leaf >= n || (root < next && a[root] < a[leaf]) {
			a[next] += a[root]
			a[root] = int64(next)
			root++
		} else {
			a[next] += a[leaf]
			leaf++
		}
	}
	// Second pass, right to left: the internal nodes' depths.
	a[n-2] = 0
	for next := n - 3; next >= 0; next-- {
		a[next] = a[a[next]] + 1
	}
	// Third pass, right to left: the leaves' depths.
	avail, used, depth := 1, 0, int64(0)
	root, next := n-2, n-1
	for avail > 0 {
		for root >= 0 && a[root] == depth {
			used++
			root--
		}
		for avail > used {
			a[next] = depth
			next--
			avail--
		}
		avail, depth, used = 2*used, depth+1, 0
	}
}

// canonical assigns deflate's canonical codes to lens, bit-reversed.
func canonical(lens []uint8, codes []uint16) {
	var count [maxBits + 2]int
	for _, l := range lens {
		count[l]++
	}
	count[0] = 0
	var next [maxBits + 2]int
	code := 0
	for b := 1; b <= maxBits; b++ {
		code = (code + count[b-1]) << 1
		next[b] = code
	}
	for s, l := range lens {
		if l == 0 {
			continue
		}
		c := next[l]
		next[l]++
		r := 0
		for i := 0; i < int(l); i++ {
			r = r<<1 | (c>>i)&1
		}
		codes[s] = uint16(r)
	}
}

// clOrder is the order in which the code-length code's lengths are written.
var clOrder = [19]int{16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15}

// writeHeader writes a dynamic block's header: HLIT, HDIST, HCLEN, the code-length code, then the litlen and
// distance code lengths run-length coded (16: repeat the last 3-6 times, 17: 3-10 zeros, 18: 11-138 zeros).
func writeHeader(w *bitWriter, litLen, distLen []uint8) error {
	hlit := NumLitLen
	for hlit > 257 && litLen[hlit-1] == 0 {
		hlit--
	}
	hdist := NumDist
	for hdist > 1 && distLen[hdist-1] == 0 {
		hdist--
	}
	all := append(append([]uint8{}, litLen[:hlit]...), distLen[:hdist]...)
	type rl struct{ sym, extra, n uint8 }
	var syms []rl
	for i := 0; i < len(all); {
		l := all[i]
		run := 1
		for i+run < len(all) && all[i+run] == l {
			run++
		}
		switch {
		case l == 0 && run >= 11:
			k := min(run, 138)
			syms = append(syms, rl{18, uint8(k - 11), 7})
			i += k
		case l == 0 && run >= 3:
			syms = append(syms, rl{17, uint8(run - 3), 3})
			i += run
		case l != 0 && run >= 4:
			syms = append(syms, rl{l, 0, 0})
			k := min(run-1, 6)
			syms = append(syms, rl{16, uint8(k - 3), 2})
			i += 1 + k
		default:
			syms = append(syms, rl{l, 0, 0})
			i++
		}
	}
	clFreq := make([]uint32, 19)
	for _, s := range syms {
		clFreq[s.sym]++
	}
	clLen := codeLengths(clFreq, maxCLBits)
	clCode := make([]uint16, 19)
	canonical(clLen, clCode)
	hclen := 19
	for hclen > 4 && clLen[clOrder[hclen-1]] == 0 {
		hclen--
	}
	w.put(uint64(hlit-257), 5)
	w.put(uint64(hdist-1), 5)
	w.put(uint64(hclen-4), 4)
	for _, s := range clOrder[:hclen] {
		w.put(uint64(clLen[s]), 3)
	}
	for _, s := range syms {
		w.put(uint64(clCode[s.sym]), uint(clLen[s.sym]))
		if s.n > 0 {
			w.put(uint64(s.extra), uint(s.n))
		}
	}
	if w.bits() > 8*MaxHeaderBytes {
		return errors.New("pardeflate: block header too long")
	}
	return nil
}

// bitWriter collects bits least significant first.
type bitWriter struct {
	out []byte
	acc uint64
	n   uint
}

func (w *bitWriter) put(v uint64, n uint) {
	w.acc |= v << w.n
	w.n += n
	for w.n >= 8 {
		w.out = append(w.out, byte(w.acc))
		w.acc >>= 8
		w.n -= 8
	}
}

func (w *bitWriter) bits() int { return 8*len(w.out) + int(w.n) }

// flush returns the bytes, the last one padded with zeros.
func (w *bitWriter) flush() []byte {
	if w.n > 0 {
		w.out = append(w.out, byte(w.acc))
		w.acc, w.n = 0, 0
	}
	return w.out
}

// Plans builds every block's plan from the blocks' histograms (Blocks(n) of BlockHistWords each) and lays the
// blocks out: it returns the plans and the deflate data's total size.
func Plans(hists []uint32, n int) ([]Plan, int, error) {
	nb := Blocks(n)
	if len(hists) != nb*BlockHistWords {
		return nil, 0, fmt.Errorf("pardeflate: %d histogram counts for %d blocks", len(hists), nb)
	}
	plans := make([]Plan, nb)
	off := 0
	for b := range plans {
		p, err := PlanBlock(hists[b*BlockHistWords:(b+1)*BlockHistWords], b == nb-1)
		if err != nil {
			return nil, 0, err
		}
		p.Offset = off
		off += p.Size
		plans[b] = p
	}
	return plans, off, nil
}

// Words appends the plan as the encoding kernel reads it (PlanWords little-endian words).
func (p *Plan) Words(dst []uint32) []uint32 {
	for s := 0; s < HistWords; s++ {
		dst = append(dst, uint32(p.Code.Bits[s])|uint32(p.Code.Len[s])<<16)
	}
	last := uint32(0)
	if p.Last {
		last = 1
	}
	literals := uint32(0)
	if p.Literals {
		literals = 1
	}
	dst = append(dst, uint32(p.HeaderBits), uint32(p.Offset), last, literals)
	var hb [MaxHeaderBytes]byte
	copy(hb[:], p.Header)
	for i := 0; i < MaxHeaderBytes; i += 4 {
		dst = append(dst, binary.LittleEndian.Uint32(hb[i:]))
	}
	return dst
}

// EncodeBlock writes block b (its plan p, the tokens of its segments, or its bytes of data when p.Literals) at
// out[p.Offset:p.Offset+p.Size]: the header's bits, each token's code and extra bits, the end of block, then the
// flush or the final padding. tokens holds SegmentSize tokens per segment; counts the number of each segment.
func EncodeBlock(p *Plan, b int, data []byte, tokens []Token, counts []uint32, out []byte) {
	w := bitWriter{out: out[p.Offset:p.Offset]}
	for i := 0; i < p.HeaderBits; i += 8 {
		w.put(uint64(p.Header[i/8]), uint(min(8, p.HeaderBits-i)))
	}
	nseg := len(counts)
	if p.Literals {
		for _, c := range data[min(len(data), b*BlockSegments*SegmentSize):min(len(data), (b+1)*BlockSegments*SegmentSize)] {
			w.put(uint64(p.Code.Bits[c]), uint(p.Code.Len[c]))
		}
	}
	for s := b * BlockSegments; s < min(nseg, (b+1)*BlockSegments) && !p.Literals; s++ {
		for _, t := range tokens[s*SegmentSize : s*SegmentSize+int(counts[s])] {
			if !t.IsMatch() {
				l := t.Literal()
				w.put(uint64(p.Code.Bits[l]), uint(p.Code.Len[l]))
				continue
			}
			lc := lengthCode(t.Len())
			w.put(uint64(p.Code.Bits[257+lc]), uint(p.Code.Len[257+lc]))
			w.put(uint64(t.Len()-int(lengthBase[lc])), uint(lengthExtra[lc]))
			dc := distCode(t.Dist())
			w.put(uint64(p.Code.Bits[NumLitLen+dc]), uint(p.Code.Len[NumLitLen+dc]))
			w.put(uint64(t.Dist()-int(distBase[dc])), uint(distExtra[dc]))
		}
	}
	w.put(uint64(p.Code.Bits[endOfBlock]), uint(p.Code.Len[endOfBlock]))
	if !p.Last {
		w.put(0, 3)
		w.flush()
		w.out = append(w.out, 0, 0, 0xff, 0xff)
	} else {
		w.flush()
	}
}

// ZlibHeader is the two bytes before the deflate data (deflate, 32 KiB window, fastest).
var ZlibHeader = []byte{0x78, 0x01}

// Compress writes data as a zlib stream in the package's format, on the CPU: the reference the device passes
// are checked against (and what tests and the size comparison in bench/README.md use).
func Compress(data []byte) []byte {
	n := len(data)
	nseg := Segments(n)
	if n == 0 {
		// One final block with only the end of block: a stream of zero bytes.
		p, _ := PlanBlock(make([]uint32, BlockHistWords), true)
		out := make([]byte, p.Size)
		EncodeBlock(&p, 0, nil, nil, nil, out)
		return AppendTrailer(append(append([]byte{}, ZlibHeader...), out...), 1)
	}
	tokens := make([]Token, nseg*SegmentSize)
	counts := make([]uint32, nseg)
	hists := make([]uint32, Blocks(n)*BlockHistWords)
	parts := make([]uint32, 2*nseg)
	table := make([]uint16, 1<<HashBits)
	for s := 0; s < nseg; s++ {
		seg := data[s*SegmentSize : min(n, (s+1)*SegmentSize)]
		b := s / BlockSegments
		counts[s] = uint32(Tokenize(seg, table, tokens[s*SegmentSize:], hists[b*BlockHistWords:(b+1)*BlockHistWords]))
		parts[2*s], parts[2*s+1] = AdlerPart(seg)
	}
	plans, size, err := Plans(hists, n)
	if err != nil {
		panic(err) // histograms of the right size: PlanBlock's only errors are programming errors
	}
	out := make([]byte, size)
	for b := range plans {
		EncodeBlock(&plans[b], b, data, tokens, counts, out)
	}
	return AppendTrailer(append(append([]byte{}, ZlibHeader...), out...), CombineAdler(parts, n))
}

// AppendTrailer appends the zlib trailer (the Adler-32, big-endian).
func AppendTrailer(b []byte, adler uint32) []byte { return binary.BigEndian.AppendUint32(b, adler) }
