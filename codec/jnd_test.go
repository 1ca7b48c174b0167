package codec

import (
	"math"
	"testing"
)

func TestJNDTables(t *testing.T) {
	lut := newJNDTables()
	for bg := float32(0); bg <= 255; bg += 3.3 {
		for g := float32(0); g <= 255; g += 4.1 {
			want := jnd(bg, g)
			if got := lut.jnd(bg, g); math.Abs(float64(got-want)) > 0.02*float64(want)+0.05 {
				t.Fatalf("bg %v g %v: %v want %v", bg, g, got, want)
			}
		}
	}
}
