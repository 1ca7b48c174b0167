package pdfbench

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"testing"

	"filigrane/codec"
	"filigrane/codec/pdf"
)

// TestRun is the benchmark run, not a unit test: it needs the network once (apt-get download), qpdf, mutool,
// Ghostscript and poppler-utils, and takes minutes. Run it with
//
//	FILIGRANE_PDF_BENCH=1 go test -run TestRun -timeout 60m -v ./bench/pdfbench
//
// The overlay follows the default rule (page images within a byte budget, else tiles); FILIGRANE_PDF_OVERLAY=tiles
// or =page-image forces one way (pdf.Options.Tiles, pdf.Options.PageImage).
// It writes bench/results/pdf/report.md and bench/results/pdf/visual.png.
// corpus fetches (or reuses the cached copy of) the benchmark's PDFs, plus pdfcpu's own test files when the
// module is in the module cache, and loads them.
func corpus(t *testing.T) []Doc {
	t.Helper()
	home, _ := os.UserHomeDir()
	cache := filepath.Join(home, ".cache", "filigrane", "pdfcorpus")
	if err := Fetch(t.Context(), cache, os.Stderr); err != nil {
		t.Fatal(err)
	}
	var extra []string
	if out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/pdfcpu/pdfcpu").Output(); err == nil {
		extra = append(extra, filepath.Join(string(bytes.TrimSpace(out)), "pkg", "testdata"))
	}
	docs, err := Load(cache, extra...)
	if err != nil {
		t.Fatal(err)
	}
	return docs
}

func TestRun(t *testing.T) {
	if os.Getenv("FILIGRANE_PDF_BENCH") == "" {
		t.Skip("set FILIGRANE_PDF_BENCH=1 to run the PDF benchmark")
	}
	for _, tool := range []string{"qpdf", "mutool", "gs", "pdftocairo", "apt-get", "dpkg"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is needed: %v", tool, err)
		}
	}
	ctx := context.Background()
	docs := corpus(t)
	if only := os.Getenv("FILIGRANE_PDF_BENCH_ONLY"); only != "" {
		var keep []Doc
		for _, d := range docs {
			if d.Name == only {
				keep = append(keep, d)
			}
		}
		docs = keep
	}
	t.Logf("%d documents", len(docs))
	outDir, _ := filepath.Abs(filepath.Join("..", "results", "pdf"))
	work := t.TempDir()
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		t.Fatal(err)
	}
	strength, _ := strconv.ParseFloat(os.Getenv("FILIGRANE_PDF_STRENGTH"), 64)
	cfg := Config{Key: []byte(codec.DevelopmentKey), Strength: strength, WorkDir: work, Log: os.Stderr,
		Overlay: os.Getenv("FILIGRANE_PDF_OVERLAY")}
	res, err := Run(ctx, cfg, docs)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range docs {
		if d.Name == "octave.pdf" && os.Getenv("FILIGRANE_PDF_BENCH_NOSPEED") == "" {
			if err := Speed(ctx, cfg.Key, d, work, 20, res); err != nil {
				t.Errorf("speed: %v", err)
			}
		}
		if d.Name == "libtasn1.pdf" {
			dir := filepath.Join(work, "libtasn1")
			if err := Visual(ctx, filepath.Join(dir, "orig.pdf"), filepath.Join(dir, "marked.pdf"), 2, filepath.Join(outDir, "visual.png")); err != nil {
				t.Errorf("visual: %v", err)
			}
		}
	}
	var buf bytes.Buffer
	res.Markdown(&buf)
	os.Stdout.Write(buf.Bytes())
	if err := os.WriteFile(filepath.Join(outDir, "report.md"), buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestOverlaySizes embeds every corpus document whole three ways (tiles, pdf.Options.PageImage, and the default
// rule) and logs the output size of each against its input, the page images' own bytes and the number of
// distinct page shapes (the page image costs about 7 KB per page shape; bench/README.md). It needs the
// corpus that TestRun downloads:
//
//	FILIGRANE_PDF_BENCH=1 go test -run TestOverlaySizes -v ./bench/pdfbench
func TestOverlaySizes(t *testing.T) {
	if os.Getenv("FILIGRANE_PDF_BENCH") == "" {
		t.Skip("set FILIGRANE_PDF_BENCH=1 to run the PDF benchmark")
	}
	docs := corpus(t)
	c, err := codec.New([]byte(codec.DevelopmentKey))
	if err != nil {
		t.Fatal(err)
	}
	a := &pdf.Adapter{Codec: c}
	dst := filepath.Join(t.TempDir(), "marked.pdf")
	modes := []struct {
		name string
		opt  pdf.Options
	}{{"tiles", pdf.Options{Tiles: true}}, {"page image", pdf.Options{PageImage: true}}, {"default", pdf.Options{}}}
	ratios := make([][]float64, len(modes))
	for _, d := range docs {
		line := fmt.Sprintf("%-24s", d.Name)
		for i, m := range modes {
			rep, err := a.Embed(t.Context(), d.Path, dst, codec.ID{1}, m.opt)
			if err != nil {
				t.Fatalf("%s: %v", d.Name, err)
			}
			r := float64(rep.OutBytes) / float64(rep.InBytes)
			ratios[i] = append(ratios[i], r)
			if i == 0 {
				shapes := map[[2]int]bool{}
				for _, u := range rep.Units {
					shapes[[2]int{int(math.Round(u.Width)), int(math.Round(u.Height))}] = true
				}
				line += fmt.Sprintf(" %4d pages %2d shapes %8d |", rep.Pages, len(shapes), rep.InBytes)
			}
			images := 0
			for _, u := range rep.Units {
				if u.PageImage {
					images++
				}
			}
			line += fmt.Sprintf(" %s → %8d (%.2f×, images %d B on %d pages) |", m.name, rep.OutBytes, r, rep.PageImageBytes, images)
		}
		t.Log(line)
	}
	for i, m := range modes {
		sort.Float64s(ratios[i])
		t.Logf("%s: median %.2f×, max %.2f×", m.name, ratios[i][len(ratios[i])/2], ratios[i][len(ratios[i])-1])
	}
}
