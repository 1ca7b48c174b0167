package pdf

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"filigrane/codec"
)

// blankTextBlankText is a document of four 300-point pages: identical blank pages 1 and 3 (what
// `mutool clean -gggg` merges into one object) and pages of text 2 and 4.
func blankTextBlankText() []byte {
	page := "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 300 300] %s >>"
	text := "/Contents %d 0 R /Resources << /Font << /F1 9 0 R >> >>"
	return buildPDF([]string{
		"<< /Type /Catalog /Pages 2 0 R >>",
		"<< /Type /Pages /Kids [3 0 R 4 0 R 5 0 R 6 0 R] /Count 4 >>",
		fmt.Sprintf(page, ""),
		fmt.Sprintf(page, fmt.Sprintf(text, 7)),
		fmt.Sprintf(page, ""),
		fmt.Sprintf(page, fmt.Sprintf(text, 8)),
		flateObj("", []byte(textPage(2))),
		flateObj("", []byte(textPage(4))),
		"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
	}, "/Root 1 0 R")
}

// mergeIdenticalPages runs src through `mutool clean -gggg` and checks that the result names one page object
// for pages 1 and 3, as the optimiser does.
func mergeIdenticalPages(t *testing.T, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "gggg.pdf")
	if out, err := exec.CommandContext(t.Context(), "mutool", "clean", "-gggg", src, dst).CombinedOutput(); err != nil {
		t.Fatalf("mutool clean -gggg: %v: %s", err, out)
	}
	out, err := exec.CommandContext(t.Context(), "mutool", "show", dst, "pages").Output()
	if err != nil {
		t.Fatalf("mutool show pages: %v", err)
	}
	w := strings.Fields(string(out))
	// "page 1 = 3 0 R page 2 = 4 0 R page 3 = 3 0 R page 4 = 5 0 R": the object number is each one's fourth word.
	if len(w) != 24 || w[3] != w[15] || w[3] == w[9] || w[3] == w[21] || w[9] == w[21] {
		t.Fatalf("mutool clean -gggg did not merge pages 1 and 3 into one object: %q", out)
	}
	return dst
}

// TestMarkedDocumentOptimisedWithMergedPagesIsDetected: a marked document whose blank first and last pages
// `mutool clean -gggg` merged into one page object is still detected with its mark, by ProbeDetect and Detect
// through the structural layer (also when the quick reading is unavailable: an adapter without a renderer
// reads it from the parsed document), and by the rendered pages alone, with one unit per page, the merged page
// rendered once (by one renderer, pages 1-2 and 4, or by two). Before repeated pages were accepted, all of these
// answered pdf_page_tree.
func TestMarkedDocumentOptimisedWithMergedPagesIsDetected(t *testing.T) {
	a := testAdapter(t)
	ctx := context.Background()
	src := writeTemp(t, "in.pdf", blankTextBlankText())
	marked := filepath.Join(t.TempDir(), "marked.pdf")
	id := testID("merged pages")
	if _, err := a.Embed(ctx, src, marked, id, Options{}); err != nil {
		t.Fatal(err)
	}
	merged := mergeIdenticalPages(t, marked)
	want := id.String()
	check := func(how string, d codec.Detection) {
		t.Helper()
		if !d.Watermarked || d.WatermarkID == nil || *d.WatermarkID != want {
			t.Fatalf("%s: watermarked %v id %v, want %s", how, d.Watermarked, d.WatermarkID, want)
		}
		if len(d.Units) != 4 {
			t.Fatalf("%s: %d units, want one per page (4)", how, len(d.Units))
		}
		for i, u := range d.Units {
			if u.Index != i || !u.Watermarked || u.WatermarkID == nil || *u.WatermarkID != want {
				t.Errorf("%s: unit %d: %+v, want page %d marked with the document's id", how, i, u, i)
			}
		}
	}
	if info, err := a.ProbeDetect(ctx, merged); err != nil || info.Pages != 4 {
		t.Fatalf("probe for detection: %+v, %v", info, err)
	}
	d, err := a.Detect(ctx, merged)
	if err != nil {
		t.Fatal(err)
	}
	check("detect", d)
	d, err = noRendererAdapter(t, Limits{}).Detect(ctx, merged)
	if err != nil {
		t.Fatal(err)
	}
	check("detect from the parsed structure", d)
	for _, workers := range []int{1, 2} {
		one := &Adapter{Codec: a.Codec, Limits: Limits{RenderWorkers: workers}}
		d, st, err := one.DetectRenderedStats(ctx, merged)
		if err != nil {
			t.Fatal(err)
		}
		check(fmt.Sprintf("detect rendered by %d", workers), d)
		if st.Pages != 3 || st.Alone != 3 {
			t.Errorf("%d renderers: %d pages rendered, %d decoded alone; want the merged page once (3 and 3)", workers, st.Pages, st.Alone)
		}
	}
}

