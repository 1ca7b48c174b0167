package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pdfcpu/pdfcpu/pkg/api"

	"filigrane/codec"
)

func TestCodecCLIPDFEmbedDetect(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("mutool"); err != nil {
		t.Skip("mutool is not installed")
	}
	dir := t.TempDir()
	img := filepath.Join(dir, "page.png")
	writeTestPNG(t, img, texture(600, 800, 7))
	in := filepath.Join(dir, "in.pdf")
	if err := api.ImportImagesFile([]string{img}, in, nil, nil); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out.pdf")
	data := `{"doc":"cli-pdf"}`
	want, err := codec.IDFromJSON([]byte(data))
	if err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCLI(t, "codec", "embed", "--data", data, in, out)
	if code != 0 {
		t.Fatalf("embed exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "watermark_id: "+want.String()) || !strings.Contains(stdout, "pages: 1") {
		t.Fatalf("embed output: %q", stdout)
	}
	for _, args := range [][]string{{"codec", "detect", out}, {"codec", "detect", "--rendered", out}} {
		code, stdout, stderr = runCLI(t, args...)
		if code != 0 {
			t.Fatalf("%v exit %d: %s", args, code, stderr)
		}
		var d codec.Detection
		if err := json.Unmarshal([]byte(stdout), &d); err != nil {
			t.Fatal(err)
		}
		if !d.Watermarked || d.WatermarkID == nil || *d.WatermarkID != want.String() || len(d.Units) != 1 {
			t.Fatalf("%v: %s", args, stdout)
		}
	}
}

func TestCodecCLIPDFRefusals(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fake := filepath.Join(dir, "fake.pdf")
	writeTestPNG(t, fake, texture(300, 300, 1))
	code, _, stderr := runCLI(t, "codec", "embed", "--data", `{"a":1}`, fake, filepath.Join(dir, "out.pdf"))
	if code != 1 || !strings.Contains(stderr, "not a PDF (it is a PNG image)") {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "out.pdf")); !os.IsNotExist(err) {
		t.Fatal("output written for a refused input")
	}
	code, _, stderr = runCLI(t, "codec", "embed", "--data", `{"a":1}`, fake, filepath.Join(dir, "out.png"))
	if code != 2 || !strings.Contains(stderr, "name the output *.pdf") {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	code, _, stderr = runCLI(t, "codec", "embed", "--data", `{"a":1}`, "--darkening", "20", fake, filepath.Join(dir, "o.pdf"))
	if code != 2 || !strings.Contains(stderr, "--darkening") {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
}
