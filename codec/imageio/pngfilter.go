package imageio

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
// choice image/png's encoder makes, so that the file is the one image/png (and accel.PNGFilter) would give:
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
	for i, cv := range c {
		uv, lv := u[i], l[i]
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
			d[i] = cv - paeth(l[i], u[i], ul[i])
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

// abs8 is |d| for the byte d read as a signed byte (0..128), without a branch.
func abs8(d uint8) int {
	x := int(int8(d))
	s := x >> 63
	return (x ^ s) - s
}

// paeth is the Paeth predictor of the PNG specification (section 9.4) for left a, up b and up-left c: of the
// three, the one nearest to a+b−c, ties in the order a, b, c. Written as two conditional moves (c, then b if
// at least as near, then a if at least as near as that), which gives the same ties without branches.
func paeth(a, b, c uint8) uint8 {
	pa := iabs(int(b) - int(c))            // |p − a| with p = a + b − c
	pb := iabs(int(a) - int(c))            // |p − b|
	pc := iabs(int(a) + int(b) - 2*int(c)) // |p − c|
	p, best := c, pc
	if pb <= best {
		p, best = b, pb
	}
	if pa <= best {
		p = a
	}
	return p
}

func iabs(x int) int {
	s := x >> 63
	return (x ^ s) - s
}
