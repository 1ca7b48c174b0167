package pdf

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"filigrane/codec"
	"filigrane/codec/pdf/pdftest"
)

// noRendererAdapter is an adapter whose mutool does not exist: a refusal it answers with a document code (not
// CodeTool) came before any page was rendered or the file was repaired.
func noRendererAdapter(t testing.TB, lim Limits) *Adapter {
	t.Helper()
	c, err := codec.New([]byte(codec.DevelopmentKey))
	if err != nil {
		t.Fatal(err)
	}
	return &Adapter{Codec: c, Mutool: "/nonexistent/mutool", Limits: lim}
}

// TestPageTreeNodeNamedTwiceIsRefusedBeforeAnyPage: a page tree that names an intermediate node more than once,
// or inside itself, is refused by Probe, Embed and Detect with CodePageTree before any page is processed (the
// adapter has no renderer: a detection that reached rendering would answer CodeTool), and an embed leaves no
// file. (A page named more than once is accepted and processed once: repeated_test.go.)
func TestPageTreeNodeNamedTwiceIsRefusedBeforeAnyPage(t *testing.T) {
	page := "<< /Type /Page /Parent %d 0 R /MediaBox [0 0 612 792] >>"
	cases := map[string][]byte{
		// A node shared by its parent's kids doubles the pages below it at each level: 2^k pages from k nodes.
		"a node named twice": pdftest.SharedNode(),
		"a node inside itself": buildPDF([]string{
			"<< /Type /Catalog /Pages 2 0 R >>",
			"<< /Type /Pages /Kids [3 0 R] /Count 2 >>",
			"<< /Type /Pages /Parent 2 0 R /Kids [4 0 R 2 0 R] /Count 2 >>",
			fmt.Sprintf(page, 3),
		}, "/Root 1 0 R"),
	}
	a := noRendererAdapter(t, Limits{})
	for name, data := range cases {
		t.Run(name, func(t *testing.T) {
			_, _, embedErr := refusedEverywhere(t, a, name, data, CodePageTree)
			if !strings.Contains(embedErr.Error(), "more than once") {
				t.Errorf("embed: the reason does not say what is wrong: %v", embedErr)
			}
		})
	}
}

