package pdf

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sync"
	"testing"

	"filigrane/codec/pdf/pdftest"
)

// stepCounter records the costly steps an adapter starts (Adapter.trace).
type stepCounter struct {
	mu    sync.Mutex
	steps map[string]int
}

func countSteps(a *Adapter) *stepCounter {
	c := &stepCounter{steps: map[string]int{}}
	a.trace = func(s string) {
		c.mu.Lock()
		c.steps[s]++
		c.mu.Unlock()
	}
	return c
}

// take returns the steps counted since the last take.
func (c *stepCounter) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.steps
	c.steps = map[string]int{}
	return s
}

// ownerProtected writes the n-page document protected with an owner password only (read for detection through
// its decrypted copy).
func ownerProtected(t *testing.T, dir string, pages int) string {
	t.Helper()
	plain := writeTemp(t, "plain.pdf", makeDoc(pdftest.Doc{Pages: pages}))
	enc := filepath.Join(dir, "owner.pdf")
	if b, err := exec.Command("qpdf", "--encrypt", "", "owner-secret", "256", "--", plain, enc).CombinedOutput(); err != nil {
		t.Fatalf("qpdf: %v: %s", err, b)
	}
	return enc
}

// TestOneRequestMakesEachStepOnce: the calls of one request on one file (the memory estimate, then the probe or
// the detection: the processor's order) scan the file once and decrypt an owner-protected document once, where
// each call used to scan it again and make its own decrypted copy (an owner-protected document's detection
// request ran mutool clean 4 times, 2 in each stored-file call). A detection's estimate first reads the
// structural mark without parsing (mutool show), once for all the calls. Their answers are those of the calls
// made alone, and Close leaves no copy behind.
func TestOneRequestMakesEachStepOnce(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp) // where the decrypted copies are made
	a := testAdapter(t)
	a.Limits.RenderWorkers = 1
	a.RenderDPI = 36 // small pages: the test counts the steps, the detection's answer is compared, not checked
	plain := writeTemp(t, "plain.pdf", makeDoc(pdftest.Doc{Pages: 2}))
	owner := ownerProtected(t, t.TempDir(), 2)
	steps := countSteps(a)
	ctx := t.Context()

	for _, tc := range []struct {
		name   string
		src    string
		detect bool
		want   map[string]int
	}{
		{"plain, embed", plain, false, map[string]int{"scan": 1}},
		{"plain, detect", plain, true, map[string]int{"mutool show": 1, "scan": 1}},
		{"owner-protected, detect", owner, true, map[string]int{"mutool show": 1, "scan": 2, "mutool clean": 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantMem, err := a.EstimateMemory(ctx, tc.src, tc.detect)
			if err != nil {
				t.Fatal(err)
			}
			probe := a.Probe
			if tc.detect {
				probe = a.ProbeDetect
			}
			wantInfo, err := probe(ctx, tc.src)
			if err != nil {
				t.Fatal(err)
			}
			steps.take()

			f := a.Prepare(tc.src)
			mem, err := f.EstimateMemory(ctx, tc.detect)
			if err != nil || mem != wantMem {
				t.Fatalf("estimate %+v, %v; alone %+v", mem, err, wantMem)
			}
			var info Info
			if tc.detect {
				info, err = f.ProbeDetect(ctx)
			} else {
				info, err = f.Probe(ctx)
			}
			if err != nil || info != wantInfo {
				t.Fatalf("probe %+v, %v; alone %+v", info, err, wantInfo)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			if got := steps.take(); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("steps %v, want %v", got, tc.want)
			}
			assertNoCopies(t, tmp)
		})
	}

	// The work call of the same request: the detection of the owner-protected document after its estimate.
	want, err := a.Detect(ctx, owner)
	if err != nil {
		t.Fatal(err)
	}
	steps.take()
	f := a.Prepare(owner)
	if _, err := f.EstimateMemory(ctx, true); err != nil {
		t.Fatal(err)
	}
	got, err := f.DetectReserving(ctx, nil)
	f.Close()
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("detection %+v, %v; alone %+v", got, err, want)
	}
	if s, w := steps.take(), map[string]int{"scan": 2, "mutool clean": 1, "mutool show": 1, "mutool draw": 1}; !reflect.DeepEqual(s, w) {
		t.Errorf("estimate and detection: steps %v, want %v", s, w)
	}
	assertNoCopies(t, tmp)
}

