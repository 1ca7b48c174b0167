package node_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"filigrane/actors"
	"filigrane/codec/pdf/pdftest"
	"filigrane/internal/node"
)

// TestDocumentDecodeBudget: a PDF's parse and analysis are reserved in the node's decode budget (64 MiB here),
// as an image's decode is. With the budget in use, a synchronous detection answers 503 decode_busy with
// Retry-After, whether the memory is missing for its probe or for its detection; a document whose own estimate
// is above the whole budget is refused with 413 document_too_large before it is parsed; none of them is
// charged. A job waits for its memory and succeeds once it is free, and a one-page document, whose
// detection's fixed page memory is reserved up to the whole budget, is detected in the request.
func TestDocumentDecodeBudget(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *node.Config) { c.DecodeMemory = 64 << 20 })
	b := f.n.DecodeBudget()
	url := f.base + "/watermarks/documents/detect"
	bal0, _ := balance(t, f, f.orgA)

	busy := func(what string, hold int64) {
		t.Helper()
		release, err := b.Acquire(context.Background(), hold)
		if err != nil {
			t.Fatal(err)
		}
		r := postFile(t, url, f.keyA, tinyPDF(), "report.pdf", "")
		release()
		if p := decodeProblem(t, r); r.status != 503 || p.Code != "decode_busy" || r.header.Get("Retry-After") != "5" {
			t.Fatalf("%s: %d %+v Retry-After %q", what, r.status, p, r.header.Get("Retry-After"))
		}
	}
	// The whole budget in use: the edge's probe (a parse) waits, then answers busy.
	busy("budget in use at the probe", b.Capacity())
	// One byte in use: the probe's estimate fits, the detection's (reserved up to the whole budget) does not.
	busy("budget in use at the detection", 1)

	// 10,000 tiny objects (a 160 kB file): about 80 MB for the parser's model, more than the whole budget.
	objs := make([]string, 10_000)
	for i := range objs {
		objs[i] = "<< /A 1 >>"
	}
	many := pdftest.Make(pdftest.Doc{Pages: 1, ExtraObjs: objs})
	for _, c := range []struct{ route, data string }{{url, ""}, {f.base + "/watermarks/documents", `{"doc":1}`}} {
		r := postFile(t, c.route, f.keyA, many, "many.pdf", c.data)
		if p := decodeProblem(t, r); r.status != 413 || p.Code != "document_too_large" || !strings.Contains(p.Detail, "decode budget") {
			t.Fatalf("%s, over the budget: %d %+v", c.route, r.status, p)
		}
	}
	if bal, held := balance(t, f, f.orgA); bal != bal0 || held != 0 {
		t.Fatalf("balance %d held %d after the refusals, want %d and 0", bal, held, bal0)
	}

	// A job waits for the memory instead, and succeeds on its first attempt once it is free.
	hold, err := b.Acquire(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	r := postFile(t, url+"/async", f.keyA, tinyPDF(), "report.pdf", "")
	if r.status != 202 {
		hold()
		t.Fatalf("async detect: %d %s", r.status, r.body)
	}
	rc := decodeReceipt(t, r)
	waitReservation(t, b)
	if g := decodeReceipt(t, call(t, "GET", f.base+rc.StatusURL, f.keyA, nil)); g.Status == "succeeded" || g.Status == "failed" {
		hold()
		t.Fatalf("job %s while its memory is held", g.Status)
	}
	hold()
	waitJob(t, f, rc.RequestID, "succeeded")
	if final := decodeReceipt(t, call(t, "GET", f.base+rc.StatusURL, f.keyA, nil)); final.Attempts != 1 {
		t.Fatalf("job %+v, want succeeded on its first attempt", final)
	}

	// The budget is free again: the one-page document is detected, and every reservation was given back.
	if r := postFile(t, url, f.keyA, tinyPDF(), "report.pdf", ""); r.status != 200 {
		t.Fatalf("detection with the budget free: %d %s", r.status, r.body)
	}
	all, err := b.Acquire(context.Background(), b.Capacity())
	if err != nil {
		t.Fatal("budget not released:", err)
	}
	all()
}

// waitReservation polls b until a reservation waits in it, within a bounded time.
func waitReservation(t *testing.T, b *actors.DecodeBudget) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for b.Waiting() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no reservation ever waited in the decode budget")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
