package codec

import "math"

// softWord is what one synchronised accumulator yields.
type softWord struct {
	llr    []float64 // per coded bit, positive means 1
	pilotZ float64   // pilot correlation in standard deviations (about N(0,1) without a mark)
}

// demod correlates an aligned tile accumulator with the pilot and the data chips. The pilot gives the mark
// amplitude per chip (mu) and, with the accumulator's total power, the noise power; coded-bit LLRs are then
// 2·mu·y/sigma², which stay near zero on unmarked images because mu does.
func (l *layout) demod(acc []float64) softWord {
	var cp, power float64
	for i, v := range acc {
		power += v * v
		cp += float64(l.pilot[i]) * v
	}
	power /= float64(len(acc))
	if power <= 0 {
		return softWord{llr: make([]float64, codedBits)}
	}
	np := float64(l.pilotN)
	z := cp / math.Sqrt(np*power)
	mu := math.Max(cp/np, 0)
	sigma2 := math.Max(power-mu*mu, 1e-3*power)
	y := make([]float64, codedBits)
	for i, v := range acc {
		if b := l.bitOf[i]; b >= 0 {
			y[b] += float64(l.chip[i]) * v
		}
	}
	for b := range y {
		y[b] *= 2 * mu / sigma2
	}
	return softWord{llr: y, pilotZ: z}
}

// decodeResult is the outcome of decoding one soft word.
type decodeResult struct {
	id         ID
	ok         bool      // version, magic and CRC passed
	infoLLR    []float64 // per info bit
	confidence float64   // mean |tanh(LLR/2)| over the id bits
}

// decodeSoft decodes a soft word: the BCJR's info-bit LLRs, the frame check, and when that fails the list
// decoder's few best paths.
func decodeSoft(llr []float64) decodeResult { return decodeInfo(llr, convDecode(llr)) }

// decodeInfo is decodeSoft given info = convDecode(llr), computed elsewhere (a device: accel.ConvDecoder).
func decodeInfo(llr, info []float64) decodeResult {
	bits := make([]uint8, len(info))
	for i, v := range info {
		if v > 0 {
			bits[i] = 1
		}
	}
	id, ok := parseFrame(bits)
	if !ok {
		// The BCJR decision failed the frame check: let the CRC pick among the best few trellis paths.
		for _, w := range listDecode(llr) {
			if id, ok = parseFrame(w); ok {
				break
			}
		}
	}
	var conf float64
	for _, v := range info[:idBits] {
		conf += math.Abs(math.Tanh(v / 2))
	}
	return decodeResult{id: id, ok: ok, infoLLR: info, confidence: conf / idBits}
}
