package pdf

import (
	"context"
	"path/filepath"
	"testing"

	"filigrane/codec/pdf/pdftest"
)

// The benchmarks run on a generated 20-page text document; bench/pdfbench measures real documents.
//
//	go test -run '^$' -bench . ./codec/pdf

func benchDoc(b *testing.B) (*Adapter, string, string) {
	a := testAdapter(b)
	a.Limits.RenderWorkers = 1
	src := writeTemp(b, "in.pdf", makeDoc(pdftest.Doc{Pages: 20}))
	marked := filepath.Join(b.TempDir(), "marked.pdf")
	if _, err := a.Embed(context.Background(), src, marked, testID("bench"), Options{}); err != nil {
		b.Fatal(err)
	}
	return a, src, marked
}

func BenchmarkEmbed20Pages(b *testing.B) {
	a, src, _ := benchDoc(b)
	dst := filepath.Join(b.TempDir(), "out.pdf")
	for b.Loop() {
		if _, err := a.Embed(context.Background(), src, dst, testID("bench"), Options{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(20*float64(b.N)/b.Elapsed().Seconds(), "pages/s")
}

func BenchmarkDetectIntact20Pages(b *testing.B) {
	a, _, marked := benchDoc(b)
	for b.Loop() {
		if d, err := a.Detect(context.Background(), marked); err != nil || !d.Watermarked {
			b.Fatal(err)
		}
	}
}

func BenchmarkDetectRendered20Pages(b *testing.B) {
	a, _, marked := benchDoc(b)
	for b.Loop() {
		if d, err := a.DetectRendered(context.Background(), marked); err != nil || !d.Watermarked {
			b.Fatal(err)
		}
	}
	b.ReportMetric(20*float64(b.N)/b.Elapsed().Seconds(), "pages/s")
}
