package cudacodec

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
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

// BenchmarkSurfaceHostWork12MP times the host's share of the Surface calls of one 12 MP detection, which
// TestPhaseTimes counts in the device calls' time: Load's copy of the pixels into the pinned staging buffer (the
// JPEG's Y plane, 12 MB, or an NRGBA image, 48 MB; the staging buffer is pooled, so already faulted in), and
// the copies of results out of it into fresh Go memory (a Grid's whitened grid, a Grid's tile accumulator, and a
// whitened grid of the nominal geometry's ~350 K waxels, which only a device without BlockScores downloads).
// `go test ./gpu/cudacodec -run x -bench SurfaceHostWork12MP -cpu 1,2`.
func BenchmarkSurfaceHostWork12MP(b *testing.B) {
	const w, h = 4000, 3000
	staging := make([]byte, w*h*4)
	for i := range staging {
		staging[i] = byte(i)
	}
	for _, bpp := range []int{1, 4} {
		src := make([]byte, w*h*bpp)
		for i := range src {
			src[i] = byte(i * 7)
		}
		name := map[int]string{1: "load-y-plane", 4: "load-nrgba"}[bpp]
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(src)))
			for b.Loop() {
				copyRows(staging, w*bpp, src, w*bpp, w*bpp, h)
			}
		})
	}
	for _, r := range []struct {
		name string
		n    int
		make func() []byte
	}{
		{"pilot-sums", 8 * tileMax * tileMax * 8, func() []byte { return bytesOf(make([]float64, 8*tileMax*tileMax)) }},
		{"grid-acc", tileMax * tileMax * 8, func() []byte { return bytesOf(make([]float64, tileMax*tileMax)) }},
		{"grid-cells", 350_000 * 5, func() []byte { return bytesOf(make([]uint8, 350_000*5)) }},
	} {
		b.Run(r.name, func(b *testing.B) {
			b.SetBytes(int64(r.n))
			for b.Loop() {
				copyBytes(r.make(), staging)
			}
		})
	}
}

// Load's banded upload sends every row once, each band after it is staged and before the next is: the bytes a
// transfer queued at each send would read (copied here at the send) are the image's rows packed, for images of
// one band, of several with a short last one, with padded strides, and of rows longer than a band.
func TestStageUploadSendsEachBandStaged(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 9))
	for _, c := range []struct{ rowBytes, rows, pad int }{{12, 5, 0}, {4 * 1501, 1100, 7}, {4000, 3000, 0},
		{uploadBand + 3, 3, 1}} {
		stride := c.rowBytes + c.pad
		pix := make([]byte, (c.rows-1)*stride+c.rowBytes) // the last row unpadded, as a sub-image's may be
		for i := range pix {
			pix[i] = byte(rng.Uint32())
		}
		staging := make([]byte, c.rows*c.rowBytes)
		device := make([]byte, len(staging))
		var mu sync.Mutex
		sent, sends := map[int]int{}, 0 // band offset -> length
		err := stageUpload(staging, pix, stride, c.rowBytes, c.rows, func(off, n int) error {
			mu.Lock()
			defer mu.Unlock()
			if _, twice := sent[off]; twice || n <= 0 || off%c.rowBytes != 0 || n%c.rowBytes != 0 ||
				(n > uploadBand && n != c.rowBytes) {
				t.Errorf("%d-byte rows: send of %d bytes at %d (sent before: %v)", c.rowBytes, n, off, twice)
			}
			// What the transfer would read: the band must be staged when it is sent.
			copy(device[off:off+n], staging[off:off+n])
			sent[off] = n
			sends++
			return nil
		})
		total := 0
		for _, n := range sent {
			total += n
		}
		if err != nil || total != len(device) {
			t.Fatalf("%d-byte rows: %v, %d of %d bytes sent", c.rowBytes, err, total, len(device))
		}
		for y := 0; y < c.rows; y++ {
			if !bytes.Equal(device[y*c.rowBytes:(y+1)*c.rowBytes], pix[y*stride:y*stride+c.rowBytes]) {
				t.Fatalf("%d-byte rows, %d sends: row %d differs", c.rowBytes, sends, y)
			}
		}
		if want := (c.rows*c.rowBytes + uploadBand - 1) / uploadBand; c.rowBytes <= uploadBand && sends > want+1 {
			t.Errorf("%d-byte rows: %d sends for %d bytes", c.rowBytes, sends, c.rows*c.rowBytes)
		}
	}
	// A refused transfer: its error, and no band taken after it (each goroutine at work may finish the band it
	// had taken).
	stop := errors.New("transfer refused")
	var calls atomic.Int32
	if err := stageUpload(make([]byte, 4000*3000), make([]byte, 4000*3000), 4000, 4000, 3000, func(int, int) error {
		calls.Add(1)
		return stop
	}); err != stop || int(calls.Load()) > min(hostCopyWorkers, runtime.GOMAXPROCS(0)) {
		t.Errorf("a refused transfer: %v after %d sends, want the error after at most one a goroutine", err, calls.Load())
	}
}
