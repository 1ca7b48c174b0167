package mediafiles_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"filigrane/actors/mediafiles"
	"filigrane/actors/mediakind"
	"filigrane/codec"
	"filigrane/codec/pdf"
	"filigrane/codec/video"
)

// TestRefusalsOfWrongFiles: a file that is not of the kind is a refusal with the kind's code and a sentence
// that names no path (the adapters run on temporary files whose names mean nothing to a client).
func TestRefusalsOfWrongFiles(t *testing.T) {
	if _, err := exec.LookPath("ffprobe"); err != nil {
		t.Fatal("ffprobe is not installed (scripts/setup.sh installs it)")
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "secret-temp-name.bin")
	if err := os.WriteFile(src, []byte("this is plain text, not media"), 0o600); err != nil {
		t.Fatal(err)
	}
	cdc, err := codec.New([]byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		a    mediakind.Adapter
		code string
	}{
		{"video", mediafiles.Video{A: &video.Adapter{Codec: cdc}}, mediafiles.CodeInvalidVideo},
		{"pdf", mediafiles.PDF{A: &pdf.Adapter{Codec: cdc}}, mediafiles.CodeInvalidDocument},
	}
	for _, c := range cases {
		_, err := c.a.Probe(context.Background(), src)
		var ref *mediakind.Refusal
		if !errors.As(err, &ref) || ref.Code != c.code {
			t.Fatalf("%s: probe of text: %v, want a refusal %s", c.name, err, c.code)
		}
		if strings.Contains(ref.Detail, dir) || strings.Contains(ref.Detail, "secret-temp-name") {
			t.Fatalf("%s: detail %q names the temporary file", c.name, ref.Detail)
		}
	}
}
