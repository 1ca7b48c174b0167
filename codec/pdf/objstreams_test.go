package pdf

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/pdfcpu/pdfcpu/pkg/api"
	"github.com/pdfcpu/pdfcpu/pkg/pdfcpu/model"
	"github.com/pdfcpu/pdfcpu/pkg/pdfcpu/types"

	"filigrane/codec/pdf/pdftest"
)

// annotatedDoc is a one-page text document with notes comment annotations, each carrying a private extras
// dictionary (as Apple's Preview writes: /AAPL:AKExtras, a 2 KB base64 blob, nearly the same in every note)
// that points to one more object nothing else names. packed lays it out as current writers do (object streams
// and a cross-reference stream), else with a classic table.
func annotatedDoc(notes int, packed bool) []byte {
	blob := make([]byte, 1500)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range blob {
		blob[i] = byte(r.UintN(256))
	}
	b64 := base64.StdEncoding.EncodeToString(blob)
	const first = 6 // objects: 1 catalog, 2 pages, 3 font, 4 info, 5 content, then per note: annotation, extras, kept
	var annots bytes.Buffer
	objs := []string{
		"<< /Type /Catalog /Pages 2 0 R >>",
		"<< /Type /Pages /Kids [6 0 R] /Count 1 >>",
		"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
		"<< /Title (Annotated) >>",
		pdftest.Flate("", []byte(pdftest.TextPage(1))),
		"", // the page, once the annotations are numbered
	}
	for k := range notes {
		n := first + 1 + 3*k
		fmt.Fprintf(&annots, "%d 0 R ", n)
		objs = append(objs,
			fmt.Sprintf("<< /Type /Annot /Subtype /Text /Rect [%d 700 %d 720] /Contents (note %d) /AAPL:AKExtras %d 0 R >>", 72+20*k, 92+20*k, k, n+1),
			fmt.Sprintf("<< /AAPL:AKAnnotationObject (%s%03d) /AAPL:More %d 0 R >>", b64, k, n+2),
			fmt.Sprintf("<< /Kept (kept %d) >>", k))
	}
	objs[first-1] = fmt.Sprintf("<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> /Contents 5 0 R /Annots [%s] >>", annots.String())
	if packed {
		return pdftest.Packed(objs, "/Root 1 0 R /Info 4 0 R")
	}
	return pdftest.Build(objs, "/Root 1 0 R /Info 4 0 R")
}

// readLayout parses path with pdfcpu and reports whether it uses a cross-reference stream and object streams.
func readLayout(t *testing.T, path string) *model.Context {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	conf := model.NewDefaultConfiguration()
	conf.ValidationMode = model.ValidationRelaxed
	c, err := api.ReadContext(f, conf)
	if err != nil {
		t.Fatalf("reading %s back: %v", path, err)
	}
	return c
}

// keptObjects follows every annotation of page 1 to its extras and the object they point to, and counts those
// that arrive at a /Kept string.
func keptObjects(t *testing.T, c *model.Context) int {
	t.Helper()
	root, err := c.Catalog()
	if err != nil {
		t.Fatal(err)
	}
	pages, err := c.DereferenceDict(root["Pages"])
	if err != nil || pages == nil {
		t.Fatalf("page tree: %v", err)
	}
	kids, err := c.DereferenceArray(pages["Kids"])
	if err != nil || len(kids) == 0 {
		t.Fatalf("page tree kids: %v", err)
	}
	page, err := c.DereferenceDict(kids[0])
	if err != nil || page == nil {
		t.Fatalf("page 1: %v", err)
	}
	annots, err := c.DereferenceArray(page["Annots"])
	if err != nil {
		t.Fatal(err)
	}
	kept := 0
	for _, a := range annots {
		ad, err := c.DereferenceDict(a)
		if err != nil || ad == nil {
			continue
		}
		ex, err := c.DereferenceDict(ad["AAPL:AKExtras"])
		if err != nil || ex == nil {
			continue
		}
		k, err := c.DereferenceDict(ex["AAPL:More"])
		if err != nil || k == nil {
			continue
		}
		if s, ok := k["Kept"].(types.StringLiteral); ok && bytes.HasPrefix([]byte(s), []byte("kept ")) {
			kept++
		}
	}
	return kept
}

// markedGrowth embeds doc and returns what the rewrite added besides the page images, and the report.
func markedGrowth(t *testing.T, a *Adapter, doc []byte, dst string, id string) (int64, EmbedReport) {
	t.Helper()
	rep, err := a.Embed(context.Background(), writeTemp(t, "in.pdf", doc), dst, testID(id), Options{})
	if err != nil {
		t.Fatal(err)
	}
	return rep.OutBytes - rep.InBytes - rep.PageImageBytes, rep
}

