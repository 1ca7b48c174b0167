package codec

import (
	"math"
	"math/rand/v2"
	"testing"
)

// The mask puts the threshold where the texture is: flat areas get the floor, dense texture a multiple of it,
// and the flat side of a sharp edge between two flat areas stays near the floor (an edge masks only itself).
func TestMaskFollowsTexture(t *testing.T) {
	const w, h = 512, 256
	y := newPlane(w, h)
	rng := rand.New(rand.NewPCG(1, 2))
	for j := 0; j < h; j++ {
		for i := 0; i < w; i++ {
			switch {
			case i < 256 && j < 128: // flat mid-grey
				y.pix[j*w+i] = 128
			case i < 256: // flat grey with a sharp vertical edge at x = 128
				y.pix[j*w+i] = 100
				if i >= 128 {
					y.pix[j*w+i] = 180
				}
			default: // texture: uniform noise of ±40 levels
				y.pix[j*w+i] = 128 + 80*(rng.Float32()-0.5)
			}
		}
	}
	m := newMask(y, 2, 1)
	x0, x1, f := m.columns(w)
	row := make([]float32, w)
	m.rowInto(64, x0, x1, f, row)
	flat, texture := row[64], row[400]
	if math.Abs(float64(flat-profileV1.fineFloor)) > 0.01 {
		t.Fatalf("flat threshold %.3f, want the floor %.2f", flat, profileV1.fineFloor)
	}
	if texture < 3*flat {
		t.Fatalf("texture threshold %.3f not well above the flat one %.3f", texture, flat)
	}
	m.rowInto(192, x0, x1, f, row)
	for _, x := range []int{118, 124, 132, 138} {
		if row[x] > 2*profileV1.fineFloor {
			t.Fatalf("threshold %.3f at x=%d, %d px from an edge between flat areas: the edge leaks", row[x], x, x-128)
		}
	}
	if dark := luminanceFactor(10); dark <= 1 || luminanceFactor(128) != 1 {
		t.Fatalf("luminance factor: dark %.2f, mid %.2f", dark, luminanceFactor(128))
	}
}
