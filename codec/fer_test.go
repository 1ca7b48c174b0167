package codec

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"testing"
)

// TestFER prints the frame error rate of the code against the raw hard-decision error rate on an AWGN channel
// (the numbers behind the choice of K=9 in convcode.go). It runs only with FILIGRANE_EXPLORE=1.
func TestFER(t *testing.T) {
	if os.Getenv("FILIGRANE_EXPLORE") == "" {
		t.Skip()
	}
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
		fmt.Printf("K=%d sigma %.2f rawBER %.3f FER %.3f\n", convK, sigma, ber/trials/codedBits, float64(fails)/trials)
	}
	_ = math.Abs
}
