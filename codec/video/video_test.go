package video

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"filigrane/codec"
)

// The tests run the real ffmpeg on short clips generated here (testsrc2 with a sine tone, small frames).

func requireFFmpeg(t testing.TB) {
	t.Helper()
	for _, tool := range []string{"ffmpeg", "ffprobe"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed: run scripts/setup.sh (the video tests need the real ffmpeg)", tool)
		}
	}
}

func testAdapter(t testing.TB) *Adapter {
	t.Helper()
	requireFFmpeg(t)
	c, err := codec.New([]byte("video adapter test key, 32 bytes"))
	if err != nil {
		t.Fatal(err)
	}
	return &Adapter{Codec: c}
}

// ffmpegRun runs ffmpeg with args and fails the test with its stderr.
func ffmpegRun(t testing.TB, args ...string) {
	t.Helper()
	cmd := exec.Command("ffmpeg", append([]string{"-nostdin", "-v", "error", "-y"}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("ffmpeg %s: %v: %s", strings.Join(args, " "), err, stderr.String())
	}
}

// makeClip writes a clip of testsrc2 and a sine tone: size like "384x288", seconds long, at rate fps, with extra
// output args (codec, metadata) appended before the file name.
func makeClip(t testing.TB, path, size, rate string, seconds string, extra ...string) {
	t.Helper()
	args := []string{"-f", "lavfi", "-i", "testsrc2=size=" + size + ":rate=" + rate + ":duration=" + seconds,
		"-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000:duration=" + seconds}
	if len(extra) == 0 {
		extra = []string{"-c:v", "libx264", "-preset", "veryfast", "-crf", "20", "-pix_fmt", "yuv420p"}
	}
	args = append(args, extra...)
	args = append(args, "-c:a", "aac", "-b:a", "96k", path)
	ffmpegRun(t, args...)
}

func testID(b byte) codec.ID {
	var id codec.ID
	for i := range id {
		id[i] = b ^ byte(i*37)
	}
	return id
}

func requireID(t *testing.T, d codec.Detection, id codec.ID, what string) {
	t.Helper()
	if !d.Watermarked || d.WatermarkID == nil || *d.WatermarkID != id.String() {
		got := "nil"
		if d.WatermarkID != nil {
			got = *d.WatermarkID
		}
		t.Fatalf("%s: id not recovered: watermarked %v, confidence %.3f, id %s, units %+v", what, d.Watermarked,
			d.Confidence, got, d.Units)
	}
}

func TestEmbedDetectRoundTrip(t *testing.T) {
	a := testAdapter(t)
	dir := t.TempDir()
	src := filepath.Join(dir, "src.mp4")
	makeClip(t, src, "384x288", "25", "3")
	dst := filepath.Join(dir, "out.mp4")
	id := testID(1)
	rep, err := a.Embed(context.Background(), src, dst, id, Options{Preset: "veryfast"})
	if err != nil {
		t.Fatal(err)
	}
	if rep.FrameCount != 75 {
		t.Errorf("frame_count %d, want 75", rep.FrameCount)
	}
	d, err := a.Detect(context.Background(), dst)
	if err != nil {
		t.Fatal(err)
	}
	requireID(t, d, id, "output")
	if len(d.Units) != 3 {
		t.Errorf("%d units, want one per second (3)", len(d.Units))
	}
	clean, err := a.Detect(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	if clean.Watermarked {
		t.Errorf("unmarked source detected as watermarked: %+v", clean)
	}
}

func TestErrorsTyped(t *testing.T) {
	a := testAdapter(t)
	dir := t.TempDir()
	text := filepath.Join(dir, "notes.mp4")
	if err := os.WriteFile(text, []byte("this is not a video at all\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	audio := filepath.Join(dir, "audio.mp4")
	ffmpegRun(t, "-f", "lavfi", "-i", "sine=duration=1", "-c:a", "aac", audio)
	src := filepath.Join(dir, "src.mp4")
	makeClip(t, src, "320x256", "25", "2")
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	cut := filepath.Join(dir, "cut.mp4")
	if err := os.WriteFile(cut, data[:len(data)/2], 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		file string
		want error
	}{{text, ErrNotVideo}, {audio, ErrNoVideoStream}, {cut, ErrTruncated}} {
		_, err := a.Embed(context.Background(), c.file, filepath.Join(dir, "o.mp4"), testID(2), Options{})
		if !errors.Is(err, c.want) {
			t.Errorf("embed %s: error %v, want %v", filepath.Base(c.file), err, c.want)
		}
		_, err = a.Detect(context.Background(), c.file)
		if !errors.Is(err, c.want) {
			t.Errorf("detect %s: error %v, want %v", filepath.Base(c.file), err, c.want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "o.mp4")); !os.IsNotExist(err) {
		t.Errorf("a failed embed left its output: %v", err)
	}
}
