package pdf

import (
	"context"
	"path/filepath"
	"testing"

	"filigrane/codec/pdf/pdftest"
)

// A long unmarked document: however many pages, at most aloneBudget of them are decoded on their own, so the
// document's false-positive bound holds (docs/codec.md, section 5). The pages are small (1 inch, 150×150 pixels
// at 150 dpi) to keep the test cheap; each is still rendered and analysed.
func TestLongUnmarkedPDFBoundsBlindDecodes(t *testing.T) {
	a := testAdapter(t)
	const pages = aloneBudget + 100
	src := writeTemp(t, "long.pdf", makeDoc(pdftest.Doc{Pages: pages, MediaBox: "[0 0 72 72]"}))
	d, st, err := a.DetectRenderedStats(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
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
	if st.Pages != pages || st.Alone != aloneBudget || st.Analysed != pages-aloneBudget || st.Combined > 1 {
		t.Fatalf("stats %+v: want %d pages, %d decoded alone, the rest analysed, at most one combined decode",
			st, pages, aloneBudget)
	}
	// The budget is spread over the document: the first and the last run each have a page decoded alone.
	if !alone(0, pages, aloneBudget) || !alone(pages-3, pages, aloneBudget) && !alone(pages-2, pages, aloneBudget) && !alone(pages-1, pages, aloneBudget) {
		t.Errorf("pages decoded alone are not spread to both ends")
	}
}

// A long marked document: the pages beyond the budget are not decoded alone, but still report the id (their
// soft output matches the document's codeword), and the document's id is exact.
func TestLongMarkedPDFReportsEveryPage(t *testing.T) {
	a := testAdapter(t)
	ctx := context.Background()
	const pages = aloneBudget + 40
	src := writeTemp(t, "long.pdf", makeDoc(pdftest.Doc{Pages: pages, MediaBox: "[0 0 144 144]"}))
	marked := filepath.Join(t.TempDir(), "marked.pdf")
	id := testID("long-marked")
	if _, err := a.Embed(ctx, src, marked, id, Options{}); err != nil {
		t.Fatal(err)
	}
	d, st, err := a.DetectRenderedStats(ctx, marked)
	if err != nil {
		t.Fatal(err)
	}
	want := id.String()
	if !d.Watermarked || d.WatermarkID == nil || *d.WatermarkID != want {
		t.Fatalf("document: watermarked %v id %v, want %s", d.Watermarked, d.WatermarkID, want)
	}
	if st.Alone != aloneBudget || st.Analysed != pages-aloneBudget || st.Matched != pages-aloneBudget {
		t.Fatalf("stats %+v: want %d decoded alone and %d analysed and matched", st, aloneBudget, pages-aloneBudget)
	}
	for i, u := range d.Units {
		if u.Index != i || !u.Watermarked || u.WatermarkID == nil || *u.WatermarkID != want || !(u.Confidence > 0.3 && u.Confidence <= 1) {
			t.Fatalf("unit %d (alone %v): %+v", i, alone(i, pages, aloneBudget), u)
		}
	}
}
