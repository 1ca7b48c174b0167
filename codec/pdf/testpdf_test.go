package pdf

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"filigrane/codec/pdf/pdftest"
)

// The tests build their documents with pdftest (shared with the HTTP API tests); these short names keep the
// many call sites readable.
var (
	buildPDF  = pdftest.Build
	streamObj = pdftest.Stream
	flateObj  = pdftest.Flate
	makeDoc   = pdftest.Make
	textPage  = pdftest.TextPage
)

func writeTemp(t testing.TB, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func bufioReader(b []byte) *bufio.Reader { return bufio.NewReader(bytes.NewReader(b)) }

// drawPage renders page 1 of path with mutool at dpi, in gray, and returns the PGM bytes (150 dpi is what
// detection renders, 96 dpi a screenshot at 100% zoom).
func drawPage(t *testing.T, path string, dpi int) []byte {
	t.Helper()
	out, err := exec.CommandContext(t.Context(), "mutool", "draw", "-q", "-r", fmt.Sprint(dpi), "-c", "gray", "-F", "pgm",
		"-o", "-", path, "1").Output()
	if err != nil {
		t.Fatalf("mutool draw %s: %v", path, err)
	}
	return out
}

// drawGray is drawPage's image, decoded.
func drawGray(t *testing.T, path string, dpi int) grayPage {
	t.Helper()
	g, err := readPGM(bufioReader(drawPage(t, path, dpi)), 1<<26)
	if err != nil {
		t.Fatal(err)
	}
	return g
}