// TestOptimisedDocumentWithMergedPagesEmbedsOneOverlay: a document whose identical pages `mutool clean -gggg`
// merged is marked with one unit per page in the receipt, and the merged page object gets one overlay (its
// content is the prefix, its own content and one overlay suffix; a second overlay over the first would show),
// and the marked file still names that one object for both pages and detects on every page.
func TestOptimisedDocumentWithMergedPagesEmbedsOneOverlay(t *testing.T) {
	a := testAdapter(t)
	ctx := context.Background()
	merged := mergeIdenticalPages(t, writeTemp(t, "in.pdf", blankTextBlankText()))
	dst := filepath.Join(t.TempDir(), "out.pdf")
	id := testID("optimised")
	rep, err := a.Embed(ctx, merged, dst, id, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Pages != 4 || len(rep.Units) != 4 {
		t.Fatalf("receipt: %d pages, %d units, want 4 and 4", rep.Pages, len(rep.Units))
	}
	for i, u := range rep.Units {
		if u.Index != i || u.Width != 300 || u.Height != 300 || u.Tiles == 0 {
			t.Errorf("unit %d: %+v", i, u)
		}
	}
	doc, err := a.open(ctx, dst, false)
	if err != nil {
		t.Fatal(err)
	}
	defer doc.close()
	if _, _, err := doc.page(1); err != nil || len(doc.pageList) != 4 {
		t.Fatalf("marked file's pages: %v (%d)", err, len(doc.pageList))
	}
	first, last := doc.pageList[0], doc.pageList[2]
	if first.obj != last.obj {
		t.Fatalf("the marked file names objects %d and %d for pages 1 and 3, want the one merged object", first.obj, last.obj)
	}
	contents, err := doc.ctx.XRefTable.DereferenceArray(first.dict["Contents"])
	if err != nil {
		t.Fatal(err)
	}
	if len(contents) != 2 { // the blank page has no content of its own: the prefix and one overlay suffix
		t.Errorf("the merged page's content is %d streams %v, want the prefix and one overlay", len(contents), contents)
	}
	d, err := a.DetectRendered(ctx, dst)
	if err != nil {
		t.Fatal(err)
	}
	if !d.Watermarked || *d.WatermarkID != id.String() || len(d.Units) != 4 || !d.Units[0].Watermarked || !d.Units[2].Watermarked {
		t.Errorf("detection of the marked file: %+v", d)
	}
}

// TestRepeatedPageThatInheritsTwoWaysIsRefusedForMarking: one page object under two page tree nodes of different
// media boxes is displayed at two sizes, and one overlay cannot fit both: embedding refuses with pdf_page_tree
// and a reason saying how to write the pages apart, and leaves no file; detection renders each mention (the
// adapter without a renderer gets as far as the renderer).
func TestRepeatedPageThatInheritsTwoWaysIsRefusedForMarking(t *testing.T) {
	src := writeTemp(t, "in.pdf", buildPDF([]string{
		"<< /Type /Catalog /Pages 2 0 R >>",
		"<< /Type /Pages /Kids [3 0 R 4 0 R] /Count 2 >>",
		"<< /Type /Pages /Parent 2 0 R /Kids [5 0 R] /Count 1 /MediaBox [0 0 612 792] >>",
		"<< /Type /Pages /Parent 2 0 R /Kids [5 0 R] /Count 1 /MediaBox [0 0 595 842] >>",
		"<< /Type /Page /Parent 3 0 R >>",
	}, "/Root 1 0 R"))
	a := noRendererAdapter(t, Limits{})
	ctx := context.Background()
	dir := t.TempDir()
	_, err := a.Embed(ctx, src, filepath.Join(dir, "out.pdf"), testID("two ways"), Options{})
	if CodeOf(err) != CodePageTree || !strings.Contains(err.Error(), "page 2 shows the same page object as page 1") ||
		!strings.Contains(err.Error(), "qpdf --empty --pages") {
		t.Fatalf("embed: %v, want code %s saying which pages and what to do", err, CodePageTree)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("files left behind: %v", entries)
	}
	if _, err := a.Detect(ctx, src); CodeOf(err) != CodeTool {
		t.Fatalf("detect: %v, want code %s (the renderer reached)", err, CodeTool)
	}
}

// TestPageNamedNineThousandTimesIsCheap: a file that names one page 9,000 times in 54 kB (the audit's file,
// pdftest.RepeatedPage, kept a detection rendering for 136 s when every mention was rendered; this one's page is
// smaller, to keep the test cheap) is rendered once and reports 9,000 units, and marking it gives the page one
// overlay and the receipt 9,000 units.
func TestPageNamedNineThousandTimesIsCheap(t *testing.T) {
	a := testAdapter(t)
	ctx := context.Background()
	src := writeTemp(t, "bomb.pdf", buildPDF([]string{
		"<< /Type /Catalog /Pages 2 0 R >>",
		fmt.Sprintf("<< /Type /Pages /Kids [%s] /Count 9000 >>", strings.Repeat("3 0 R ", 9000)),
		"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 100 100] /Contents 4 0 R >>",
		flateObj("", []byte("0 g 10 10 50 50 re f")),
	}, "/Root 1 0 R"))
	d, st, err := a.DetectRenderedStats(ctx, src)
	if err != nil {
		t.Fatal(err)
	}
	if st.Pages != 1 || len(d.Units) != 9000 || d.Units[8999].Index != 8999 || d.Watermarked {
		t.Fatalf("detection rendered %d pages and reports %d units (watermarked %v); want 1 and 9000, unmarked", st.Pages, len(d.Units), d.Watermarked)
	}
	dst := filepath.Join(t.TempDir(), "out.pdf")
	rep, err := a.Embed(ctx, src, dst, testID("bomb"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Units) != 9000 || rep.Units[8999].Index != 8999 {
		t.Fatalf("receipt: %d units", len(rep.Units))
	}
	doc, err := a.open(ctx, dst, false)
	if err != nil {
		t.Fatal(err)
	}
	defer doc.close()
	pd, _, err := doc.page(9000)
	if err != nil {
		t.Fatal(err)
	}
	if contents, err := doc.ctx.XRefTable.DereferenceArray(pd["Contents"]); err != nil || len(contents) != 3 {
		t.Errorf("the page's content: %v (%v), want the prefix, its own and one overlay", contents, err)
	}
}
