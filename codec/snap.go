package codec

import "math"

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

// SnapMinZ is the codeword correlation, in standard deviations, that snapCoded requires. For an unrelated id the
// codeword agrees with the received soft word at random, so the normalised correlation is about N(0, 1):
// P(z >= 9) = 1.1e-19 per known id, N·1.1e-19 for a registry of N ids.
const SnapMinZ = 9.0

// snapCoded correlates coded-bit LLRs with the codeword of every known id and returns the best id when its
// normalised correlation reaches SnapMinZ and no other id comes within 3 standard deviations of it. LLRs are
// clipped at three times their RMS so that a few overconfident bits cannot carry the decision.
func snapCoded(coded []float64, known []ID) (ID, bool) {
	llr, norm := clippedLLR(coded)
	if llr == nil || len(known) == 0 {
		return ID{}, false
	}
	best, bestZ, secondZ := ID{}, math.Inf(-1), math.Inf(-1)
	for _, k := range known {
		z := codewordScore(llr, norm, k)
		switch {
		case z > bestZ:
			if k != best {
				secondZ = bestZ
			}
			best, bestZ = k, z
		case z > secondZ && k != best:
			secondZ = z
		}
	}
	if bestZ < SnapMinZ || bestZ-secondZ < 3 {
		return ID{}, false
	}
	return best, true
}

// CodewordZ is the normalised correlation, in standard deviations, of coded-bit LLRs (a FrameSoft's Coded) with
// the codeword of id: the statistic snapCoded compares with SnapMinZ. It is about N(0, 1) for an unrelated id and
// grows with the square root of the coded bits for the id that was embedded; 0 when coded is not a soft word.
// It decodes nothing, so testing one id costs one comparison in the false-positive budget, not a decode.
func CodewordZ(coded []float64, id ID) float64 {
	llr, norm := clippedLLR(coded)
	if llr == nil {
		return 0
	}
	return codewordScore(llr, norm, id)
}

// clippedLLR clips coded-bit LLRs at three times their RMS, so that a few overconfident bits cannot carry a
// decision, and returns them with their Euclidean norm; nil when coded is not a non-zero soft word.
func clippedLLR(coded []float64) ([]float64, float64) {
	if len(coded) != codedBits {
		return nil, 0
	}
	var ms float64
	for _, v := range coded {
		ms += v * v
	}
	if ms == 0 {
		return nil, 0
	}
	clip := 3 * math.Sqrt(ms/codedBits)
	llr := make([]float64, codedBits)
	var norm float64
	for i, v := range coded {
		llr[i] = math.Max(-clip, math.Min(clip, v))
		norm += llr[i] * llr[i]
	}
	return llr, math.Sqrt(norm)
}

func codewordScore(llr []float64, norm float64, id ID) float64 {
	var s float64
	for i, c := range convEncode(frameBits(id)) {
		if c == 1 {
			s += llr[i]
		} else {
			s -= llr[i]
		}
	}
	return s / norm
}

func popcount8(b byte) int {
	n := 0
	for ; b != 0; b &= b - 1 {
		n++
	}
	return n
}
