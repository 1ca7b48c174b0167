package codec

import "math"

// Tail-biting convolutional code, constraint length 9, rate 1/3, generators 557, 663, 711 (octal; free distance
// 18). Tail-biting (the encoder starts in the state its last eight input bits leave it in) costs no tail bits,
// and the decoder treats the trellis as a circle. K=9 instead of the K=7 code (133, 171, 165) of the research
// note: at a raw error rate of 16% it loses 4.5% of frames instead of 15.5% (BenchmarkFER), for a decoder that
// still takes about a millisecond.
const (
	convK      = 9
	convStates = 1 << (convK - 1)
	// convWrap is how many trellis steps the circular decoder runs before and after the block so that the
	// unknown start state no longer matters (8 constraint lengths).
	convWrap = 72
)

var convGenerators = [3]uint32{0o557, 0o663, 0o711}

// convOutputs returns the three coded bits for register r (newest input in bit convK-1).
func convOutputs(r uint32) [3]uint8 {
	var out [3]uint8
	for i, g := range convGenerators {
		out[i] = uint8(parity(r & g))
	}
	return out
}

func parity(v uint32) uint32 {
	v ^= v >> 16
	v ^= v >> 8
	v ^= v >> 4
	v ^= v >> 2
	v ^= v >> 1
	return v & 1
}

// convEncode encodes info bits (0/1 per byte) into 3*len(info) coded bits.
func convEncode(info []uint8) []uint8 {
	n := len(info)
	var state uint32
	for i := n - (convK - 1); i < n; i++ {
		state = ((uint32(info[i]&1) << (convK - 1)) | state) >> 1
	}
	out := make([]uint8, 0, 3*n)
	for _, u := range info {
		r := (uint32(u&1) << (convK - 1)) | state
		o := convOutputs(r)
		out = append(out, o[0], o[1], o[2])
		state = r >> 1
	}
	return out
}

// convDecode is a circular max-log BCJR decoder. llr holds one log-likelihood ratio per coded bit (positive means
// bit 1). It returns the info-bit LLRs (positive means 1); their signs are the decoded bits. The trellis is run
// over the block extended by convWrap steps on each side, which makes the tail-biting start state irrelevant.
func convDecode(llr []float64) []float64 {
	n := len(llr) / 3
	if n == 0 {
		return nil
	}
	steps := n + 2*convWrap
	index := func(t int) int { return ((t-convWrap)%n + n) % n }

	// Branch metric per register value for one step: the sum of ±llr/2 over its three coded bits. A register's
	// three bits are one of 8 patterns: the step's 8 sums are computed once (adding k = 0, 1, 2 in order, so
	// every metric is the value the per-register sum gives) and looked up by pattern.
	var pattern [2 * convStates]uint8
	for r := range pattern {
		o := convOutputs(uint32(r))
		pattern[r] = o[0] | o[1]<<1 | o[2]<<2
	}
	gammas := func(t int, g *[2 * convStates]float64) {
		i := 3 * index(t)
		var sums [8]float64
		for p := range sums {
			var v float64
			for k := 0; k < 3; k++ {
				if p>>k&1 == 1 {
					v += llr[i+k] / 2
				} else {
					v -= llr[i+k] / 2
				}
			}
			sums[p] = v
		}
		for r, p := range pattern {
			g[r] = sums[p]
		}
	}

	alpha := make([]float64, (steps+1)*convStates)
	for t := 0; t < steps; t++ {
		cur := alpha[t*convStates : (t+1)*convStates]
		next := alpha[(t+1)*convStates : (t+2)*convStates]
		for s := range next {
			next[s] = math.Inf(-1)
		}
		var g [2 * convStates]float64
		gammas(t, &g)
		for s := 0; s < convStates; s++ {
			for u := 0; u < 2; u++ {
				r := u<<(convK-1) | s
				ns := r >> 1
				if v := cur[s] + g[r]; v > next[ns] {
					next[ns] = v
				}
			}
		}
		normalise(next)
	}
	beta := make([]float64, convStates)
	prev := make([]float64, convStates)
	out := make([]float64, n)
	for t := steps - 1; t >= 0; t-- {
		var g [2 * convStates]float64
		gammas(t, &g)
		cur := alpha[t*convStates : (t+1)*convStates]
		inBlock := t >= convWrap && t < convWrap+n
		best := [2]float64{math.Inf(-1), math.Inf(-1)}
		for s := 0; s < convStates; s++ {
			prev[s] = math.Inf(-1)
			for u := 0; u < 2; u++ {
				r := u<<(convK-1) | s
				ns := r >> 1
				v := g[r] + beta[ns]
				if v > prev[s] {
					prev[s] = v
				}
				if inBlock {
					if w := cur[s] + v; w > best[u] {
						best[u] = w
					}
				}
			}
		}
		if inBlock {
			out[t-convWrap] = best[1] - best[0]
		}
		normalise(prev)
		beta, prev = prev, beta
	}
	return out
}

// normalise subtracts the maximum so metrics stay bounded over long trellises.
func normalise(m []float64) {
	mx := math.Inf(-1)
	for _, v := range m {
		if v > mx {
			mx = v
		}
	}
	for i := range m {
		m[i] -= mx
	}
}
