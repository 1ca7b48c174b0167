package codec

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkFER measures the frame error rate of the code against the raw hard-decision error rate on an AWGN
// channel (the numbers behind the choice of K=9 in convcode.go), 200 frames per noise level, reported as
// metrics (`go test -run '^$' -bench FER -benchtime 1x ./codec`).
func BenchmarkFER(b *testing.B) {
	for b.Loop() {
		frameErrorRates(b)
	}
}

func frameErrorRates(b *testing.B) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, sigma := range []float64{0.8, 0.9, 1.0} {
		fails := 0
		ber := 0.0
		const trials = 200
		for trial := 0; trial < trials; trial++ {
			id := randomID(rng)
			coded := convEncode(frameBits(id))
			llr := make([]float64, len(coded))
			for i, c := range coded {
				x := 2*float64(c) - 1 + sigma*rng.NormFloat64()
				if (x > 0) != (c == 1) {
					ber++
				}
				llr[i] = 2 * x / (sigma * sigma)
			}
			if r := decodeSoft(llr); !r.ok || r.id != id {
				fails++
			}
		}
		b.ReportMetric(ber/trials/codedBits, fmt.Sprintf("rawBER@sigma%.2f", sigma))
		b.ReportMetric(float64(fails)/trials, fmt.Sprintf("FER@sigma%.2f", sigma))
	}
}
