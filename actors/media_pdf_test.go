package actors_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"filigrane/actors"
	"filigrane/actors/jobstate"
	"filigrane/actors/mediafiles"
	"filigrane/actors/mediakind"
	"filigrane/codec"
	"filigrane/codec/pdf"
	"filigrane/codec/pdf/pdftest"
	"filigrane/persistence/fsblobs"
)

// TestDocumentRequestDecryptsOnceACall: the edge's synchronous detection of an owner-protected PDF (its probe,
// then the detection, each on its own copy of the stored file) runs mutool clean once in each call, for the
// memory estimate and the parse together, where it ran it twice in each (4 times a request). A marked one is
// not decrypted at all: each call reads its mark through mutool show (the detection parses nothing, so
// neither does its estimate nor the probe), where each ran mutool clean for its estimate. The answers are
// unchanged, and neither the job's directory nor the temporary directory keeps a copy. mutool is the real one,
// behind a script that logs each run.
func TestDocumentRequestDecryptsOnceACall(t *testing.T) {
	ctx := context.Background()
	sysTmp := t.TempDir()
	t.Setenv("TMPDIR", sysTmp) // where the decrypted copies are made
	bin := t.TempDir()
	runs := filepath.Join(bin, "runs.log")
	wrapper := filepath.Join(bin, "mutool")
	script := "#!/bin/sh\necho \"$1\" >> '" + runs + "'\nexec mutool \"$@\"\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	plain := filepath.Join(bin, "plain.pdf")
	if err := os.WriteFile(plain, pdftest.Make(pdftest.Doc{Pages: 2}), 0o644); err != nil {
		t.Fatal(err)
	}
	enc := filepath.Join(bin, "owner.pdf")
	if b, err := exec.Command("qpdf", "--encrypt", "", "owner-secret", "256", "--", plain, enc).CombinedOutput(); err != nil {
		t.Fatalf("qpdf: %v: %s", err, b)
	}

	cdc, err := codec.New([]byte(codec.DevelopmentKey))
	if err != nil {
		t.Fatal(err)
	}
	doc := mediafiles.NewPDF(cdc)
	doc.A.Mutool = wrapper
	doc.A.RenderDPI = 36 // small pages: the test counts runs
	blobs, err := fsblobs.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	jobTmp := t.TempDir()
	m := actors.Media{Blobs: blobs, Codec: cdc, Budget: actors.NewDecodeBudget(0), TempDir: jobTmp,
		Files: map[jobstate.Media]mediakind.Adapter{jobstate.MediaDocument: doc}}
	b, err := os.ReadFile(enc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := blobs.Put(ctx, "inputs/owner", bytes.NewReader(b)); err != nil {
		t.Fatal(err)
	}
	kind, _ := mediakind.ByMedia(jobstate.MediaDocument)

	info, perr := m.ProbeStored(ctx, kind, jobstate.OperationDetect, "inputs/owner", time.Second)
	if perr != nil || info.Pages != 2 {
		t.Fatalf("probe: %+v, %+v", info, perr)
	}
	det, perr := m.DetectStoredFile(ctx, kind, "org_1", "inputs/owner", time.Second)
	if perr != nil || det.Watermarked || len(det.Units) != 2 {
		t.Fatalf("detection: %+v, %+v; want 2 unmarked pages", det, perr)
	}
	log, err := os.ReadFile(runs)
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, sub := range strings.Fields(string(log)) {
		count[sub]++
	}
	if count["clean"] != 2 || count["show"] != 2 || count["draw"] < 1 {
		t.Errorf("mutool runs %v; want clean 2 and show 2 (one a call), draw", count)
	}
	assertEmptyDir(t, jobTmp)
	assertEmptyDir(t, sysTmp)

	// The same document marked, then protected.
	id := codec.ID{7}
	marked := filepath.Join(bin, "marked.pdf")
	if _, err := doc.A.Embed(ctx, plain, marked, id, pdf.Options{}); err != nil {
		t.Fatal(err)
	}
	markedEnc := filepath.Join(bin, "marked-owner.pdf")
	if b, err := exec.Command("qpdf", "--encrypt", "", "owner-secret", "256", "--", marked, markedEnc).CombinedOutput(); err != nil {
		t.Fatalf("qpdf: %v: %s", err, b)
	}
	if b, err = os.ReadFile(markedEnc); err != nil {
		t.Fatal(err)
	}
	if _, err := blobs.Put(ctx, "inputs/marked-owner", bytes.NewReader(b)); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(runs, 0); err != nil {
		t.Fatal(err)
	}
	if info, perr := m.ProbeStored(ctx, kind, jobstate.OperationDetect, "inputs/marked-owner", time.Second); perr != nil || info.Pages != 2 {
		t.Fatalf("probe of the marked document: %+v, %+v", info, perr)
	}
	det, perr = m.DetectStoredFile(ctx, kind, "org_1", "inputs/marked-owner", time.Second)
	if perr != nil || !det.Watermarked || det.WatermarkID == nil || *det.WatermarkID != id.String() || len(det.Units) != 2 {
		t.Fatalf("detection of the marked document: %+v, %+v; want %s on 2 pages", det, perr, id)
	}
	if log, err = os.ReadFile(runs); err != nil {
		t.Fatal(err)
	}
	if runs := strings.Fields(string(log)); len(runs) != 2 || runs[0] != "show" || runs[1] != "show" {
		t.Errorf("mutool runs %v for the marked document; want show, show", runs)
	}
	assertEmptyDir(t, jobTmp)
	assertEmptyDir(t, sysTmp)
}
