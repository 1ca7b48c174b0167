package pdf

import (
	"testing"
)

// TestEstimateMemory: the estimate grows with the objects the parser will read, counts a detection's pages
// under analysis apart from the file's part, and refuses what the parse would refuse, with its code, before
// anything is parsed.
func TestEstimateMemory(t *testing.T) {
	a := &Adapter{Limits: Limits{MaxObjects: 5000, RenderWorkers: 2}}
	small := writeTemp(t, "small.pdf", tinyObjects(10))
	large := writeTemp(t, "large.pdf", tinyObjects(4000))
	s, err := a.EstimateMemory(small, false)
	if err != nil {
		t.Fatal(err)
	}
	l, err := a.EstimateMemory(large, true)
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
	if _, err := a.EstimateMemory(writeTemp(t, "over.pdf", tinyObjects(5001)), false); CodeOf(err) != CodeTooLarge {
		t.Fatalf("5,001 objects: %v, want %s", err, CodeTooLarge)
	}
}
