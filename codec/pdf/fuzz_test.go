package pdf

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"filigrane/codec"
	"filigrane/codec/pdf/pdftest"
)

// fuzzSeeds are generated documents, valid and precisely broken, for the fuzzers' seed corpus.
func fuzzSeeds() [][]byte {
	doc := makeDoc(pdftest.Doc{Pages: 2})
	return [][]byte{
		doc,
		makeDoc(pdftest.Doc{Pages: 1, CatalogExt: "/OpenAction << /S /JavaScript /JS (1) >>"}),
		makeDoc(pdftest.Doc{Pages: 1, CatalogExt: "/AcroForm << /Fields [] /SigFlags 3 >>"}),
		makeDoc(pdftest.Doc{Pages: 1, MediaBox: "[0 0 100000 5]"}),
		doc[:len(doc)/2],
		bytes.Replace(doc, []byte("/Count 2"), []byte("/Count 99999999"), 1),
		bytes.Replace(doc, []byte("/Kids ["), []byte("/Kids [2 0 R "), 1),
		buildPDF([]string{"<< /Type /Catalog /Pages 1 0 R >>"}, "/Root 1 0 R"),
		[]byte("%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF"),
		[]byte("%PDF-" + string(bytes.Repeat([]byte("[<<("), 200))),
		objStmBomb()[:4096],
		// The bounds of the page tree, the object and token counts (bounds_test.go, tokens_test.go); the fuzzers'
		// MaxObjects is 10,000, their MaxTokens 200,000.
		pdftest.RepeatedPage(50),
		bytes.Replace(doc, []byte("/Kids ["), []byte("/Kids [7 0 R "), 1), // the first page named twice
		tinyObjects(10001),
		oneSlotManyNumbers(10001),
		pageInObjectStream("/Junk [" + strings.Repeat("0 ", 100_001) + "]"),
		pageInObjectStream("/Junk " + strings.Repeat("[", 200) + strings.Repeat("]", 200)),
	}
}

// FuzzOpen feeds arbitrary bytes to Probe and, when they are accepted, to Embed and Detect: nothing may panic,
// every refusal must be typed, and an accepted file must come out as a PDF that carries its structural mark.
// The renderer and the repair pass are left out (no subprocess per input).
func FuzzOpen(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add(s)
	}
	c, err := codec.New([]byte(codec.DevelopmentKey))
	if err != nil {
		f.Fatal(err)
	}
	a := &Adapter{Codec: c, Mutool: "/nonexistent/mutool", Limits: Limits{MaxBytes: 1 << 20, MaxPages: 50,
		MaxDecodeBytes: 4 << 20, MaxObjects: 10000, MaxTokens: 200_000, ParseTimeout: 5 * time.Second}}
	id := testID("fuzz")
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		src := filepath.Join(dir, "in.pdf")
		if err := os.WriteFile(src, data, 0o644); err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		if _, err := a.Probe(ctx, src); err != nil {
			if CodeOf(err) == "" {
				t.Fatalf("untyped refusal: %v", err)
			}
			return
		}
		dst := filepath.Join(dir, "out.pdf")
		if _, err := a.Embed(ctx, src, dst, id, Options{}); err != nil {
			if CodeOf(err) == "" && !isWriteError(err) {
				t.Fatalf("untyped embed error: %v", err)
			}
			if _, serr := os.Stat(dst); serr == nil {
				t.Fatalf("output left behind after %v", err)
			}
			return
		}
		info, err := a.Probe(ctx, dst)
		if err != nil {
			t.Fatalf("marked output does not open: %v", err)
		}
		if !info.Marked || info.MarkedID != id {
			t.Fatalf("marked output lost its structural mark: %+v", info)
		}
	})
}

// isWriteError accepts pdfcpu writer failures on inputs it parsed but cannot serialise (reported untyped,
// as a server-side failure).
func isWriteError(err error) bool {
	return err != nil && (bytes.Contains([]byte(err.Error()), []byte("pdf: write")) ||
		bytes.Contains([]byte(err.Error()), []byte("pdf: overlay")) ||
		bytes.Contains([]byte(err.Error()), []byte("pdf: structural")))
}

// FuzzReadPGM checks the renderer-output parser: it never panics and never allocates beyond its pixel bound.
func FuzzReadPGM(f *testing.F) {
	f.Add([]byte("P5\n3 2\n255\n\x00\x01\x02\x03\x04\x05"))
	f.Add([]byte("P5 # comment\n3 2 255 abcdef"))
	f.Add([]byte("P5\n99999 99999\n255\n"))
	f.Add([]byte("P6\n1 1\n255\nabc"))
	f.Fuzz(func(t *testing.T, data []byte) {
		g, err := readPGM(bufio.NewReader(bytes.NewReader(data)), 1<<16)
		if err == nil && (g.Width*g.Height != len(g.Pix) || len(g.Pix) > 1<<16) {
			t.Fatalf("bad page %dx%d with %d samples", g.Width, g.Height, len(g.Pix))
		}
	})
}

// FuzzParse runs the parsing entry point alone (sniff, nesting pre-scan, pdfcpu read within the budgets, the
// refusal checks and validation, as Probe does for an embed) on arbitrary bytes: nothing may panic or hang, and
// every refusal must be typed. It is FuzzOpen without the embed step, fast enough for the long corpus run
// (bench/README.md "PDF fuzzing").
func FuzzParse(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add(s)
	}
	a := &Adapter{Mutool: "/nonexistent/mutool", Limits: Limits{MaxBytes: 1 << 20, MaxPages: 50,
		MaxDecodeBytes: 4 << 20, MaxObjects: 10000, MaxTokens: 200_000, ParseTimeout: 5 * time.Second}}
	src := filepath.Join(f.TempDir(), "in.pdf") // one file per fuzzing process: inputs run one at a time in it
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(src, data, 0o644); err != nil {
			t.Fatal(err)
		}
		doc, err := a.open(context.Background(), src, true)
		if err != nil {
			if CodeOf(err) == "" {
				t.Fatalf("untyped refusal: %v", err)
			}
			return
		}
		if doc.info.Pages < 1 || doc.info.Pages > 50 {
			t.Fatalf("accepted a document with %d pages (limit 50)", doc.info.Pages)
		}
		doc.close()
	})
}
