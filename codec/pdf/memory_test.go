package pdf

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"filigrane/codec/pdf/pdftest"
)

// TestEstimateMemory: the estimate grows with the objects the parser will read, counts a detection's pages
// under analysis apart from the file's part, and refuses what the parse would refuse, with its code, before
// anything is parsed.
func TestEstimateMemory(t *testing.T) {
	a := &Adapter{Limits: Limits{MaxObjects: 5000, RenderWorkers: 2}}
	small := writeTemp(t, "small.pdf", tinyObjects(10))
	large := writeTemp(t, "large.pdf", tinyObjects(4000))
	s, err := a.EstimateMemory(t.Context(), small, false)
	if err != nil {
		t.Fatal(err)
	}
	l, err := a.EstimateMemory(t.Context(), large, true)
	if err != nil {
		t.Fatal(err)
	}
	// 2.8 kB a tiny object was measured (bench/pdfmem).
	if l.Objects < 4000 || l.File-s.File < 3990*2800 {
		t.Fatalf("estimates %+v and %+v: the objects' memory is not counted", s, l)
	}
	if s.Bytes != s.File || l.Bytes-l.File != 2*pageMemory(DefaultLimits().RenderMaxPixels*9/8) {
		t.Fatalf("estimates %+v (embed) and %+v (detect): the pages under analysis are not counted apart", s, l)
	}
	if _, err := a.EstimateMemory(t.Context(), writeTemp(t, "over.pdf", tinyObjects(5001)), false); CodeOf(err) != CodeTooLarge {
		t.Fatalf("5,001 objects: %v, want %s", err, CodeTooLarge)
	}
}

