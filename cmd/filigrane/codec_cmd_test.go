package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"image"
	"image/color"
	"image/png"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"filigrane/codec"
)

// runCLI runs the binary's dispatcher in-process.
func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

// runCLIProcess runs the binary as a process of its own (this test binary running main: TestMain) with env
// added to this process's environment: for a command that reads a variable, in a test that must not set it
// in its own process (t.Setenv would keep the test from running in parallel).
func runCLIProcess(t *testing.T, env []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	cmd := exec.CommandContext(t.Context(), exe, args...)
	cmd.Env = append(os.Environ(), env...) // the last value of a name wins
	cmd.Stdout, cmd.Stderr = &out, &errb
	var exit *exec.ExitError
	switch err := cmd.Run(); {
	case err == nil:
	case errors.As(err, &exit):
		code = exit.ExitCode()
	default:
		t.Fatalf("run %v: %v", args, err)
	}
	return code, out.String(), errb.String()
}

// texture is a photo-like test image: smooth shapes plus fine grain, so a luma mark has somewhere to hide.
func texture(w, h int, seed uint64) *image.NRGBA {
	rng := rand.New(rand.NewPCG(seed, 1))
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	fx, fy := 3+rng.Float64()*4, 2+rng.Float64()*4
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			u, v := float64(x)/float64(w), float64(y)/float64(h)
			base := 110 + 60*math.Sin(2*math.Pi*fx*u)*math.Cos(2*math.Pi*fy*v) + 30*u
			n := rng.NormFloat64() * 8
			c := func(off float64) uint8 { return uint8(max(0, min(255, base+off+n))) }
			img.SetNRGBA(x, y, color.NRGBA{c(20), c(0), c(-25), 255})
		}
	}
	return img
}

func writeTestPNG(t *testing.T, path string, img image.Image) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := png.Encode(f, img); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestCodecCLIUsageErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	in := filepath.Join(dir, "in.png")
	writeTestPNG(t, in, texture(64, 64, 1))
	text := filepath.Join(dir, "notes.txt")
	os.WriteFile(text, []byte("not an image"), 0o644)
	shortKey := filepath.Join(dir, "short.key")
	os.WriteFile(shortKey, []byte("tooshort\n"), 0o600)
	out := filepath.Join(dir, "out.png")

	for _, tc := range []struct {
		name    string
		args    []string
		code    int
		message string
	}{
		{"no subcommand", []string{"codec"}, 2, "usage"},
		{"unknown subcommand", []string{"codec", "frobnicate"}, 2, "unknown subcommand"},
		{"missing data", []string{"codec", "embed", in, out}, 2, "--data is required"},
		{"bad json", []string{"codec", "embed", "--data", "{nope", in, out}, 2, "JSON object"},
		{"empty object", []string{"codec", "embed", "--data", "{}", in, out}, 2, "non-empty"},
		{"array", []string{"codec", "embed", "--data", "[1,2]", in, out}, 2, "JSON object"},
		{"null", []string{"codec", "embed", "--data", "null", in, out}, 2, "JSON object"},
		{"too big", []string{"codec", "embed", "--data", `{"a":"` + strings.Repeat("x", 9000) + `"}`, in, out}, 2, "more than"},
		{"missing out", []string{"codec", "embed", "--data", `{"a":1}`, in}, 2, "want IN and OUT.png"},
		{"unknown output format", []string{"codec", "embed", "--data", `{"a":1}`, in, filepath.Join(dir, "o.gif")}, 2, "*.png, *.jpg or *.webp"},
		{"strength out of range", []string{"codec", "embed", "--data", `{"a":1}`, "--strength", "9", in, out}, 2, "--strength 9 outside"},
		{"psnr too low", []string{"codec", "embed", "--data", `{"a":1}`, "--psnr", "20", in, out}, 2, "--psnr"},
		{"short key", []string{"codec", "embed", "--key-file", shortKey, "--data", `{"a":1}`, in, out}, 2, "invalid key"},
		{"missing key file", []string{"codec", "detect", "--key-file", filepath.Join(dir, "nope"), in}, 2, "key file"},
		{"unreadable input", []string{"codec", "embed", "--data", `{"a":1}`, filepath.Join(dir, "missing.png"), out}, 1, "no such file"},
		{"unsupported input", []string{"codec", "embed", "--data", `{"a":1}`, text, out}, 1, "unsupported image format"},
		{"detect unsupported", []string{"codec", "detect", text}, 1, "unsupported image format"},
		{"detect no args", []string{"codec", "detect"}, 2, "want one input"},
		{"pixel limit", []string{"codec", "detect", "--max-pixels", "100", in}, 1, "too many pixels"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runCLI(t, tc.args...)
			if code != tc.code || !strings.Contains(stderr, tc.message) {
				t.Fatalf("exit %d (want %d), stderr %q (want %q)", code, tc.code, stderr, tc.message)
			}
		})
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Fatal("a failed embed left an output file")
	}
}

