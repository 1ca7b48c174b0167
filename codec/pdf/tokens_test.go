package pdf

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"filigrane/codec/pdf/pdftest"
)

// TestManyTokensAreRefusedBeforeParsing: the parser spends CPU and memory on each syntax token (a 246 kB file
// whose object streams inflate to 168 million took 26-45 CPU-s to parse), so a file with more than MaxTokens,
// in a plain object or in an object stream, is refused by the memory estimate, Probe, Embed and Detect before
// the parser reads it, and an embed leaves no file; under the limit the same documents open.
func TestManyTokensAreRefusedBeforeParsing(t *testing.T) {
	const limit = 100_000
	junk := "[" + strings.Repeat("[]", 60_000) + "]" // 120,002 tokens
	cases := map[string][]byte{
		"in a plain object": pdftest.Make(pdftest.Doc{Pages: 1, PageExt: "/Junk " + junk}),
		"in an object stream": pdftest.Make(pdftest.Doc{Pages: 1,
			ExtraObjs: []string{pdftest.Flate("/Type /ObjStm /N 1 /First 5", []byte("100 0 "+junk))}}),
	}
	a := noRendererAdapter(t, Limits{MaxTokens: limit})
	ctx := context.Background()
	for name, data := range cases {
		t.Run(name, func(t *testing.T) {
			want := "more than 100000 syntax tokens"
			src, err, _ := refusedEverywhere(t, a, name, data, CodeTooLarge)
			if !strings.Contains(err.Error(), want) {
				t.Fatalf("probe: %v, want code %s saying %q", err, CodeTooLarge, want)
			}
			if _, err := a.EstimateMemory(t.Context(), src, false); CodeOf(err) != CodeTooLarge || !strings.Contains(err.Error(), want) {
				t.Fatalf("estimate: %v, want code %s saying %q", err, CodeTooLarge, want)
			}
			if _, err := noRendererAdapter(t, Limits{MaxTokens: 2 * limit}).Probe(ctx, src); err != nil {
				t.Errorf("refused under a limit of %d tokens: %v", 2*limit, err)
			}
		})
	}
}

// TestDeepNestingInAnObjectStream: the nesting scan (nesting.go) skips stream data, so an object stream's
// objects are bounded by the parser's own recursion limit; a page nesting arrays 100,000 deep there is
// refused as too large, cheaply, rather than answered as a broken file after a repair pass (the adapter has no
// renderer: a repair would answer CodeTool).
func TestDeepNestingInAnObjectStream(t *testing.T) {
	const depth = 100_000
	src := writeTemp(t, "deep.pdf", pageInObjectStream("/Junk "+strings.Repeat("[", depth)+strings.Repeat("]", depth)))
	_, err := noRendererAdapter(t, Limits{}).Probe(context.Background(), src)
	if CodeOf(err) != CodeTooLarge || !strings.Contains(err.Error(), "nests") {
		t.Fatalf("probe: %v, want code %s about nesting", err, CodeTooLarge)
	}
	// The same page, nested 10 deep, opens.
	src = writeTemp(t, "shallow.pdf", pageInObjectStream("/Junk "+strings.Repeat("[", 10)+strings.Repeat("]", 10)))
	if _, err := noRendererAdapter(t, Limits{}).Probe(context.Background(), src); err != nil {
		t.Fatalf("probe of the page nested 10 deep: %v", err)
	}
}

// pageInObjectStream is a one-page document whose page (object 4, with the extra entries ext) lies in an object
// stream (object 3), named by a cross-reference stream (object 5).
func pageInObjectStream(ext string) []byte {
	var b bytes.Buffer
	b.WriteString("%PDF-1.7\n")
	offs := map[int]int{}
	obj := func(nr int, body string) {
		offs[nr] = b.Len()
		fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", nr, body)
	}
	obj(1, "<< /Type /Catalog /Pages 2 0 R >>")
	obj(2, "<< /Type /Pages /Kids [4 0 R] /Count 1 >>")
	obj(3, flateObj("/Type /ObjStm /N 1 /First 4", []byte("4 0 << /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "+ext+" >>")))
	offs[5] = b.Len()
	var rows []byte
	for nr, typ := range []byte{0, 1, 1, 1, 2, 1} {
		f2, f3 := offs[nr], 0
		switch nr {
		case 0:
			f3 = 65535
		case 4:
			f2 = 3
		}
		rows = append(rows, typ, byte(f2>>24), byte(f2>>16), byte(f2>>8), byte(f2), byte(f3>>8), byte(f3))
	}
	fmt.Fprintf(&b, "5 0 obj\n%s\nendobj\nstartxref\n%d\n%%%%EOF\n",
		flateObj("/Type /XRef /Size 6 /W [1 4 2] /Root 1 0 R", rows), offs[5])
	return b.Bytes()
}
