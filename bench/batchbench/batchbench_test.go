package batchbench

import (
	"context"
	"runtime"
	"testing"
)

// BenchmarkBatch100 runs a 100-item batch of 1-megapixel JPEGs end to end on one in-process node (create,
// 100 PUTs, start, wait, archive download):
//
//	go test ./bench/batchbench -run '^$' -bench Batch100 -benchtime=1x
func BenchmarkBatch100(b *testing.B) {
	file := Image(1000, 1000, 1)
	for range b.N {
		res, err := Run(context.Background(), b.TempDir(), 100, runtime.NumCPU(), file)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(res.EndToEnd.Seconds(), "end-to-end-s")
		b.ReportMetric(float64(res.Items)/res.Run.Seconds(), "items/s")
		b.Logf("%d items of %d bytes, %d workers: create %v, %d PUTs %v, start to completed %v, archive %d bytes in %v; end to end %v",
			res.Items, res.FileBytes, res.Workers, res.Create, res.Items, res.Upload, res.Run, res.ArchiveBytes, res.Download, res.EndToEnd)
	}
}

// TestSmallBatch keeps the harness working in the ordinary test run (3 small images).
func TestSmallBatch(t *testing.T) {
	res, err := Run(context.Background(), t.TempDir(), 3, 1, Image(320, 320, 2))
	if err != nil {
		t.Fatal(err)
	}
	if res.Succeeded != 3 || res.ArchiveBytes <= 0 {
		t.Fatalf("%+v", res)
	}
}
