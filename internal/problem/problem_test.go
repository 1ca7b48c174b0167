package problem

import (
	"bytes"
	"flag"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"testing"
)

var update = flag.Bool("update", false, "rewrite docs/errors.md from the table")

const docPath = "../../docs/errors.md"

// TestErrorsDocMatchesTable: docs/errors.md is exactly what the table and errors.md.tmpl generate.
func TestErrorsDocMatchesTable(t *testing.T) {
	var want bytes.Buffer
	if err := WriteDoc(&want); err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(docPath, want.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("docs/errors.md differs from the error table (internal/problem); edit problem.go or "+
			"errors.md.tmpl, then regenerate it with:\n  go generate ./internal/problem\n%s",
			firstDifference(got, want.Bytes()))
	}
}

func firstDifference(got, want []byte) string {
	g, w := bytes.Split(got, []byte("\n")), bytes.Split(want, []byte("\n"))
	for i := 0; i < len(g) || i < len(w); i++ {
		var gl, wl []byte
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if !bytes.Equal(gl, wl) {
			return "first difference at line " + strconv.Itoa(i+1) + ":\n  file:  " + string(gl) + "\n  table: " + string(wl)
		}
	}
	return ""
}

var codeSyntax = regexp.MustCompile(`^[a-z][a-z0-9_]*[a-z0-9]$`)

// TestEveryEntryIsComplete: every code is well formed and listed once, with an HTTP error status, a title and a documented cause.
func TestEveryEntryIsComplete(t *testing.T) {
	seen := map[Code]bool{}
	for _, e := range All() {
		if !codeSyntax.MatchString(string(e.Code)) {
			t.Errorf("code %q: not lower snake case", e.Code)
		}
		if seen[e.Code] {
			t.Errorf("code %q: listed twice", e.Code)
		}
		seen[e.Code] = true
		if e.Status < 400 || e.Status > 599 || http.StatusText(e.Status) == "" {
			t.Errorf("code %q: status %d is not an HTTP error status", e.Code, e.Status)
		}
		if e.Title == "" || e.When == "" {
			t.Errorf("code %q: missing title or when", e.Code)
		}
		if got, ok := Lookup(e.Code); !ok || got != e {
			t.Errorf("Lookup(%q) = %+v, %v", e.Code, got, ok)
		}
	}
	if _, ok := Lookup("no_such_code"); ok {
		t.Error("Lookup found a code the table lacks")
	}
}

// TestJobCodesMapToTheirStatus: a failed job's error code answers its own entry's status; an unknown code
// (a worker's code the table lacks) and a code that is not a job code answer processing_error's 500.
func TestJobCodesMapToTheirStatus(t *testing.T) {
	jobs := 0
	for _, e := range All() {
		if !e.Job {
			continue
		}
		jobs++
		if got := ForJob(string(e.Code)); got.Code != e.Code || got.Status != e.Status {
			t.Errorf("ForJob(%q) = %s %d, want %s %d", e.Code, got.Code, got.Status, e.Code, e.Status)
		}
	}
	if jobs == 0 {
		t.Fatal("the table has no job error codes")
	}
	for _, code := range []string{"", "gpu_exploded", string(NotFound)} {
		if got := ForJob(code); got.Code != ProcessingError || got.Status != 500 {
			t.Errorf("ForJob(%q) = %s %d, want processing_error 500", code, got.Code, got.Status)
		}
	}
	if got := ForJob(string(ImageTooLarge)); got.Status != 413 {
		t.Errorf("ForJob(image_too_large) status = %d, want 413", got.Status)
	}
}
