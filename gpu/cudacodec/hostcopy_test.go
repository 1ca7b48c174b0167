package cudacodec

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// The banded copies give copy's bytes: strided rows (the image's stride to the packed staging layout and
// back), contiguous copies of every size class (one goroutine, several, a tail shorter than a band), and
// nothing past the rows in a strided destination.
func TestHostCopiesMatchCopy(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 5))
	fill := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	for _, n := range []int{0, 1, 1000, 1 << 20, 3<<20 + 12345, 48 << 20} {
		src := fill(n)
		dst := make([]byte, n)
		copyBytes(dst, src)
		if !bytes.Equal(dst, src) {
			t.Fatalf("copyBytes of %d bytes differs", n)
		}
	}
	for _, c := range []struct{ w, h, pad int }{{3, 5, 0}, {4000, 3000, 0}, {1501, 1100, 7}, {640, 1, 3}} {
		rowBytes := 4 * c.w
		stride := rowBytes + c.pad
		src := fill(c.h * stride)
		packed := make([]byte, c.h*rowBytes)
		copyRows(packed, rowBytes, src, stride, rowBytes, c.h)
		back := fill(c.h * stride) // the padding must keep its bytes
		want := append([]byte(nil), back...)
		copyRows(back, stride, packed, rowBytes, rowBytes, c.h)
		for y := 0; y < c.h; y++ {
			if !bytes.Equal(packed[y*rowBytes:(y+1)*rowBytes], src[y*stride:y*stride+rowBytes]) {
				t.Fatalf("%dx%d+%d: packed row %d differs", c.w, c.h, c.pad, y)
			}
			copy(want[y*stride:y*stride+rowBytes], src[y*stride:y*stride+rowBytes])
		}
		if !bytes.Equal(back, want) {
			t.Fatalf("%dx%d+%d: rows copied back to the strided layout differ (or the padding changed)", c.w, c.h, c.pad)
		}
	}
}
