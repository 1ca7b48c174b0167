package codec

import "slices"

// listSize is how many candidate words the list Viterbi decoder hands to the frame check after the BCJR
// decision fails it. Each candidate is one more chance for a random word to pass the 48 check bits, which the
// false-positive bound accounts for (docs/codec.md).
const listSize = 8

// listDecode runs a parallel list Viterbi decoder over the same circularly extended trellis as convDecode and
// returns up to listSize distinct info words (0/1 per byte), best path metric first. Lists help exactly where the
// single best path is wrong but a close runner-up is right: the CRC picks it out.
func listDecode(llr []float64) [][]uint8 {
	n := len(llr) / 3
	if n == 0 {
		return nil
	}
	steps := n + 2*convWrap
	index := func(t int) int { return ((t-convWrap)%n + n) % n }
	var outs [2 * convStates][3]uint8
	for r := range outs {
		outs[r] = convOutputs(uint32(r))
	}
	type entry struct {
		metric float64
		prev   uint16 // predecessor state
		rank   uint8  // rank of the predecessor entry
		ok     bool
	}
	// back[t][state][rank] holds the predecessor of that list entry after step t.
	back := make([]entry, (steps+1)*convStates*listSize)
	at := func(t, s, k int) *entry { return &back[(t*convStates+s)*listSize+k] }
	for s := 0; s < convStates; s++ {
		*at(0, s, 0) = entry{ok: true}
	}
	low := convStates/2 - 1
	for t := 0; t < steps; t++ {
		i := 3 * index(t)
		var g [2 * convStates]float64
		for r := range g {
			o := outs[r]
			for k := 0; k < 3; k++ {
				if o[k] == 1 {
					g[r] += llr[i+k] / 2
				} else {
					g[r] -= llr[i+k] / 2
				}
			}
		}
		for ns := 0; ns < convStates; ns++ {
			// Each predecessor's list is sorted, and one branch metric is added to all of it, so the new list
			// is a merge of two sorted lists.
			u := ns >> (convK - 2)
			s0, s1 := (ns&low)<<1, (ns&low)<<1|1
			g0, g1 := g[u<<(convK-1)|s0], g[u<<(convK-1)|s1]
			a, b := 0, 0
			for k := 0; k < listSize; k++ {
				var ea, eb *entry
				okA, okB := false, false
				if a < listSize {
					ea = at(t, s0, a)
					okA = ea.ok
				}
				if b < listSize {
					eb = at(t, s1, b)
					okB = eb.ok
				}
				switch {
				case okA && (!okB || ea.metric+g0 >= eb.metric+g1):
					*at(t+1, ns, k) = entry{metric: ea.metric + g0, prev: uint16(s0), rank: uint8(a), ok: true}
					a++
				case okB:
					*at(t+1, ns, k) = entry{metric: eb.metric + g1, prev: uint16(s1), rank: uint8(b), ok: true}
					b++
				}
			}
		}
	}
	// Final entries of all states, best first; backtrack each and keep distinct words of the block.
	type final struct {
		s, k   int
		metric float64
	}
	var fins []final
	for s := 0; s < convStates; s++ {
		for k := 0; k < listSize; k++ {
			if e := at(steps, s, k); e.ok {
				fins = append(fins, final{s, k, e.metric})
			}
		}
	}
	slices.SortFunc(fins, func(a, b final) int {
		switch {
		case a.metric > b.metric:
			return -1
		case a.metric < b.metric:
			return 1
		}
		return 0
	})
	var words [][]uint8
	for _, f := range fins[:min(len(fins), 8*listSize)] {
		word := make([]uint8, n)
		s, k := f.s, f.k
		for t := steps; t > 0; t-- {
			e := at(t, s, k)
			// The input that led into state s is its top bit.
			if tt := t - 1; tt >= convWrap && tt < convWrap+n {
				word[tt-convWrap] = uint8(s >> (convK - 2))
			}
			s, k = int(e.prev), int(e.rank)
		}
		dup := false
		for _, w := range words {
			if slices.Equal(w, word) {
				dup = true
				break
			}
		}
		if !dup {
			words = append(words, word)
			if len(words) == listSize {
				break
			}
		}
	}
	return words
}
