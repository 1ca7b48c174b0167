package pdf

import (
	"bytes"
	"context"
	"errors"
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
