package pdf

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pdfcpu/pdfcpu/pkg/api"
	"github.com/pdfcpu/pdfcpu/pkg/pdfcpu/types"

	"filigrane/codec"
	"filigrane/codec/pdf/pdftest"
)

// TestMarkedPDFKeepsCreationDateAndDropsThumbnails: a marked PDF carries no thumbnail (a page's /Thumb image and
// the XMP's xmp:Thumbnails and xmpGImg:image, the catalog's or a page's, are unmarked renderings of the page), keeps the input's creation
// date in its information dictionary and its XMP, dates its modification at the marking in both, keeps the
// rest of its XMP (a title), and is still found marked, structurally and rendered; in a classic and an
// object-stream layout, and in PDF 2.0, whose information dictionary the writer does not date. An input whose information dictionary has no creation date takes its XMP's.
func TestMarkedPDFKeepsCreationDateAndDropsThumbnails(t *testing.T) {
	a := testAdapter(t)
	ctx := context.Background()
	for _, c := range []struct {
		name    string
		doc     pdftest.DescribedDoc
		info    string    // the output's /CreationDate, in the writer's form
		created time.Time // the same instant
	}{
		{"classic", pdftest.DescribedDoc{Pages: 2, CreationDate: "D:20190304050607+02'00'", XMP: true, PageThumbs: true},
			"D:20190304050607+02'00'", time.Date(2019, 3, 4, 3, 6, 7, 0, time.UTC)},
		// A negative offset with minutes (which pdfcpu v0.15.0 reads as -04:30).
		{"object streams", pdftest.DescribedDoc{Pages: 2, CreationDate: "D:20190304050607-05'30'", XMP: true, PageThumbs: true, PageXMP: true, Packed: true},
			"D:20190304050607-05'30'", time.Date(2019, 3, 4, 10, 36, 7, 0, time.UTC)},
		{"creation date in the XMP only", pdftest.DescribedDoc{Pages: 1, XMP: true},
			"D:20200102030405+00'00'", time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)},
		// An XMP date without a zone is read as UTC.
		{"XMP creation date without a zone", pdftest.DescribedDoc{Pages: 1, XMP: true, XMPCreated: "2018-07-08T09:10:11"},
			"D:20180708091011+00'00'", time.Date(2018, 7, 8, 9, 10, 11, 0, time.UTC)},
		// PDF 2.0, whose information dictionary's dates the writer leaves alone: they are set before writing.
		{"PDF 2.0", pdftest.DescribedDoc{Pages: 1, CreationDate: "D:20190304050607+02'00'", XMP: true, PDF20: true},
			"D:20190304050607+02'00'", time.Date(2019, 3, 4, 3, 6, 7, 0, time.UTC)},
		{"no catalog XMP", pdftest.DescribedDoc{Pages: 1, CreationDate: "D:20190304050607Z", PageThumbs: true, PageXMP: true},
			"D:20190304050607+00'00'", time.Date(2019, 3, 4, 5, 6, 7, 0, time.UTC)},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := pdftest.Described(c.doc)
			if c.doc.PageThumbs != bytes.Contains(in, []byte(pdftest.ThumbnailMark)) {
				t.Fatal("fixture: page thumbnails not in plain bytes")
			}
			src := writeTemp(t, "in.pdf", in)
			dst := filepath.Join(t.TempDir(), "out.pdf")
			start := time.Now().Truncate(time.Second)
			id := testID("described " + c.name)
			if _, err := a.Embed(ctx, src, dst, id, Options{}); err != nil {
				t.Fatal(err)
			}
			out, err := os.ReadFile(dst)
			if err != nil {
				t.Fatal(err)
			}
			m := readMarkedMetadata(t, dst)
			if bytes.Contains(out, []byte(pdftest.ThumbnailMark)) || strings.Contains(m.xmp, pdftest.ThumbnailMark) ||
				strings.Contains(m.xmp, "Thumbnails") {
				t.Fatalf("the marked file holds a thumbnail; XMP:\n%s", m.xmp)
			}
			pc, err := api.ReadContextFile(dst)
			if err != nil {
				t.Fatal(err)
			}
			for nr, e := range pc.XRefTable.Table {
				if sd, ok := e.Object.(types.StreamDict); ok && sd.Decode() == nil && bytes.Contains(sd.Content, []byte(pdftest.ThumbnailMark)) {
					t.Fatalf("object %d (%v) holds a thumbnail", nr, sd.Dict)
				}
			}
			for p := 1; p <= c.doc.Pages; p++ {
				pd, _, _, err := pc.XRefTable.PageDict(p, false)
				if err != nil || pd["Thumb"] != nil {
					t.Fatalf("page %d: /Thumb %v (%v)", p, pd["Thumb"], err)
				}
			}
			if m.info["CreationDate"] != c.info {
				t.Fatalf("information dictionary's CreationDate %q, want the input's %q", m.info["CreationDate"], c.info)
			}
			mod, ok := types.DateTime(m.info["ModDate"], false)
			if !ok || mod.Before(start) || mod.After(time.Now()) {
				t.Fatalf("information dictionary's ModDate %q, want the time of marking (from %s)", m.info["ModDate"], start)
			}
			if c.doc.XMP {
				if !strings.Contains(m.xmp, "Filigrane test document") {
					t.Fatalf("XMP title lost:\n%s", m.xmp)
				}
				for _, d := range []struct {
					qname string
					want  time.Time
				}{{"xmp:CreateDate", c.created}, {"xmp:ModifyDate", mod}, {"xmp:MetadataDate", mod}} {
					x, err := time.Parse(time.RFC3339, xmpText(m.xmp, d.qname))
					if err != nil || !x.Equal(d.want) {
						t.Fatalf("XMP %s %q (%v), want %s:\n%s", d.qname, xmpText(m.xmp, d.qname), err, d.want, m.xmp)
					}
				}
			}
			for name, detect := range map[string]func(context.Context, string) (codec.Detection, error){
				"structural": a.Detect, "rendered": a.DetectRendered,
			} {
				d, err := detect(ctx, dst)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				if !d.Watermarked || d.WatermarkID == nil || *d.WatermarkID != id.String() || len(d.Units) != c.doc.Pages {
					t.Fatalf("%s: watermarked %v id %v, %d units; want %s on %d pages", name, d.Watermarked, d.WatermarkID,
						len(d.Units), id, c.doc.Pages)
				}
			}
		})
	}
}
