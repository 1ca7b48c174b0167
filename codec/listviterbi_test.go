package codec

import (
	"fmt"
	"math/rand/v2"
	"os"
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

func TestListFER(t *testing.T) {
	if os.Getenv("FILIGRANE_EXPLORE") == "" {
		t.Skip()
	}
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
		fmt.Printf("sigma %.2f: BCJR %d/%d, with list %d/%d\n", sigma, bcjr, trials, list, trials)
	}
}
