package apibench

import (
	"math/bits"
	"time"
)

// Histogram records latencies in microseconds in log-linear buckets (HDR style: 128 sub-buckets per power of
// two, so any reported percentile is within 1% of the true sample), in a fixed-size array: memory does not grow
// with the number of requests, which matters for long runs at tens of thousands of requests per second.
type Histogram struct {
	counts [histBuckets]uint64
	n      uint64
	max    time.Duration
	sum    time.Duration
}

const (
	histSubBits = 7
	histSub     = 1 << histSubBits // sub-buckets per power of two
	// Values up to 2^40 µs (12 days) fit; anything larger lands in the last bucket.
	histBuckets = (40-histSubBits)*histSub + 2*histSub
)

func bucketOf(us uint64) int {
	if us < 2*histSub {
		return int(us)
	}
	e := bits.Len64(us) - (histSubBits + 1) // >= 1
	i := e*histSub + int(us>>e)
	if i >= histBuckets {
		return histBuckets - 1
	}
	return i
}

// bucketValue is the midpoint of bucket i in microseconds.
func bucketValue(i int) float64 {
	if i < 2*histSub {
		return float64(i)
	}
	e := i/histSub - 1
	m := uint64(i - e*histSub)
	return float64(m<<e) + float64(uint64(1)<<e)/2
}

// Record adds one latency.
func (h *Histogram) Record(d time.Duration) {
	if d < 0 {
		d = 0
	}
	h.counts[bucketOf(uint64(d/time.Microsecond))]++
	h.n++
	h.sum += d
	if d > h.max {
		h.max = d
	}
}

// Merge adds o's samples to h.
func (h *Histogram) Merge(o *Histogram) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	h.sum += o.sum
	if o.max > h.max {
		h.max = o.max
	}
}

// Count is the number of recorded samples.
func (h *Histogram) Count() uint64 { return h.n }

// Max is the largest recorded sample (exact).
func (h *Histogram) Max() time.Duration { return h.max }

// Mean is the arithmetic mean (exact).
func (h *Histogram) Mean() time.Duration {
	if h.n == 0 {
		return 0
	}
	return h.sum / time.Duration(h.n)
}

// Quantile returns the q-quantile (0 < q <= 1): the bucket holding the ceil(q*n)-th smallest sample, never more
// than the exact maximum.
func (h *Histogram) Quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := uint64(q*float64(h.n) + 0.999999)
	if rank < 1 {
		rank = 1
	}
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			v := time.Duration(bucketValue(i) * float64(time.Microsecond))
			if v > h.max {
				v = h.max
			}
			return v
		}
	}
	return h.max
}