// TestPreparedFileFollowsItsInput: what a File reuses was made from the input as it is: a file replaced between
// two calls is scanned and decrypted again, and the answers are the new file's.
func TestPreparedFileFollowsItsInput(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	a := testAdapter(t)
	dir := t.TempDir()
	src := ownerProtected(t, dir, 2)
	steps := countSteps(a)
	ctx := t.Context()
	f := a.Prepare(src)
	defer f.Close()
	before, err := f.EstimateMemory(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(ownerProtected(t, t.TempDir(), 3), src); err != nil {
		t.Fatal(err)
	}
	steps.take()
	info, err := f.ProbeDetect(ctx)
	if err != nil || info.Pages != 3 {
		t.Fatalf("probe of the replaced file: %+v, %v; want 3 pages", info, err)
	}
	if got, want := steps.take(), map[string]int{"mutool show": 1, "scan": 2, "mutool clean": 1}; !reflect.DeepEqual(got, want) {
		t.Errorf("steps %v, want %v", got, want)
	}
	after, err := f.EstimateMemory(ctx, true)
	if err != nil || after == before || after.Size == before.Size {
		t.Fatalf("estimate of the replaced file %+v, %v; of the first %+v", after, err, before)
	}
}

// TestMarkedOwnerProtectedDetectionDecryptsNothing: a detection request on a marked document protected by an
// owner password (the edge's estimate and probe on its copy, then the estimate and detection on the worker's)
// reads the structural mark through mutool show, once on each copy, and neither decrypts (mutool clean) nor
// scans nor parses it: each stored-file call made its own decrypted copy before. The estimate is what one
// operation holds whatever the file, with no page to analyse; the probe counts the pages, and the detection
// finds the id.
func TestMarkedOwnerProtectedDetectionDecryptsNothing(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	a := testAdapter(t)
	ctx := t.Context()
	id := testID("owner-protected")
	marked := filepath.Join(t.TempDir(), "marked.pdf")
	if _, err := a.Embed(ctx, writeTemp(t, "plain.pdf", makeDoc(pdftest.Doc{Pages: 2})), marked, id, Options{}); err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(t.TempDir(), "owner.pdf")
	if b, err := exec.Command("qpdf", "--encrypt", "", "owner-secret", "256", "--", marked, src).CombinedOutput(); err != nil {
		t.Fatalf("qpdf: %v: %s", err, b)
	}
	steps := countSteps(a)

	edge := a.Prepare(src)
	mem, err := edge.EstimateMemory(ctx, true)
	if err != nil || mem.Bytes != memoryBase || mem.File != memoryBase || mem.Page != 0 {
		t.Fatalf("estimate %+v, %v; want %d, no page", mem, err, memoryBase)
	}
	info, err := edge.ProbeDetect(ctx)
	if err != nil || info.Pages != 2 || !info.Marked || info.MarkedID != id {
		t.Fatalf("probe %+v, %v; want 2 pages marked %s", info, err, id)
	}
	edge.Close()
	worker := a.Prepare(src)
	if _, err := worker.EstimateMemory(ctx, true); err != nil {
		t.Fatal(err)
	}
	d, err := worker.DetectReserving(ctx, nil)
	worker.Close()
	if err != nil || !d.Watermarked || d.WatermarkID == nil || *d.WatermarkID != id.String() || len(d.Units) != 2 {
		t.Fatalf("detection %+v, %v; want %s on 2 pages", d, err, id)
	}
	if got, want := steps.take(), map[string]int{"mutool show": 2}; !reflect.DeepEqual(got, want) {
		t.Errorf("steps %v, want %v", got, want)
	}
	assertNoCopies(t, tmp)
}

func assertNoCopies(t *testing.T, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 0 {
		t.Fatalf("left in the temporary directory: %v", ents)
	}
}