// A document laid out with object streams stays so once marked: its private annotation extras (which the
// validation does not read) go back into object streams instead of out as plain objects, and what they point
// to is kept. Twenty notes then cost the marked file what they cost the input: the rewrite adds within 1 KB
// of what it adds to the same page without them, and the output stays under twice the input (1.78× here, a
// one-page 4 KB file: the mark's floor of about 3.4 KB, docs/codec.md). Before, the twenty 2 KB extras that
// deflate together in the input were written out plain (4 KB in, 47 KB out), as pdfcpu's annotTest.pdf went
// from 86 to 182 KB, and the objects only they named were dropped.
func TestEmbedKeepsObjectStreams(t *testing.T) {
	a := testAdapter(t)
	const notes = 20
	doc := annotatedDoc(notes, true)
	if c := readLayout(t, writeTemp(t, "fixture.pdf", doc)); !c.Read.UsingXRefStreams || !c.Read.UsingObjectStreams || keptObjects(t, c) != notes {
		t.Fatalf("fixture: xref stream %v, object streams %v, kept %d", c.Read.UsingXRefStreams, c.Read.UsingObjectStreams, keptObjects(t, c))
	}
	bare, _ := markedGrowth(t, a, annotatedDoc(0, true), filepath.Join(t.TempDir(), "bare.pdf"), "packed")
	dst := filepath.Join(t.TempDir(), "marked.pdf")
	growth, rep := markedGrowth(t, a, doc, dst, "packed")
	t.Logf("%d → %d bytes (%.2f×), page images %d, rest of the rewrite %d (%d without the notes)", rep.InBytes, rep.OutBytes,
		float64(rep.OutBytes)/float64(rep.InBytes), rep.PageImageBytes, growth, bare)
	if growth > bare+1<<10 {
		t.Errorf("with %d notes the rewrite added %d bytes besides the page images, %d without them", notes, growth, bare)
	}
	if rep.OutBytes >= 2*rep.InBytes {
		t.Errorf("marked file of %d bytes, not under twice the input's %d", rep.OutBytes, rep.InBytes)
	}
	c := readLayout(t, dst)
	if !c.Read.UsingXRefStreams || !c.Read.UsingObjectStreams {
		t.Errorf("marked: cross-reference stream %v, object streams %v; want both, as the input", c.Read.UsingXRefStreams, c.Read.UsingObjectStreams)
	}
	if k := keptObjects(t, c); k != notes {
		t.Errorf("marked: %d of %d objects named only by the annotations' extras are still there", k, notes)
	}
	info, err := a.Probe(context.Background(), dst)
	if err != nil || !info.Marked || info.MarkedID != testID("packed") {
		t.Errorf("structural mark: %+v, %v", info, err)
	}
	det, err := a.DetectRendered(context.Background(), dst)
	if err != nil || !det.Watermarked {
		t.Errorf("rendered detection: %+v, %v", det, err)
	}
}

// A document with a classic cross-reference table keeps one: no cross-reference stream, no object streams
// (pdfcpu's default wrote both whatever the input).
func TestEmbedKeepsClassicXRefTable(t *testing.T) {
	a := testAdapter(t)
	src := writeTemp(t, "classic.pdf", annotatedDoc(3, false))
	dst := filepath.Join(t.TempDir(), "marked.pdf")
	if _, err := a.Embed(context.Background(), src, dst, testID("classic"), Options{}); err != nil {
		t.Fatal(err)
	}
	c := readLayout(t, dst)
	if c.Read.UsingXRefStreams || c.Read.UsingObjectStreams {
		t.Errorf("marked: cross-reference stream %v, object streams %v; want a classic table, as the input", c.Read.UsingXRefStreams, c.Read.UsingObjectStreams)
	}
	if k := keptObjects(t, c); k != 3 {
		t.Errorf("marked: %d of 3 extras' objects kept", k)
	}
	if info, err := a.Probe(context.Background(), dst); err != nil || !info.Marked || info.MarkedID != testID("classic") {
		t.Errorf("structural mark: %+v, %v", info, err)
	}
}

