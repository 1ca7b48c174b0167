package codec

// SnapMaxDistance is the largest Hamming distance between the hard-decided soft word and a known id that Snap
// accepts. For an unrelated id the 256 bits agree by chance, so P(distance <= 64) = P(Bin(256, 1/2) <= 64)
// = 2.4e-16 per known id; with a registry of N ids the false-snap probability is at most N·2.4e-16 (1e6 ids:
// 2.4e-10). See docs/codec.md.
const SnapMaxDistance = 64

// snap returns the known id nearest to the hard decisions of soft (256 info-bit LLRs), if it is unique and within
// SnapMaxDistance. Ties between different ids are refused rather than guessed.
func snap(soft []float64, known []ID) (ID, bool) {
	if len(soft) != idBits || len(known) == 0 {
		return ID{}, false
	}
	// A zero LLR carries no information; it is marked unknown and counted as a disagreement with every id.
	var word, unknown ID
	for i, v := range soft {
		switch {
		case v > 0:
			word[i/8] |= 1 << (7 - uint(i%8))
		case v == 0:
			unknown[i/8] |= 1 << (7 - uint(i%8))
		}
	}
	best, bestD, tie := ID{}, idBits+1, false
	for _, k := range known {
		d := 0
		for i := range k {
			d += popcount8((k[i] ^ word[i]) | unknown[i])
		}
		switch {
		case d < bestD:
			best, bestD, tie = k, d, false
		case d == bestD && k != best:
			tie = true
		}
	}
	if tie || bestD > SnapMaxDistance {
		return ID{}, false
	}
	return best, true
}

func popcount8(b byte) int {
	n := 0
	for ; b != 0; b &= b - 1 {
		n++
	}
	return n
}