// refusedEverywhere writes data to a file of its own directory and checks that Probe, Embed and Detect all
// refuse it with code and that the embed leaves no file; it returns the file and the probe's and the embed's
// errors, for the caller's checks of their reasons.
func refusedEverywhere(t *testing.T, a *Adapter, name string, data []byte, code Code) (src string, probeErr, embedErr error) {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	src = filepath.Join(dir, "in.pdf")
	if err := os.WriteFile(src, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, probeErr = a.Probe(ctx, src); CodeOf(probeErr) != code {
		t.Fatalf("probe: %v, want code %s", probeErr, code)
	}
	if _, embedErr = a.Embed(ctx, src, filepath.Join(dir, "out.pdf"), testID(name), Options{}); CodeOf(embedErr) != code {
		t.Fatalf("embed: %v, want code %s", embedErr, code)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("files left behind: %v", entries)
	}
	if _, err := a.Detect(ctx, src); CodeOf(err) != code {
		t.Fatalf("detect: %v, want code %s", err, code)
	}
	return src, probeErr, embedErr
}

// blankPages is a document of n distinct pages that inherit the media box box from the root and share one
// small content stream: a few dozen bytes a page.
func blankPages(n int, box string) []byte {
	kids := make([]string, n)
	objs := []string{"<< /Type /Catalog /Pages 2 0 R >>", "", flateObj("", []byte("0 g 10 10 20 20 re f"))}
	for i := range n {
		kids[i] = fmt.Sprintf("%d 0 R", 4+i)
		objs = append(objs, "<< /Type /Page /Parent 2 0 R /Contents 3 0 R >>")
	}
	objs[1] = fmt.Sprintf("<< /Type /Pages /Kids [%s] /Count %d /MediaBox %s >>", strings.Join(kids, " "), n, box)
	return buildPDF(objs, "/Root 1 0 R")
}

// TestDetectionPixelsAreBoundedBeforeRendering: 200 pages of 200 inches square (the largest page accepted,
// rendered at 16 MP each) in a 13 kB file ask 3,400 MP of rendering and analysis, more than the 2,000 MP free
// plus 2,000 a byte of the default limits: detection refuses with CodeTooLarge before rendering (the adapter
// has no renderer, which a detection that went on would report). With a larger free allowance the same file
// goes on to the renderer.
func TestDetectionPixelsAreBoundedBeforeRendering(t *testing.T) {
	src := writeTemp(t, "big-pages.pdf", blankPages(200, "[0 0 14400 14400]"))
	ctx := context.Background()
	_, err := noRendererAdapter(t, Limits{}).Detect(ctx, src)
	if CodeOf(err) != CodeTooLarge || !strings.Contains(err.Error(), "megapixels") {
		t.Fatalf("detect: %v, want code %s about megapixels", err, CodeTooLarge)
	}
	_, err = noRendererAdapter(t, Limits{DetectPixelsFree: 4_000_000_000}).Detect(ctx, src)
	if CodeOf(err) != CodeTool {
		t.Fatalf("detect within a larger budget: %v, want code %s (the renderer reached)", err, CodeTool)
	}
}

// TestDetectionPixelsAreCountedAsRendered: when the pages' sizes cannot be read before rendering, the pixels the
// renderer delivers are counted and the detection stops at the page that exceeds the budget: six pages of
// 100 pt at 150 dpi (209×209 pixels) under a budget of three analyse three pages, by one renderer or by two in
// parallel, and answer CodeTooLarge.
func TestDetectionPixelsAreCountedAsRendered(t *testing.T) {
	src := writeTemp(t, "six.pdf", blankPages(6, "[0 0 100 100]"))
	ctx := context.Background()
	for _, workers := range []int{1, 2} {
		a := testAdapter(t)
		a.Limits = Limits{RenderWorkers: workers, DetectPixels: 3 * 209 * 209}
		doc, err := a.open(ctx, src, false)
		if err != nil {
			t.Fatal(err)
		}
		doc.pageList, doc.pageWalkFailed = nil, true // as for a tree the one-pass walk cannot read: no estimate
		_, st, err := a.detectRenderedStats(ctx, doc, aloneBudget, nil)
		doc.close()
		if CodeOf(err) != CodeTooLarge {
			t.Fatalf("%d workers: %v, want code %s", workers, err, CodeTooLarge)
		}
		if st.Pages != 3 {
			t.Errorf("%d workers: %d pages analysed, want the 3 within the budget", workers, st.Pages)
		}
	}
}

// TestDetectionRenderTimeIsBounded: the time pages take to arrive from the renderer is counted against the
// document's budget (RenderTime plus RenderTimePerMB a megabyte, plus the default RenderTimePerMP, under 2 ms
// for these 100-point pages), on the adapter's clock: with a clock that advances a minute each time it is read,
// every page takes a minute, and under a 90 s budget the detection analyses the first page and refuses at the
// second with CodeTooLarge.
func TestDetectionRenderTimeIsBounded(t *testing.T) {
	a := testAdapter(t)
	a.Limits = Limits{RenderWorkers: 1, RenderTime: 90 * time.Second, RenderTimePerMB: time.Nanosecond}
	var ticks atomic.Int64
	start := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	a.now = func() time.Time { return start.Add(time.Duration(ticks.Add(1)) * time.Minute) }
	src := writeTemp(t, "six.pdf", blankPages(6, "[0 0 100 100]"))
	_, st, err := a.DetectRenderedStats(context.Background(), src)
	if CodeOf(err) != CodeTooLarge || !strings.Contains(err.Error(), "rendering the pages took longer") {
		t.Fatalf("detect: %v, want code %s about the rendering time", err, CodeTooLarge)
	}
	if st.Pages != 1 {
		t.Errorf("%d pages analysed, want 1", st.Pages)
	}
}

// TestRenderTimeGrowsWithThePixelsRendered: a long marked document whose structural layer is ignored
// (DetectRendered, as for a copy whose structure was stripped) is traced to its last page when each page takes
// no more than RenderTimePerMP a megapixel, however small the document's own budget; before, the budget was
// one figure per document and such a document stopped part-way (1,555 gnuplot pages stopped at page 668).
// Pages costlier than their allowance still draw the excess from that budget. On the adapter's clock, every
// page takes one tick: three marked Letter pages (2.1 MP each at 150 dpi, so 84 ms of allowance a page at 40 ms
// a megapixel) under a budget of 100 ms.
func TestRenderTimeGrowsWithThePixelsRendered(t *testing.T) {
	ctx := context.Background()
	src := writeTemp(t, "letter.pdf", blankPages(3, "[0 0 612 792]"))
	marked := filepath.Join(t.TempDir(), "marked.pdf")
	id := testID("render-time")
	if _, err := testAdapter(t).Embed(ctx, src, marked, id, Options{}); err != nil {
		t.Fatal(err)
	}
	detect := func(tick, perMP time.Duration) (codec.Detection, DetectStats, error) {
		a := testAdapter(t)
		a.Limits = Limits{RenderWorkers: 1, RenderTime: 100 * time.Millisecond, RenderTimePerMB: time.Nanosecond, RenderTimePerMP: perMP}
		var ticks atomic.Int64
		start := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
		a.now = func() time.Time { return start.Add(time.Duration(ticks.Add(1)) * tick) }
		return a.DetectRenderedStats(ctx, marked)
	}

	// 80 ms a page, within its allowance: every page is read and carries the id.
	d, st, err := detect(80*time.Millisecond, 40*time.Millisecond)
	if err != nil {
		t.Fatalf("80 ms a page: %v", err)
	}
	if !d.Watermarked || d.WatermarkID == nil || *d.WatermarkID != id.String() || len(d.Units) != 3 || st.Pages != 3 {
		t.Fatalf("80 ms a page: watermarked %v id %v, %d units, stats %+v", d.Watermarked, d.WatermarkID, len(d.Units), st)
	}
	for _, u := range d.Units {
		if !u.Watermarked || u.WatermarkID == nil || *u.WatermarkID != id.String() {
			t.Errorf("page %d: %+v", u.Index, u)
		}
	}

	// Without the allowance (a nanosecond a megapixel), the same pages stop at the second one.
	if _, st, err := detect(80*time.Millisecond, time.Nanosecond); CodeOf(err) != CodeTooLarge || st.Pages != 1 {
		t.Errorf("80 ms a page without the allowance: %d pages, %v; want 1 page and code %s", st.Pages, err, CodeTooLarge)
	}

	// 150 ms a page: 66 ms over its allowance each, the 100 ms budget pays for the first page and the second
	// stops.
	_, st, err = detect(150*time.Millisecond, 40*time.Millisecond)
	if CodeOf(err) != CodeTooLarge || !strings.Contains(err.Error(), "plus 40ms a megapixel rendered") || st.Pages != 1 {
		t.Errorf("150 ms a page: %d pages, %v; want 1 page and code %s about the rendering time", st.Pages, err, CodeTooLarge)
	}
}

// tinyObjects is a one-page document followed by n tiny objects, each at its own offset in a classic table.
func tinyObjects(n int) []byte {
	objs := []string{"<< /Type /Catalog /Pages 2 0 R >>", "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
		"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] >>"}
	for range n {
		objs = append(objs, "<< /A 1 >>")
	}
	return buildPDF(objs, "/Root 1 0 R")
}

// oneSlotManyNumbers is a one-page document whose cross-reference stream names n objects (5 to n+4), all in
// slot 0 of one object stream: a few hundred bytes and six object headers, n objects for the parser.
func oneSlotManyNumbers(n int) []byte {
	var b strings.Builder
	b.WriteString("%PDF-1.7\n")
	offs := map[int]int{}
	obj := func(nr int, body string) {
		offs[nr] = b.Len()
		fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", nr, body)
	}
	obj(1, "<< /Type /Catalog /Pages 2 0 R >>")
	obj(2, "<< /Type /Pages /Kids [3 0 R] /Count 1 >>")
	obj(3, "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] >>")
	obj(4, flateObj("/Type /ObjStm /N 1 /First 4", []byte("5 0 << /A 1 >>")))
	size := n + 6
	xrefNr, xrefOff := n+5, b.Len()
	rows := make([]byte, 0, 7*size)
	row := func(typ byte, f2, f3 int) {
		rows = append(rows, typ, byte(f2>>24), byte(f2>>16), byte(f2>>8), byte(f2), byte(f3>>8), byte(f3))
	}
	row(0, 0, 65535)
	for nr := 1; nr <= 4; nr++ {
		row(1, offs[nr], 0)
	}
	for range n {
		row(2, 4, 0)
	}
	row(1, xrefOff, 0)
	fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\nstartxref\n%d\n%%%%EOF\n", xrefNr,
		flateObj(fmt.Sprintf("/Type /XRef /Size %d /W [1 4 2] /Root 1 0 R", size), rows), xrefOff)
	return []byte(b.String())
}