// TestCodecCLIEmbedDetect: embed and detect with the key from a file. Parallel (the key from the environment is
// TestCodecCLIKeyFromEnvironment's).
func TestCodecCLIEmbedDetect(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	in := filepath.Join(dir, "photo.png")
	writeTestPNG(t, in, texture(768, 512, 3))
	key := filepath.Join(dir, "deploy.key")
	os.WriteFile(key, []byte("0123456789abcdef0123456789abcdef\n"), 0o600)
	out := filepath.Join(dir, "marked.png")
	data := `{"user": "alice", "order": 42}`
	want, err := codec.IDFromJSON([]byte(data))
	if err != nil {
		t.Fatal(err)
	}

	code, stdout, stderr := runCLI(t, "codec", "embed", "--data", data, "--key-file", key, in, out)
	if code != 0 {
		t.Fatalf("embed exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "watermark_id: "+want.String()) || !strings.Contains(stdout, "psnr: ") {
		t.Fatalf("embed output %q", stdout)
	}

	detect := func(args ...string) codec.Detection {
		t.Helper()
		code, stdout, stderr := runCLI(t, append([]string{"codec", "detect"}, args...)...)
		if code != 0 {
			t.Fatalf("detect exit %d: %s", code, stderr)
		}
		var raw map[string]json.RawMessage
		if err := json.Unmarshal([]byte(stdout), &raw); err != nil {
			t.Fatalf("detect output is not JSON: %v\n%s", err, stdout)
		}
		for _, field := range []string{"watermarked", "confidence", "watermark_id", "units"} {
			if _, ok := raw[field]; !ok {
				t.Fatalf("detect output lacks %q: %s", field, stdout)
			}
		}
		var d codec.Detection
		json.Unmarshal([]byte(stdout), &d)
		return d
	}
	d := detect("--key-file", key, out)
	if !d.Watermarked || d.WatermarkID == nil || *d.WatermarkID != want.String() {
		t.Fatalf("marked file: %+v", d)
	}
	if d := detect("--key-file", key, in); d.Watermarked || d.WatermarkID != nil {
		t.Fatalf("unmarked file detected: %+v", d)
	}
	// --data @FILE with flags after the positional arguments, and --json output.
	dataFile := filepath.Join(dir, "data.json")
	os.WriteFile(dataFile, []byte(`{"order": 42, "user": "alice"}`), 0o644) // same object, other key order
	code, stdout, stderr = runCLI(t, "codec", "embed", in, filepath.Join(dir, "again.png"), "--data", "@"+dataFile, "--json", "--psnr", "40")
	if code != 0 {
		t.Fatalf("embed --json exit %d: %s", code, stderr)
	}
	var res struct {
		WatermarkID string  `json:"watermark_id"`
		PSNR        float64 `json:"psnr"`
	}
	if err := json.Unmarshal([]byte(stdout), &res); err != nil || res.WatermarkID != want.String() || res.PSNR < 39 {
		t.Fatalf("embed --json: %v %+v", err, res)
	}

	// JPEG output: a real JPEG file from which the mark reads back.
	outJPEG := filepath.Join(dir, "marked.jpg")
	if code, _, stderr := runCLI(t, "codec", "embed", "--data", data, "--key-file", key, in, outJPEG); code != 0 {
		t.Fatalf("embed to JPEG exit %d: %s", code, stderr)
	}
	if head, _ := os.ReadFile(outJPEG); len(head) < 3 || head[0] != 0xFF || head[1] != 0xD8 {
		t.Fatal("OUT.jpg is not a JPEG file")
	}
	if d := detect("--key-file", key, outJPEG); !d.Watermarked || *d.WatermarkID != want.String() {
		t.Fatalf("marked JPEG: %+v", d)
	}
}

// TestCodecCLIKeyFromEnvironment: without --key-file, the key comes from FILIGRANE_CODEC_KEY; unset, the
// development key is used, which does not read the mark. Not parallel: it sets the environment.
func TestCodecCLIKeyFromEnvironment(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "photo.png")
	writeTestPNG(t, in, texture(384, 256, 5))
	key := filepath.Join(dir, "deploy.key")
	if err := os.WriteFile(key, []byte("0123456789abcdef0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "marked.png")
	if code, _, stderr := runCLI(t, "codec", "embed", "--data", `{"env":1}`, "--key-file", key, in, out); code != 0 {
		t.Fatalf("embed exit %d: %s", code, stderr)
	}
	detect := func() codec.Detection {
		t.Helper()
		code, stdout, stderr := runCLI(t, "codec", "detect", out)
		var d codec.Detection
		if err := json.Unmarshal([]byte(stdout), &d); code != 0 || err != nil {
			t.Fatalf("detect exit %d (%v): %s", code, err, stderr)
		}
		return d
	}
	want, _ := codec.IDFromJSON([]byte(`{"env":1}`))
	t.Setenv("FILIGRANE_CODEC_KEY", "0123456789abcdef0123456789abcdef")
	if d := detect(); !d.Watermarked || d.WatermarkID == nil || *d.WatermarkID != want.String() {
		t.Fatalf("key from the environment not used: %+v", d)
	}
	t.Setenv("FILIGRANE_CODEC_KEY", "")
	if d := detect(); d.Watermarked {
		t.Fatal("a different key detected the mark")
	}
}

func TestBenchCodecCommand(t *testing.T) {
	t.Parallel()
	if code, _, stderr := runCLI(t, "bench"); code != 2 || !strings.Contains(stderr, "usage") {
		t.Fatalf("bench without a benchmark: %d %q", code, stderr)
	}
	if code, _, _ := runCLI(t, "bench", "codec", "--bogus"); code != 2 {
		t.Fatal("unknown flag accepted")
	}
	if code, _, stderr := runCLI(t, "bench", "codec", "--attacks", "jpeg50,nope", "--synthetic", "1"); code != 2 || !strings.Contains(stderr, "unknown attack") {
		t.Fatalf("unknown attack: %d %q", code, stderr)
	}
	out := t.TempDir()
	code, stdout, stderr := runCLI(t, "bench", "codec", "--synthetic", "1", "--quick", "--false-positives", "2",
		"--speed=false", "--attacks", "clean,jpeg50,crop0.71", "--out", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "## Robustness") {
		t.Fatalf("no summary printed: %s", stdout)
	}
	for _, f := range []string{"report.json", "report.md", "chart.png"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Fatal(err)
		}
	}
}
