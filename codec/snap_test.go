package codec

import (
	"math/rand/v2"
	"testing"
)

// softFor returns soft id bits for id with the first flips bits inverted.
func softFor(id ID, flips int) []float64 {
	soft := make([]float64, idBits)
	for i, b := range id.bits() {
		v := 3.0
		if b == 0 {
			v = -3
		}
		if i < flips {
			v = -v
		}
		soft[i] = v
	}
	return soft
}

func TestSnapDistance(t *testing.T) {
	c := testCodec(t)
	rng := rand.New(rand.NewPCG(11, 12))
	known := []ID{randomID(rng), randomID(rng), randomID(rng)}
	target := known[1]
	if got, ok := c.Snap(Detection{Soft: softFor(target, SnapMaxDistance)}, known); !ok || got != target {
		t.Fatalf("distance %d not snapped", SnapMaxDistance)
	}
	if _, ok := c.Snap(Detection{Soft: softFor(target, SnapMaxDistance+1)}, known); ok {
		t.Fatal("snapped beyond the safe distance")
	}
	if _, ok := c.Snap(Detection{}, known); ok {
		t.Fatal("snapped without soft bits")
	}
	if _, ok := c.Snap(Detection{Soft: softFor(target, 0)}, nil); ok {
		t.Fatal("snapped to an empty registry")
	}
	// Zero LLRs are unknown bits: 65 of them cannot snap.
	soft := softFor(target, 0)
	for i := 0; i < SnapMaxDistance+1; i++ {
		soft[i] = 0
	}
	if _, ok := c.Snap(Detection{Soft: soft}, known); ok {
		t.Fatal("snapped on unknown bits")
	}
	// Two ids at the same distance: refuse to guess.
	twin := target
	twin[0] ^= 0x80
	soft = softFor(target, 0)
	soft[0] = 0
	if _, ok := c.Snap(Detection{Soft: soft}, []ID{target, twin}); ok {
		t.Fatal("snapped on a tie")
	}
}

func TestSnapCoded(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	known := make([]ID, 50)
	for i := range known {
		known[i] = randomID(rng)
	}
	target := known[17]
	// A soft word with a 25% raw error rate: beyond the code, well within codeword correlation.
	coded := convEncode(frameBits(target))
	llr := make([]float64, len(coded))
	for i, c := range coded {
		v := 2*float64(c) - 1 + 1.5*rng.NormFloat64()
		llr[i] = v
	}
	if r := decodeSoft(llr); r.ok {
		t.Log("the code decoded it anyway")
	}
	if got, ok := snapCoded(llr, known); !ok || got != target {
		t.Fatal("coded snap missed the id")
	}
	c := testCodec(t)
	if got, ok := c.Snap(Detection{coded: llr}, known); !ok || got != target {
		t.Fatal("Snap did not use the coded word")
	}
	// Pure noise snaps to nothing.
	for trial := 0; trial < 20; trial++ {
		for i := range llr {
			llr[i] = rng.NormFloat64()
		}
		if _, ok := snapCoded(llr, known); ok {
			t.Fatal("noise snapped")
		}
	}
}
