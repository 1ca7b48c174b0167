package pdf

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"filigrane/codec"
	"filigrane/codec/pdf/pdftest"
)

// A long unmarked document: however many pages, at most aloneBudget of them are decoded on their own, so the
// document's false-positive bound holds (docs/codec.md, section 5). DetectRenderedStats applies aloneBudget:
// checked on aloneBudget+100 pages of 24 points (50×50 pixels at 150 dpi), each rendered and counted, below the
// detector's smallest side so that the count costs no blind decodes. The rule itself, with the blind decodes, the
// analysis of the other pages and the combined decode, runs on pages that carry a mark's worth of pixels in
// TestBudgetRuleOnUnmarkedPages.
func TestLongUnmarkedPDFBoundsBlindDecodes(t *testing.T) {
	a := testAdapter(t)
	const pages = aloneBudget + 100
	src := writeTemp(t, "long.pdf", makeDoc(pdftest.Doc{Pages: pages, MediaBox: "[0 0 24 24]"}))
	d, st, err := a.DetectRenderedStats(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	checkUnmarkedBudget(t, d, st, pages, aloneBudget)
}

// The budget rule on an unmarked document of pages of 1 inch (150×150 pixels at 150 dpi, each rendered, then
// decoded blind or analysed at the overlay geometry), under a budget of 20 pages for 60: the rule is the one
// DetectRenderedStats applies with aloneBudget, at a tenth of the blind decodes (200 blind decodes and 100
// analyses of 150×150 pages took 14 CPU-seconds, the most of any test in the package).
func TestBudgetRuleOnUnmarkedPages(t *testing.T) {
	a := testAdapter(t)
	ctx := context.Background()
	const pages, budget = 60, 20
	src := writeTemp(t, "long.pdf", makeDoc(pdftest.Doc{Pages: pages, MediaBox: "[0 0 72 72]"}))
	doc, err := a.open(ctx, src, false)
	if err != nil {
		t.Fatal(err)
	}
	defer doc.close()
	d, st, err := a.detectRenderedStats(ctx, doc, budget, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkUnmarkedBudget(t, d, st, pages, budget)
}

// checkUnmarkedBudget: an unmarked document of pages pages detected under budget reports every page unmarked,
// decoded budget pages alone, spread to both ends, analysed the others and made at most one combined decode.
func checkUnmarkedBudget(t *testing.T, d codec.Detection, st DetectStats, pages, budget int) {
	t.Helper()
	if d.Watermarked || d.WatermarkID != nil {
		t.Fatalf("unmarked document reported watermarked: %+v", d)
	}
	if len(d.Units) != pages {
		t.Fatalf("%d units, want %d", len(d.Units), pages)
	}
	for i, u := range d.Units {
		if u.Index != i || u.Watermarked || u.WatermarkID != nil {
			t.Fatalf("unit %d: %+v", i, u)
		}
	}
	if st.Pages != pages || st.Alone != budget || st.Analysed != pages-budget || st.Combined > 1 {
		t.Fatalf("stats %+v: want %d pages, %d decoded alone, the rest analysed, at most one combined decode",
			st, pages, budget)
	}
	// The budget is spread over the document: the first and the last run (of at most ⌈pages/budget⌉ pages) each
	// have a page decoded alone.
	last := false
	for i := pages - (pages+budget-1)/budget; i < pages; i++ {
		last = last || alone(i, pages, budget)
	}
	if !alone(0, pages, budget) || !last {
		t.Errorf("pages decoded alone are not spread to both ends")
	}
}

// A long marked document: the pages beyond the budget are not decoded alone, but still report the id (their
// soft output matches the document's codeword), and the document's id is exact. Under a budget of 20 pages for
// 60 (the rule DetectRenderedStats applies with aloneBudget, which TestLongUnmarkedPDFBoundsBlindDecodes checks
// it does): two thirds of the pages are analysed only, as 40 of 240 were under aloneBudget.
func TestLongMarkedPDFReportsEveryPage(t *testing.T) {
	a := testAdapter(t)
	ctx := context.Background()
	const pages, budget = 60, 20
	src := writeTemp(t, "long.pdf", makeDoc(pdftest.Doc{Pages: pages, MediaBox: "[0 0 144 144]"}))
	marked := filepath.Join(t.TempDir(), "marked.pdf")
	id := testID("long-marked")
	if _, err := a.Embed(ctx, src, marked, id, Options{}); err != nil {
		t.Fatal(err)
	}
	doc, err := a.open(ctx, marked, false)
	if err != nil {
		t.Fatal(err)
	}
	defer doc.close()
	d, st, err := a.detectRenderedStats(ctx, doc, budget, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := id.String()
	if !d.Watermarked || d.WatermarkID == nil || *d.WatermarkID != want {
		t.Fatalf("document: watermarked %v id %v, want %s", d.Watermarked, d.WatermarkID, want)
	}
	if st.Alone != budget || st.Analysed != pages-budget || st.Matched != pages-budget {
		t.Fatalf("stats %+v: want %d decoded alone and %d analysed and matched", st, budget, pages-budget)
	}
	for i, u := range d.Units {
		if u.Index != i || !u.Watermarked || u.WatermarkID == nil || *u.WatermarkID != want || !(u.Confidence > 0.3 && u.Confidence <= 1) {
			t.Fatalf("unit %d (alone %v): %+v", i, alone(i, pages, budget), u)
		}
	}
}

// Pages too damaged to decode on their own (the weakest strength under dense, varied content: measured, 2 of these
// 8 pages decode alone, 4 more synchronise, pilots 5.7-12) report the document's id through the codeword test;
// before, only the pages that decoded alone did. No page reports another id.
func TestDamagedPagesReportTheDocumentID(t *testing.T) {
	a := testAdapter(t)
	ctx := context.Background()
	const pages = 8
	src := writeTemp(t, "dense.pdf", variedDoc(pages, 300, 350))
	marked := filepath.Join(t.TempDir(), "marked.pdf")
	id := testID("weak-pages")
	if _, err := a.Embed(ctx, src, marked, id, Options{Strength: MinStrength}); err != nil {
		t.Fatal(err)
	}
	d, st, err := a.DetectRenderedStats(ctx, marked)
	if err != nil {
		t.Fatal(err)
	}
	want := id.String()
	if !d.Watermarked || d.WatermarkID == nil || *d.WatermarkID != want {
		t.Fatalf("document: watermarked %v id %v, want %s (stats %+v)", d.Watermarked, d.WatermarkID, want, st)
	}
	reported := 0
	for i, u := range d.Units {
		switch {
		case u.Index != i:
			t.Errorf("unit %d has index %d", i, u.Index)
		case u.Watermarked && (u.WatermarkID == nil || *u.WatermarkID != want):
			t.Errorf("unit %d reports another id: %+v", i, u)
		case u.Watermarked:
			reported++
		}
	}
	if own := reported - st.Matched; reported < 6 || st.Matched < 3 || own < 1 {
		t.Fatalf("%d of %d pages report the id (%d by their own decode, %d by the codeword test), want at least 6 and 3 (stats %+v)",
			reported, pages, own, st.Matched, st)
	}
}

// variedDoc is a document of pages w×h-point pages whose content differs from page to page (lines of
// pseudo-random words at pseudo-random positions and sizes, a gray box), so that the host's interference with
// the mark is independent between pages, as in real documents.
func variedDoc(pages int, w, h float64) []byte {
	rng := rand.New(rand.NewPCG(uint64(pages), 7))
	words := strings.Fields("the quick brown fox jumps over a lazy dog while seven wizards quietly box jugglers " +
		"and sphinx of black quartz judges my vow pack my box with five dozen liquor jugs")
	kids := make([]string, pages)
	objs := []string{"<< /Type /Catalog /Pages 2 0 R >>", "", "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"}
	for p := 0; p < pages; p++ {
		var c strings.Builder
		for range 9 {
			fmt.Fprintf(&c, "0.%d g %.0f %.0f %.0f %.0f re f\n", 3+rng.IntN(7), rng.Float64()*w*0.7, rng.Float64()*h*0.7,
				20+rng.Float64()*w/3, 20+rng.Float64()*h/4)
		}
		c.WriteString("0 g\n")
		for y := h - 10 - rng.Float64()*10; y > 5; y -= 5.5 + rng.Float64()*4.5 {
			var line []string
			for range 4 + rng.IntN(8) {
				line = append(line, words[rng.IntN(len(words))])
			}
			fmt.Fprintf(&c, "BT /F1 %.1f Tf %.1f %.1f Td (%s) Tj ET\n", 9+rng.Float64()*9, 2+rng.Float64()*20, y,
				strings.Join(line, " "))
		}
		nr := len(objs) + 1
		kids[p] = fmt.Sprintf("%d 0 R", nr)
		objs = append(objs, fmt.Sprintf("<< /Type /Page /Parent 2 0 R /MediaBox [0 0 %.0f %.0f] /Resources << /Font << /F1 3 0 R >> >> /Contents %d 0 R >>", w, h, nr+1),
			flateObj("", []byte(c.String())))
	}
	objs[1] = fmt.Sprintf("<< /Type /Pages /Kids [%s] /Count %d >>", strings.Join(kids, " "), pages)
	return buildPDF(objs, "/Root 1 0 R")
}
