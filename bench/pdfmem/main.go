// Command pdfmem measures one PDF operation's peak memory next to codec/pdf's estimate of it
// (Adapter.EstimateMemory): run once per file and operation, it prints the estimate's inputs, the estimate and
// the process's peak resident memory (VmHWM), the figures of docs/operations.md's "Decode budgets". It also
// writes the generated files measured there (-op gen). It shares nothing with what it measures beyond the
// adapter's public API, and uses the development key.
//
//	go run ./bench/pdfmem -op gen -n 199990 tiny.pdf
//	go run ./bench/pdfmem -op embed tiny.pdf
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"filigrane/codec"
	"filigrane/codec/pdf"
	"filigrane/codec/pdf/pdftest"
)

func main() {
	op := flag.String("op", "detect", "estimate, probe, embed, detect, render (detect skipping the structural mark) or gen")
	n := flag.Int("n", 0, "gen: tiny objects")
	pages := flag.Int("pages", 0, "gen: that many blank pages of -side points square instead of tiny objects")
	side := flag.Int("side", 612, "gen: page side in points")
	flag.Parse()
	src := flag.Arg(0)
	if *op == "gen" {
		data := tinyObjects(*n)
		if *pages > 0 {
			data = blankPages(*pages, *side)
		}
		if err := os.WriteFile(src, data, 0o644); err != nil {
			fail(err)
		}
		return
	}
	c, err := codec.New([]byte(codec.DevelopmentKey))
	if err != nil {
		fail(err)
	}
	a := &pdf.Adapter{Codec: c}
	est, err := a.EstimateMemory(src, *op == "detect" || *op == "render")
	if err != nil {
		fmt.Println("estimate:", err)
		return
	}
	ctx := context.Background()
	switch *op {
	case "estimate":
	case "probe":
		_, err = a.Probe(ctx, src)
	case "embed":
		dst := filepath.Join(os.TempDir(), "pdfmem-out.pdf")
		_, err = a.Embed(ctx, src, dst, codec.ID{}, pdf.Options{})
		os.Remove(dst)
	case "detect":
		_, err = a.Detect(ctx, src)
	case "render":
		_, err = a.DetectRendered(ctx, src)
	}
	fmt.Printf("%s\t%s\tsize=%d\tobjects=%d\tinflated=%d\test=%dMB\thwm=%s\terr=%v\n", *op, filepath.Base(src), est.Size, est.Objects,
		est.Inflated, est.Bytes>>20, hwm(), err)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "pdfmem:", err)
	os.Exit(1)
}

// hwm is the process's peak resident memory so far.
func hwm() string {
	b, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmHWM:") {
			return strings.Join(strings.Fields(l)[1:], "")
		}
	}
	return "?"
}

// tinyObjects is a one-page document followed by n objects "<< /A 1 >>", each at its own offset.
func tinyObjects(n int) []byte {
	objs := []string{"<< /Type /Catalog /Pages 2 0 R >>", "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
		"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] >>"}
	for range n {
		objs = append(objs, "<< /A 1 >>")
	}
	return pdftest.Build(objs, "/Root 1 0 R")
}

// blankPages is a document of n blank square pages of side points.
func blankPages(n, side int) []byte {
	kids := make([]string, n)
	for i := range kids {
		kids[i] = fmt.Sprintf("%d 0 R", i+3)
	}
	objs := []string{"<< /Type /Catalog /Pages 2 0 R >>", fmt.Sprintf("<< /Type /Pages /Kids [%s] /Count %d >>", strings.Join(kids, " "), n)}
	for range n {
		objs = append(objs, fmt.Sprintf("<< /Type /Page /Parent 2 0 R /MediaBox [0 0 %d %d] >>", side, side))
	}
	return pdftest.Build(objs, "/Root 1 0 R")
}
