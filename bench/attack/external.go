package attack

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/draw"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/image/webp"
)

// FFmpegAvailable reports whether the ffmpeg binary used by the external-encoder attacks is on PATH.
func FFmpegAvailable() bool {
	_, err := exec.LookPath("ffmpeg")
	return err == nil
}

// WebP re-encodes through libwebp (ffmpeg's libwebp encoder, lossy, quality q) and decodes the result with
// golang.org/x/image/webp: a second, widely deployed lossy codec next to Go's JPEG encoder.
func WebP(img *image.NRGBA, q int) (*image.NRGBA, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	b := img.Bounds()
	// The WebP muxer patches the RIFF size after writing, which a pipe does not allow: write to a file.
	dir, err := os.MkdirTemp("", "filigrane-webp-")
	if err != nil {
		return nil, fmt.Errorf("webp q%d: %w", q, err)
	}
	defer os.RemoveAll(dir)
	outPath := filepath.Join(dir, "out.webp")
	cmd := exec.CommandContext(ctx, "ffmpeg", "-loglevel", "error", "-f", "rawvideo", "-pix_fmt", "rgba",
		"-s", fmt.Sprintf("%dx%d", b.Dx(), b.Dy()), "-i", "pipe:0",
		"-frames:v", "1", "-c:v", "libwebp", "-quality", strconv.Itoa(q), "-f", "webp", outPath)
	var errb bytes.Buffer
	cmd.Stdin = bytes.NewReader(img.Pix)
	cmd.Stderr = &errb
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("webp q%d: ffmpeg: %v: %s", q, err, bytes.TrimSpace(errb.Bytes()))
	}
	out, err := os.ReadFile(outPath)
	if err != nil {
		return nil, fmt.Errorf("webp q%d: %w", q, err)
	}
	dec, err := webp.Decode(bytes.NewReader(out))
	if err != nil {
		return nil, fmt.Errorf("webp q%d: %w", q, err)
	}
	dst := image.NewNRGBA(image.Rect(0, 0, dec.Bounds().Dx(), dec.Bounds().Dy()))
	draw.Draw(dst, dst.Bounds(), dec, dec.Bounds().Min, draw.Src)
	return dst, nil
}