// TestEstimateMemoryCountsTokens: the parser builds an object of each token of an array, which costs far more
// than the token's bytes (38 bytes a byte for an object stream of empty arrays, bench/pdfmem), so a file of
// dense tokens is estimated above one of the same size holding a string, in the file and in object streams.
func TestEstimateMemoryCountsTokens(t *testing.T) {
	a := &Adapter{}
	page := []string{"<< /Type /Catalog /Pages 2 0 R >>", "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
		"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Junk 4 0 R >>"}
	const n = 1 << 20
	estimate := func(name string, junk []byte) Memory {
		t.Helper()
		m, err := a.EstimateMemory(t.Context(), writeTemp(t, name, pdftest.Build(append(page, string(junk)), "/Root 1 0 R")), false)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	str := estimate("string.pdf", append(append([]byte("("), bytes.Repeat([]byte("a"), n)...), ')'))
	arrays := estimate("arrays.pdf", append(append([]byte("["), bytes.Repeat([]byte("[]"), n/2)...), ']'))
	if arrays.Tokens < n || arrays.File-str.File < 35*n {
		t.Fatalf("1 MB of empty arrays: %+v, of a string: %+v; want 38 bytes a byte more", arrays, str)
	}
	inflated := estimate("objstm.pdf", []byte(pdftest.Flate("/Type /ObjStm /N 1 /First 4",
		append([]byte("5 0 "), bytes.Repeat([]byte("[]"), n/2)...))))
	if inflated.Tokens < n || inflated.File-str.File < 35*n {
		t.Fatalf("an object stream inflating to 1 MB of empty arrays: %+v, a string: %+v", inflated, str)
	}
}

// TestDetectReservesEachPage: a detection by rendering reserves each page's memory at that page's size as it
// arrives and gives it back once the page is analysed (at most one page a render worker at a time); a
// reservation that fails ends the detection with its error.
func TestDetectReservesEachPage(t *testing.T) {
	a := testAdapter(t)
	a.Limits.RenderWorkers = 2
	src := writeTemp(t, "small.pdf", pdftest.Make(pdftest.Doc{Pages: 3, MediaBox: "[0 0 144 216]"}))
	var mu sync.Mutex
	var sizes []int64
	held, most := 0, 0
	reserve := func(_ context.Context, n int64) (func(), error) {
		mu.Lock()
		defer mu.Unlock()
		sizes = append(sizes, n)
		held++
		most = max(most, held)
		return func() {
			mu.Lock()
			held--
			mu.Unlock()
		}, nil
	}
	if _, err := a.DetectReserving(context.Background(), src, reserve); err != nil {
		t.Fatal(err)
	}
	// 2×3 inches at 150 dpi: 300×450 pixels.
	if want := PageMemory(300, 450); len(sizes) != 3 || sizes[0] != want || sizes[1] != want || sizes[2] != want || held != 0 || most > 2 {
		t.Fatalf("reserved %v (want 3 × %d), %d still held, at most %d at once", sizes, want, held, most)
	}

	full := errors.New("no memory for the page")
	_, err := a.DetectReserving(context.Background(), src, func(context.Context, int64) (func(), error) { return nil, full })
	if !errors.Is(err, full) {
		t.Fatalf("a reservation that fails: %v", err)
	}
}

// TestEstimateMemoryCountsMetadata: an embed's and a probe's estimate counts what the metadata streams decode
// to, 8 bytes a byte (the validation decodes and parses the catalog's, the edits decode and copy each:
// metadata.go), Flate-compressed or stored as they are, each up to what the edits read of one (4 MiB) and all up
// to what they read in all (36 MiB); a detection, which reads none, counts none of it.
func TestEstimateMemoryCountsMetadata(t *testing.T) {
	a := &Adapter{}
	packet := func(n int) []byte {
		return []byte("<x:xmpmeta xmlns:x='adobe:ns:meta/'>" + strings.Repeat(" ", n) + "</x:xmpmeta>")
	}
	estimate := func(name string, detect bool, streams ...string) Memory {
		t.Helper()
		objs := append([]string{"<< /Type /Catalog /Pages 2 0 R /Metadata 4 0 R >>", "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
			"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] >>"}, streams...)
		m, err := a.EstimateMemory(t.Context(), writeTemp(t, name, pdftest.Build(objs, "/Root 1 0 R")), detect)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	small := estimate("small.pdf", false, pdftest.Flate("/Type /Metadata /Subtype /XML", packet(100)))
	const n = 2 << 20
	flate := estimate("flate.pdf", false, pdftest.Flate("/Type /Metadata /Subtype /XML", packet(n)))
	if flate.Metadata < n || flate.File-small.File < 8*(n-100) {
		t.Fatalf("2 MiB of metadata in a Flate stream: %+v, against %+v without", flate, small)
	}
	// A stream without /Type, its /Subtype alone saying it is XMP.
	plain := estimate("plain.pdf", false, pdftest.Stream("/Subtype /XML", packet(n)))
	if plain.Metadata < n || plain.File-small.File < 16*(n-100) { // and 8 a byte of the file, which holds it
		t.Fatalf("2 MiB of metadata stored as it is: %+v, against %+v without", plain, small)
	}
	if d := estimate("flate.pdf", true, pdftest.Flate("/Type /Metadata /Subtype /XML", packet(n))); d.Metadata != 0 ||
		d.File != flate.File-8*flate.Metadata {
		t.Fatalf("detection %+v counts the metadata (embed: %+v)", d, flate)
	}
	over := pdftest.Flate("/Type /Metadata /Subtype /XML", packet(maxXMPBytes))
	if one := estimate("over.pdf", false, over); one.Metadata != maxXMPBytes+1 {
		t.Fatalf("a stream over 4 MiB counts %d, want %d", one.Metadata, maxXMPBytes+1)
	}
	if ten := estimate("ten.pdf", false, slices.Repeat([]string{over}, 10)...); ten.Metadata != maxMetadataBytes {
		t.Fatalf("ten streams over 4 MiB count %d, want %d", ten.Metadata, maxMetadataBytes)
	}
}
