package pdf

import (
	"bufio"
	"bytes"
	"os"
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
