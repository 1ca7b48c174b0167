package codec

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

func TestListDecodeClean(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 9))
	info := frameBits(randomID(rng))
	coded := convEncode(info)
	llr := make([]float64, len(coded))
	for i, c := range coded {
		llr[i] = 4 * (2*float64(c) - 1)
	}
	words := listDecode(llr)
	if len(words) == 0 {
		t.Fatal("no words")
	}
	for i := range info {
		if words[0][i] != info[i] {
			t.Fatalf("best word differs at %d", i)
		}
	}
}

// BenchmarkListFER measures how many of 200 noisy frames per noise level BCJR decodes, and how many with the
// list decoder after it, reported as metrics (`go test -run '^$' -bench ListFER -benchtime 1x ./codec`).
func BenchmarkListFER(b *testing.B) {
	for b.Loop() {
		listFrameRates(b)
	}
}

func listFrameRates(b *testing.B) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, sigma := range []float64{0.95, 1.0, 1.05} {
		bcjr, list := 0, 0
		const trials = 200
		for trial := 0; trial < trials; trial++ {
			id := randomID(rng)
			coded := convEncode(frameBits(id))
			llr := make([]float64, len(coded))
			for i, c := range coded {
				x := 2*float64(c) - 1 + sigma*rng.NormFloat64()
				llr[i] = 2 * x / (sigma * sigma)
			}
			r := decodeSoft(llr)
			if r.ok && r.id == id {
				bcjr++
				list++
				continue
			}
			for _, w := range listDecode(llr) {
				if got, ok := parseFrame(w); ok && got == id {
					list++
					break
				}
			}
		}
		b.ReportMetric(float64(bcjr)/trials, fmt.Sprintf("BCJR-ok@sigma%.2f", sigma))
		b.ReportMetric(float64(list)/trials, fmt.Sprintf("list-ok@sigma%.2f", sigma))
	}
}
