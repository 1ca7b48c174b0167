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
