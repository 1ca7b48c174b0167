package pdf

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"filigrane/codec"
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

// BenchmarkDetectRendered300Pages measures detection by rendering of a 300-page document (300×350-point pages of
// text, 625×729 pixels at 150 dpi), unmarked and marked, under the decode budget ("budget": at most aloneBudget
// pages decoded alone) and, as the same-run baseline, with every page decoded alone ("every-page", the rule
// before the budget). cpu-s/op counts this process and its renderer children (getrusage), which the load of a
// shared machine inflates less than the wall time.
//
//	go test -run '^$' -bench DetectRendered300Pages -benchtime 1x ./codec/pdf
func BenchmarkDetectRendered300Pages(b *testing.B) {
	const pages = 300
	a := testAdapter(b)
	a.Limits.RenderWorkers = 1
	ctx := context.Background()
	src := writeTemp(b, "in.pdf", makeDoc(pdftest.Doc{Pages: pages, MediaBox: "[0 400 300 750]"}))
	marked := filepath.Join(b.TempDir(), "marked.pdf")
	id := testID("bench300")
	if _, err := a.Embed(ctx, src, marked, id, Options{}); err != nil {
		b.Fatal(err)
	}
	for _, file := range []struct {
		name, path string
		marked     bool
	}{{"unmarked", src, false}, {"marked", marked, true}} {
		for _, rule := range []struct {
			name   string
			budget int
		}{{"budget", aloneBudget}, {"every-page", pages}} {
			b.Run(file.name+"/"+rule.name, func(b *testing.B) {
				cpu0 := cpuSeconds()
				var st DetectStats
				for b.Loop() {
					doc, err := a.open(ctx, file.path, false)
					if err != nil {
						b.Fatal(err)
					}
					var d codec.Detection
					d, st, err = a.detectRenderedStats(ctx, doc, rule.budget, nil)
					doc.close()
					if err != nil || d.Watermarked != file.marked {
						b.Fatalf("watermarked %v, want %v (%v)", d.Watermarked, file.marked, err)
					}
					if file.marked {
						for _, u := range d.Units {
							if !u.Watermarked || *u.WatermarkID != id.String() {
								b.Fatalf("unit %+v", u)
							}
						}
					}
				}
				b.ReportMetric((cpuSeconds()-cpu0)/float64(b.N), "cpu-s/op")
				b.ReportMetric(float64(st.Alone), "alone")
				b.ReportMetric(float64(st.Combined), "combined")
			})
		}
	}
}

// cpuSeconds is the user and system time of this process and of its waited-for children.
func cpuSeconds() float64 {
	var self, kids syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	syscall.Getrusage(syscall.RUSAGE_CHILDREN, &kids)
	sec := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return sec(self.Utime) + sec(self.Stime) + sec(kids.Utime) + sec(kids.Stime)
}

// BenchmarkDetectRenderedFile detects the mark of the PDF named by FILIGRANE_BENCH_PDF by rendering alone (as
// DetectRendered, the structural layer ignored), with the default limits: the figure for a long real document,
// which a test cannot afford. It reports the CPU seconds (process and renderer children), the renderer time the
// pages took to arrive (wait-s, what the budget counts, wall time: it grows with the machine's load), the
// document's fixed budget (fixed-s: RenderTime plus RenderTimePerMB a megabyte, the whole budget before
// RenderTimePerMP) and the budget with the pixels' allowance (allowed-s). Skipped without the variable.
//
//	FILIGRANE_BENCH_PDF=marked.pdf go test -run '^$' -bench DetectRenderedFile -benchtime 1x ./codec/pdf
func BenchmarkDetectRenderedFile(b *testing.B) {
	path := os.Getenv("FILIGRANE_BENCH_PDF")
	if path == "" {
		b.Skip("FILIGRANE_BENCH_PDF names no file")
	}
	a := testAdapter(b)
	ctx := context.Background()
	cpu0 := cpuSeconds()
	var st DetectStats
	var fixed float64
	for b.Loop() {
		doc, err := a.open(ctx, path, false)
		if err != nil {
			b.Fatal(err)
		}
		fixed = doc.lim.renderTimeBudget(doc.inBytes).Seconds()
		var d codec.Detection
		d, st, err = a.detectRenderedStats(ctx, doc, aloneBudget, nil)
		doc.close()
		if err != nil {
			b.Fatalf("after %d pages (renderer %.1f s of %.1f s): %v", st.Pages, st.RenderWait.Seconds(), st.RenderAllowed.Seconds(), err)
		}
		b.Logf("watermarked %v, id %v, %d pages", d.Watermarked, d.WatermarkID != nil, st.Pages)
	}
	b.ReportMetric((cpuSeconds()-cpu0)/float64(b.N), "cpu-s/op")
	b.ReportMetric(float64(st.Pages), "pages")
	b.ReportMetric(st.RenderWait.Seconds(), "wait-s")
	b.ReportMetric(fixed, "fixed-s")
	b.ReportMetric(st.RenderAllowed.Seconds(), "allowed-s")
}
