package pdf

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"filigrane/codec"
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

// repeatedPage is a one-page document whose page tree names the page object times times (/Count says times):
// the audit's 54 kB file at 9,000.
func repeatedPage(times int) []byte {
	return buildPDF([]string{
		"<< /Type /Catalog /Pages 2 0 R >>",
		fmt.Sprintf("<< /Type /Pages /Kids [%s] /Count %d >>", strings.TrimSpace(strings.Repeat("3 0 R ", times)), times),
		"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>",
		flateObj("", []byte(textPage(1))),
		"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
	}, "/Root 1 0 R")
}

// TestPageNamedTwiceIsRefusedBeforeAnyPage: a page tree that names a page, or an intermediate node, more than
// once is refused by Probe, Embed and Detect with CodePageTree before any page is processed (the adapter has
// no renderer: a detection that reached rendering would answer CodeTool), and an embed leaves no file.
func TestPageNamedTwiceIsRefusedBeforeAnyPage(t *testing.T) {
	page := "<< /Type /Page /Parent %d 0 R /MediaBox [0 0 612 792] >>"
	cases := map[string][]byte{
		"one page 9000 times": repeatedPage(9000),
		"a page in two nodes": buildPDF([]string{
			"<< /Type /Catalog /Pages 2 0 R >>",
			"<< /Type /Pages /Kids [3 0 R 4 0 R] /Count 2 >>",
			"<< /Type /Pages /Parent 2 0 R /Kids [5 0 R] /Count 1 >>",
			"<< /Type /Pages /Parent 2 0 R /Kids [5 0 R] /Count 1 >>",
			fmt.Sprintf(page, 3),
		}, "/Root 1 0 R"),
		// A node shared by its parent's kids doubles the pages below it at each level: 2^k pages from k nodes.
		"a node named twice": buildPDF([]string{
			"<< /Type /Catalog /Pages 2 0 R >>",
			"<< /Type /Pages /Kids [3 0 R 3 0 R] /Count 4 >>",
			"<< /Type /Pages /Parent 2 0 R /Kids [4 0 R 5 0 R] /Count 2 >>",
			fmt.Sprintf(page, 3),
			fmt.Sprintf(page, 3),
		}, "/Root 1 0 R"),
	}
	a := noRendererAdapter(t, Limits{})
	ctx := context.Background()
	for name, data := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			src := filepath.Join(dir, "in.pdf")
			if err := os.WriteFile(src, data, 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := a.Probe(ctx, src); CodeOf(err) != CodePageTree {
				t.Fatalf("probe: %v, want code %s", err, CodePageTree)
			}
			_, err := a.Embed(ctx, src, filepath.Join(dir, "out.pdf"), testID(name), Options{})
			if CodeOf(err) != CodePageTree {
				t.Fatalf("embed: %v, want code %s", err, CodePageTree)
			}
			if !strings.Contains(err.Error(), "more than once") {
				t.Errorf("embed: the reason does not say what is wrong: %v", err)
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 1 {
				t.Errorf("files left behind: %v", entries)
			}
			if _, err := a.Detect(ctx, src); CodeOf(err) != CodePageTree {
				t.Fatalf("detect: %v, want code %s", err, CodePageTree)
			}
		})
	}
}
