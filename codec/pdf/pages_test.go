package pdf

import (
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"filigrane/codec/pdf/pdftest"
)

// nestedTree is a document whose page tree has three levels, inherited attributes at each (a media box and
// resources on the root, a rotation and a crop box on one inner node, a media box on another, pages that set
// their own box, rotation or resources) and pages in an order that is not their object
// order. rotate is the /Rotate of the fourth page.
func nestedTree(rotate string) []byte {
	return buildPDF([]string{
		"<< /Type /Catalog /Pages 2 0 R >>",
		"<< /Type /Pages /Kids [3 0 R 4 0 R 9 0 R] /Count 5 /MediaBox [0 0 612 792] /Resources << /Font << /F1 12 0 R >> >> >>",
		"<< /Type /Pages /Parent 2 0 R /Kids [6 0 R 5 0 R] /Count 2 /Rotate 90 /CropBox [10 10 500 700] >>",
		"<< /Type /Pages /Parent 2 0 R /Kids [7 0 R 8 0 R] /Count 2 /MediaBox [0 0 720 405] >>",
		"<< /Type /Page /Parent 3 0 R /Contents 10 0 R >>",
		"<< /Type /Page /Parent 3 0 R /Contents 10 0 R /Rotate 180 /MediaBox [5 5 300 400] >>",
		"<< /Type /Page /Parent 4 0 R /Contents 10 0 R /Resources 11 0 R >>",
		"<< /Type /Page /Parent 4 0 R /Contents 10 0 R /Rotate " + rotate + " >>",
		"<< /Type /Page /Parent 2 0 R /Contents 10 0 R /CropBox [0 0 400 400] >>",
		streamObj("", []byte("0.5 g 72 200 200 150 re f\n")),
		"<< /Font << /F1 12 0 R >> /ProcSet [/PDF] >>",
		"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
	}, "/Root 1 0 R")
}

// TestPageWalkMatchesPageDict: the pages that one walk of the page tree lists are, page for page, the
// dictionaries and inherited attributes that pdfcpu's PageDict finds by walking from the root for each page
// (on a nested tree with inheritance at every level, and on a flat generated document). A /Rotate of 270.0
// fails validation and the file is read again after the repair pass: the pages are those of the repaired file
// (the refusal checks had walked the first parse's pages, which an earlier version kept).
func TestPageWalkMatchesPageDict(t *testing.T) {
	a := testAdapter(t)
	ctx := context.Background()
	for _, c := range []struct {
		name     string
		data     []byte
		repaired bool
	}{
		{"nested", nestedTree("-90"), false},
		{"nested-repaired", nestedTree("270.0"), true},
		{"flat", makeDoc(pdftest.Doc{Pages: 30}), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			doc, err := a.open(ctx, writeTemp(t, "in.pdf", c.data), true)
			if err != nil {
				t.Fatal(err)
			}
			defer doc.close()
			if doc.info.Repaired != c.repaired {
				t.Fatalf("repaired %v, want %v", doc.info.Repaired, c.repaired)
			}
			xt := doc.ctx.XRefTable
			for p := 1; p <= xt.PageCount; p++ {
				want, _, wantAttrs, err := xt.PageDict(p, false)
				if err != nil {
					t.Fatal(err)
				}
				got, gotAttrs, err := doc.page(p)
				if err != nil {
					t.Fatal(err)
				}
				if reflect.ValueOf(got).Pointer() != reflect.ValueOf(want).Pointer() {
					t.Errorf("page %d: another dictionary: %v, want %v", p, got, want)
				}
				if !reflect.DeepEqual(*gotAttrs, *wantAttrs) {
					t.Errorf("page %d: attributes %+v, want %+v", p, *gotAttrs, *wantAttrs)
				}
			}
			if doc.pageWalkFailed || len(doc.pageList) != xt.PageCount {
				t.Errorf("the walk was not used: failed %v, %d pages of %d", doc.pageWalkFailed, len(doc.pageList), xt.PageCount)
			}
			if _, _, err := doc.page(xt.PageCount + 1); err == nil {
				t.Error("a page past the end was found")
			}
		})
	}
}

// BenchmarkEmbed10000Pages embeds a generated document of 10,000 one-line pages listed flat under the root, the
// shape that makes a walk from the root per page cost 10,000 dereferences per page. It reports the CPU seconds
// of one embed (cpuSeconds) and pages per CPU-second:
//
//	go test -run '^$' -bench Embed10000Pages -benchtime 1x ./codec/pdf
func BenchmarkEmbed10000Pages(b *testing.B) {
	const pages = 10000
	a := testAdapter(b)
	objs := []string{"<< /Type /Catalog /Pages 2 0 R >>", "",
		"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"}
	kids := make([]string, 0, pages)
	for p := range pages {
		n := len(objs) + 1
		kids = append(kids, fmt.Sprintf("%d 0 R", n))
		objs = append(objs,
			fmt.Sprintf("<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> /Contents %d 0 R >>", n+1),
			streamObj("", fmt.Appendf(nil, "BT /F1 12 Tf 72 720 Td (Page %d) Tj ET\n", p+1)))
	}
	objs[1] = fmt.Sprintf("<< /Type /Pages /Kids [%s] /Count %d >>", strings.Join(kids, " "), pages)
	src := writeTemp(b, "in.pdf", buildPDF(objs, "/Root 1 0 R"))
	dst := filepath.Join(b.TempDir(), "out.pdf")
	var cpu float64
	for b.Loop() {
		c0 := cpuSeconds()
		if _, err := a.Embed(context.Background(), src, dst, testID("long"), Options{}); err != nil {
			b.Fatal(err)
		}
		cpu += cpuSeconds() - c0
	}
	b.ReportMetric(cpu/float64(b.N), "cpu-s/op")
	b.ReportMetric(pages*float64(b.N)/cpu, "pages/cpu-s")
}
