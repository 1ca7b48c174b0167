package cudacodec

import (
	"runtime"
	"sync"
)

// Copies between pageable Go memory and the pinned staging buffers. A 12 MP image is 48 MB each way; one
// goroutine copying it into freshly allocated memory (a job's output image, first touched here) spends most
// of a 12 MP embed's time on the device path in page faults and memory bandwidth (TestPhaseTimes: Read 25.7
// of 47.7 ms on an H200). Bands of rows on a few goroutines take a fraction of that; a busy node loses
// nothing, the work being the same.
const (
	hostCopyWorkers = 8       // at most this many goroutines per copy
	minCopyBand     = 1 << 20 // bytes per goroutine at least: smaller copies stay on the caller's goroutine
)

// copyRows copies rows rows of rowBytes bytes from src (row y at y·srcStride) to dst (row y at y·dstStride).
func copyRows(dst []byte, dstStride int, src []byte, srcStride, rowBytes, rows int) {
	bands := min(hostCopyWorkers, runtime.GOMAXPROCS(0), rowBytes*rows/minCopyBand)
	if bands <= 1 {
		copyBand(dst, dstStride, src, srcStride, rowBytes, 0, rows)
		return
	}
	var wg sync.WaitGroup
	for b := range bands {
		y0, y1 := b*rows/bands, (b+1)*rows/bands
		wg.Go(func() { copyBand(dst, dstStride, src, srcStride, rowBytes, y0, y1) })
	}
	wg.Wait()
}

func copyBand(dst []byte, dstStride int, src []byte, srcStride, rowBytes, y0, y1 int) {
	for y := y0; y < y1; y++ {
		copy(dst[y*dstStride:y*dstStride+rowBytes], src[y*srcStride:y*srcStride+rowBytes])
	}
}

// copyBytes copies min(len(dst), len(src)) bytes, as copy does, in bands on a few goroutines when it is large.
func copyBytes(dst, src []byte) {
	const row = 64 << 10
	n := min(len(dst), len(src))
	full := n / row
	copyRows(dst, row, src, row, row, full)
	copy(dst[full*row:n], src[full*row:n])
}
