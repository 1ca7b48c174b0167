package imageio

import "encoding/binary"

// PNG filter types (PNG specification, section 9.2).
const (
	ftNone = iota
	ftSub
	ftUp
	ftAverage
	ftPaeth
)

// filterRow writes into out (1+len(cur) bytes) the filter type and the filtered bytes of the row cur, given
// prev, the unfiltered previous row (all zeros above the first row), with bpp bytes per pixel. It makes the
// choice image/png's encoder makes, so that the file is the one image/png (and the GPU's filter pass) would give:
// the filter with the least sum of absolute values of the filtered bytes (as signed bytes), ties going to the
// first of Up, Paeth, None, Sub, Average. The four cheap sums are taken in one pass; Paeth, the costly one,
// stops as soon as it cannot win.
func filterRow(out, cur, prev []byte, bpp int) {
	n := len(cur)
	out = out[:n+1]
	prev = prev[:n]
	dst := out[1:]
	var sumUp, sumNone, sumSub, sumAvg int
	for i := 0; i < bpp; i++ {
		c, u := cur[i], prev[i]
		sumUp += abs8(c - u)
		sumNone += abs8(c)
		sumSub += abs8(c)
		sumAvg += abs8(c - u/2)
	}
	// From the second pixel on: cur, its left neighbour, the byte above and the one above-left, as slices of
	// one length so that the loops run without bounds checks.
	c, l := cur[bpp:], cur[:n-bpp]
	u, ul := prev[bpp:], prev[:n-bpp]
	l, u, ul = l[:len(c)], u[:len(c)], ul[:len(c)]
	// Eight bytes at a time in a uint64 (SWAR), then the rest one by one.
	k := len(c) &^ 7
	up, none, sub, avg := swarSums(c[:k], l[:k], u[:k])
	sumUp, sumNone, sumSub, sumAvg = sumUp+up, sumNone+none, sumSub+sub, sumAvg+avg
	for i := k; i < len(c); i++ {
		cv, uv, lv := c[i], u[i], l[i]
		sumUp += abs8(cv - uv)
		sumNone += abs8(cv)
		sumSub += abs8(cv - lv)
		sumAvg += abs8(cv - uint8((uint(lv)+uint(uv))/2))
	}
	// Paeth wins only below Up (which precedes it) and at or below the best of the three that follow it. It is
	// written into dst as it is summed: if it wins, that is the output.
	limit := min(sumUp, min(sumNone, sumSub, sumAvg)+1)
	sumPaeth := 0
	for i := 0; i < bpp; i++ {
		dst[i] = cur[i] - prev[i]
		sumPaeth += abs8(dst[i])
	}
	if sumPaeth < limit {
		d := dst[bpp:]
		d = d[:len(c)]
		for i, cv := range c {
			// The Paeth predictor (PNG specification, section 9.4) of left a, up b and up-left cc: of the three,
			// the one nearest to a+b−cc, ties in the order a, b, cc; as two conditional moves (cc, then b if at
			// least as near, then a if at least as near as that), which gives the same ties without branches.
			// Written out here: as a function the compiler does not inline it, and the call costs a third.
			a, b, cc := int(l[i]), int(u[i]), int(ul[i])
			pa, pb, pc := iabs(b-cc), iabs(a-cc), iabs(a+b-2*cc)
			p, best := cc, pc
			if pb <= best {
				p, best = b, pb
			}
			if pa <= best {
				p = a
			}
			d[i] = cv - uint8(p)
			sumPaeth += abs8(d[i])
			if sumPaeth >= limit && i&63 == 63 { // checked every 64 bytes: the loop stays tight
				break
			}
		}
	}
	f, best := ftUp, sumUp
	if sumPaeth < best {
		f, best = ftPaeth, sumPaeth
	}
	if sumNone < best {
		f, best = ftNone, sumNone
	}
	if sumSub < best {
		f, best = ftSub, sumSub
	}
	if sumAvg < best {
		f = ftAverage
	}
	out[0] = byte(f)
	d := dst[bpp:]
	d = d[:len(c)]
	switch f {
	case ftNone:
		copy(dst, cur)
	case ftSub:
		copy(dst[:bpp], cur[:bpp])
		for i, cv := range c {
			d[i] = cv - l[i]
		}
	case ftUp:
		for i := 0; i < n; i++ {
			dst[i] = cur[i] - prev[i]
		}
	case ftAverage:
		for i := 0; i < bpp; i++ {
			dst[i] = cur[i] - prev[i]/2
		}
		for i, cv := range c {
			d[i] = cv - uint8((uint(l[i])+uint(u[i]))/2)
		}
	}
}

// Byte lanes of a uint64.
const (
	lanes01 = 0x0101010101010101
	lanes80 = 0x8080808080808080
	lanesFE = 0xFEFEFEFEFEFEFEFE
	lanes16 = 0x00FF00FF00FF00FF
)

// swarSums returns, over the bytes of c (l its left neighbours, u the bytes above; len(c) a multiple of 8), the
// sums of abs8 of the Up, None, Sub and Average filters' outputs: the same as the byte loop, eight bytes per
// step. Each sum is kept in four 16-bit lanes (at most 2·128 added per lane and step), emptied every 128 steps.
func swarSums(c, l, u []byte) (up, none, sub, avg int) {
	var aUp, aNone, aSub, aAvg uint64
	flush := func() {
		up, none, sub, avg = up+laneSum(aUp), none+laneSum(aNone), sub+laneSum(aSub), avg+laneSum(aAvg)
		aUp, aNone, aSub, aAvg = 0, 0, 0, 0
	}
	l, u = l[:len(c)], u[:len(c)]
	for i, steps := 0, 0; i+8 <= len(c); i += 8 {
		cv := binary.LittleEndian.Uint64(c[i:])
		lv := binary.LittleEndian.Uint64(l[i:])
		uv := binary.LittleEndian.Uint64(u[i:])
		mean := (lv & uv) + ((lv^uv)&lanesFE)>>1 // ⌊(l+u)/2⌋ per byte
		aUp += pairSums(absBytes(subBytes(cv, uv)))
		aNone += pairSums(absBytes(cv))
		aSub += pairSums(absBytes(subBytes(cv, lv)))
		aAvg += pairSums(absBytes(subBytes(cv, mean)))
		if steps++; steps == 128 {
			flush()
			steps = 0
		}
	}
	flush()
	return up, none, sub, avg
}

// subBytes is a−b in each byte, modulo 256, with no borrow between bytes.
func subBytes(a, b uint64) uint64 { return ((a | lanes80) - (b &^ lanes80)) ^ ((a ^ ^b) & lanes80) }

// absBytes is abs8 of each byte (0..128).
func absBytes(d uint64) uint64 {
	neg := (d & lanes80) >> 7 * 0xFF // 0xFF in the negative bytes
	return (d ^ neg) + (neg & lanes01)
}

// pairSums adds each pair of neighbouring bytes into a 16-bit lane.
func pairSums(x uint64) uint64 { return x&lanes16 + (x>>8)&lanes16 }

func laneSum(x uint64) int {
	return int(x&0xFFFF + (x>>16)&0xFFFF + (x>>32)&0xFFFF + x>>48)
}

// abs8 is |d| for the byte d read as a signed byte (0..128), without a branch.
func abs8(d uint8) int {
	x := int(int8(d))
	s := x >> 63
	return (x ^ s) - s
}

func iabs(x int) int {
	s := x >> 63
	return (x ^ s) - s
}