// outlinedDoc is a one-page text document, laid out with object streams, with an outline of items sections,
// each going to a named destination of the catalog's name tree (as LaTeX with hyperref writes them).
func outlinedDoc(items int) []byte {
	objs := []string{
		"<< /Type /Catalog /Pages 2 0 R /Outlines 5 0 R /Names << /Dests 6 0 R >> >>",
		"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
		"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 4 0 R >> >> /Contents 7 0 R >>",
		"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
		"", // outlines, once the items are numbered
		"", // the name tree's root
		pdftest.Flate("", []byte(pdftest.TextPage(1))),
	}
	const first = 8 // per item: outline item, destination
	var names bytes.Buffer
	for k := range items {
		item, dest := first+2*k, first+2*k+1
		prev, next := "", ""
		if k > 0 {
			prev = fmt.Sprintf("/Prev %d 0 R ", item-2)
		}
		if k+1 < items {
			next = fmt.Sprintf("/Next %d 0 R ", item+2)
		}
		objs = append(objs,
			fmt.Sprintf("<< /Title (Section %d: the quick brown fox) /Parent 5 0 R %s%s/Dest (section.%d) >>", k+1, prev, next, k+1),
			fmt.Sprintf("[3 0 R /XYZ 72 %d null]", 700-k%600))
		fmt.Fprintf(&names, "(section.%d) %d 0 R ", k+1, dest)
	}
	objs[4] = fmt.Sprintf("<< /Type /Outlines /First %d 0 R /Last %d 0 R /Count %d >>", first, first+2*(items-1), items)
	objs[5] = fmt.Sprintf("<< /Names [%s] >>", names.String())
	return pdftest.Packed(objs, "/Root 1 0 R")
}

// A document's outline and named destinations (which pdfcpu's writer puts outside object streams whatever the
// input) go back into object streams: 300 outline items and destinations cost the marked file within 1 KB of
// what they cost the input (gnuplot.pdf: 1.162× before, 1.005× after). The marked file passes qpdf's check and
// its outline still leads to the page.
func TestEmbedPacksOutlineIntoObjectStreams(t *testing.T) {
	a := testAdapter(t)
	const items = 300
	bare, _ := markedGrowth(t, a, outlinedDoc(1), filepath.Join(t.TempDir(), "bare.pdf"), "outline")
	dst := filepath.Join(t.TempDir(), "marked.pdf")
	growth, rep := markedGrowth(t, a, outlinedDoc(items), dst, "outline")
	t.Logf("%d → %d bytes (%.2f×), rest of the rewrite %d (%d with one item)", rep.InBytes, rep.OutBytes,
		float64(rep.OutBytes)/float64(rep.InBytes), growth, bare)
	if growth > bare+1<<10 {
		t.Errorf("with %d outline items the rewrite added %d bytes besides the page images, %d with one", items, growth, bare)
	}
	if rep.OutBytes >= 2*rep.InBytes {
		t.Errorf("marked file of %d bytes, not under twice the input's %d", rep.OutBytes, rep.InBytes)
	}
	if _, err := exec.LookPath("qpdf"); err == nil {
		if out, err := exec.Command("qpdf", "--check", dst).CombinedOutput(); err != nil {
			t.Errorf("qpdf --check: %v\n%s", err, out)
		}
	}
	out, err := exec.Command("mutool", "show", dst, "outline").Output()
	if err != nil || !bytes.Contains(out, []byte("Section 300: the quick brown fox")) {
		t.Errorf("outline of the marked file (%v):\n%.300s", err, out)
	}
	if info, err := a.Probe(context.Background(), dst); err != nil || !info.Marked || info.MarkedID != testID("outline") {
		t.Errorf("structural mark: %+v, %v", info, err)
	}
}

// The repacking moves only bytes that are exactly one object as the writer wrote it: given a write whose
// recorded offset of a plain object is off by one, it stops with an error (and Embed keeps the writer's file)
// rather than moving a cut object.
func TestRepackStopsOnUnexpectedLayout(t *testing.T) {
	src := writeTemp(t, "in.pdf", outlinedDoc(3))
	c, err := readContext(context.Background(), src, DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	if err := safeValidate(c); err != nil {
		t.Fatal(err)
	}
	setWriteLayout(c)
	f, err := os.Create(filepath.Join(t.TempDir(), "written.pdf"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := api.WriteContext(c, f); err != nil {
		t.Fatal(err)
	}
	var good bytes.Buffer
	if _, err := packPlain(context.Background(), c, f, &good); err != nil {
		t.Fatalf("repacking the writer's file: %v", err)
	}
	if !bytes.Contains(good.Bytes(), []byte("/Type/ObjStm")) {
		t.Fatal("no object stream written")
	}
	root := int(c.XRefTable.Root.ObjectNumber) // the catalog: written plain by pdfcpu
	c.Write.Table[root]++
	if _, err := packPlain(context.Background(), c, f, io.Discard); err == nil {
		t.Error("an object recorded one byte off was repacked")
	}
}
