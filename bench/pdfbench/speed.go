package pdfbench

import (
	"context"
	"crypto/sha256"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"filigrane/codec"
	"filigrane/codec/pdf"
)

// Speed measures embedding of a whole document (pages per second), detection of the intact marked result
// (structural layer) and detection by rendering with one renderer process (pages per second on one core) on
// the first renderPages pages.
func Speed(ctx context.Context, key []byte, doc Doc, dir string, renderPages int, res *Result) error {
	c, err := codec.New(key)
	if err != nil {
		return err
	}
	a := &pdf.Adapter{Codec: c, Limits: pdf.Limits{RenderWorkers: 1}}
	id := codec.ID(sha256.Sum256([]byte("pdfbench/speed")))
	marked := filepath.Join(dir, "speed-marked.pdf")
	t0, c0 := time.Now(), cpuTime()
	rep, err := a.Embed(ctx, doc.Path, marked, id, pdf.Options{})
	if err != nil {
		return err
	}
	res.EmbedPagesPerSec = float64(rep.Pages) / time.Since(t0).Seconds()
	res.EmbedPagesPerCPUSec = float64(rep.Pages) / (cpuTime() - c0).Seconds()
	res.EmbedDoc, res.EmbedPages = doc.Name, rep.Pages
	// Detection of the intact file, best of 3 (the first run warms the page cache).
	best := time.Duration(1 << 62)
	for i := 0; i < 3; i++ {
		t0 = time.Now()
		if _, err := a.Detect(ctx, marked); err != nil {
			return err
		}
		best = min(best, time.Since(t0))
	}
	res.DetectIntactMs = float64(best.Microseconds()) / 1000
	sub := filepath.Join(dir, "speed-sub.pdf")
	if err := run(ctx, "qpdf", "--empty", "--pages", marked, "1-"+itoa(min(renderPages, rep.Pages)), "--", sub); err != nil {
		return err
	}
	defer os.Remove(sub)
	t0, c0 = time.Now(), cpuTime()
	det, err := a.DetectRendered(ctx, sub)
	if err != nil {
		return err
	}
	res.DetectRenderPages = len(det.Units)
	res.DetectRenderPagesPerS = float64(len(det.Units)) / time.Since(t0).Seconds()
	res.DetectRenderPagesPerCPUSec = float64(len(det.Units)) / (cpuTime() - c0).Seconds()
	return nil
}

// cpuTime is the CPU time (user and system) used so far by this process and its waited-for children (the
// renderer processes): on a shared machine it measures the work, where wall-clock time measures the load.
func cpuTime() time.Duration {
	var self, kids syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	syscall.Getrusage(syscall.RUSAGE_CHILDREN, &kids)
	tv := func(t syscall.Timeval) time.Duration { return time.Duration(t.Nano()) }
	return tv(self.Utime) + tv(self.Stime) + tv(kids.Utime) + tv(kids.Stime)
}

func itoa(n int) string { return joinInts([]int{n}) }