// TestManyObjectsAreRefusedBeforeParsing: pdfcpu keeps a few kB for each object the file names (a 20 MB file of
// tiny objects took 1.16 GB to open), so files naming more objects than MaxObjects are refused by Probe, Embed
// and Detect before the parser reads them (the reason is the pre-scan's), counting the objects a table names
// in use, the object headers of a file with no usable table (the parser and the repair pass rebuild it from
// them), and numbers a cross-reference stream maps to one object stream slot.
func TestManyObjectsAreRefusedBeforeParsing(t *testing.T) {
	many := tinyObjects(1200)
	cases := map[string][]byte{
		"classic table":       many,
		"no table":            many[:strings.Index(string(many), "\nxref\n")+1],
		"numbers in one slot": oneSlotManyNumbers(1200),
	}
	a := noRendererAdapter(t, Limits{MaxObjects: 1000})
	ctx := context.Background()
	for name, data := range cases {
		t.Run(name, func(t *testing.T) {
			want := "more than 1000 objects"
			if _, err, _ := refusedEverywhere(t, a, name, data, CodeTooLarge); !strings.Contains(err.Error(), want) {
				t.Fatalf("probe: %v, want code %s saying %q", err, CodeTooLarge, want)
			}
		})
	}
	// Within the limit the same documents open (the one-slot one as the parser reads it).
	for name, data := range map[string][]byte{"classic table": many, "numbers in one slot": oneSlotManyNumbers(1200)} {
		src := writeTemp(t, "ok.pdf", data)
		if _, err := noRendererAdapter(t, Limits{MaxObjects: 2000}).Probe(ctx, src); CodeOf(err) == CodeTooLarge {
			t.Errorf("%s: refused under a limit of 2000 objects: %v", name, err)
		}
	}
}
