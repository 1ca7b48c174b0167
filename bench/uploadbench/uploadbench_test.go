package uploadbench

import (
	"context"
	"testing"
)

// BenchmarkDetectUpload150MB streams a 150 MB detect upload to an in-process node and reports the peak
// resident set and Go heap during the PUT. Run with -benchtime=1x (each iteration writes 150 MB to disk):
//
//	go test ./bench/uploadbench -run '^$' -bench DetectUpload150MB -benchtime=1x
func BenchmarkDetectUpload150MB(b *testing.B) {
	const size = 150_000_000
	for range b.N {
		res, err := Run(context.Background(), b.TempDir(), size)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(MiB(res.PeakRSS), "peak-rss-MiB")
		b.ReportMetric(MiB(res.RSSBefore), "rss-before-MiB")
		b.ReportMetric(MiB(int64(res.PeakHeap)), "peak-heap-MiB")
		b.ReportMetric(float64(size)/res.Elapsed.Seconds()/1e6, "MB/s")
		b.Logf("150 MB PUT in %s: RSS before %.1f MiB, peak RSS %.1f MiB (peak reset: %v), peak Go heap %.1f MiB",
			res.Elapsed, MiB(res.RSSBefore), MiB(res.PeakRSS), res.PeakReset, MiB(int64(res.PeakHeap)))
		if res.PeakRSS-res.RSSBefore > size/2 {
			b.Fatalf("the PUT raised the resident set by %.1f MiB: the file is being held in memory", MiB(res.PeakRSS-res.RSSBefore))
		}
	}
}

// TestSmallUpload keeps the harness working in the ordinary test run (1 MB).
func TestSmallUpload(t *testing.T) {
	res, err := Run(context.Background(), t.TempDir(), 1_000_000)
	if err != nil {
		t.Fatal(err)
	}
	if res.PeakRSS <= 0 || res.Elapsed <= 0 {
		t.Fatalf("%+v", res)
	}
}
