package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"filigrane/codec"
)

// TestCodecCLIVideo embeds into an MP4 through the CLI, detects the id back, and reports a non-video file with a
// clear message and exit status 1.
func TestCodecCLIVideo(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("ffmpeg"); err != nil {
		t.Fatal("ffmpeg is not installed: run scripts/setup.sh (the video CLI test needs the real ffmpeg)")
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "in.mp4")
	// Frames of a whole tile (256-pixel short side): under it the embed also reads its mark back (codec/video's
	// TestSmallFrames), a detection more that this test of the CLI does not check (a third of its CPU).
	out, err := exec.Command("ffmpeg", "-nostdin", "-v", "error", "-f", "lavfi", "-i",
		"testsrc2=size=320x256:rate=25:duration=2", "-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p",
		src).CombinedOutput()
	if err != nil {
		t.Fatalf("making the clip: %v: %s", err, out)
	}
	dst := filepath.Join(dir, "out.mp4")
	code, stdout, stderr := runCLI(t, "codec", "embed", "--data", `{"video":1}`, "--preset", "ultrafast", "--json",
		src, dst)
	if code != 0 {
		t.Fatalf("embed: exit %d: %s", code, stderr)
	}
	var rep struct {
		WatermarkID string `json:"watermark_id"`
		FrameCount  int64  `json:"frame_count"`
		Units       []struct {
			Index  int `json:"index"`
			Frames int `json:"frames"`
		} `json:"units"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("embed output %q: %v", stdout, err)
	}
	want, _ := codec.IDFromJSON([]byte(`{"video":1}`))
	// One unit per second, as the receipt of a video embed shows them: 2 s at 25 fps.
	if rep.WatermarkID != want.String() || rep.FrameCount != 50 || len(rep.Units) != 2 || rep.Units[1].Index != 1 ||
		rep.Units[0].Frames != 25 || rep.Units[1].Frames != 25 {
		t.Errorf("embed reported %+v", rep)
	}
	code, stdout, stderr = runCLI(t, "codec", "detect", dst)
	if code != 0 {
		t.Fatalf("detect: exit %d: %s", code, stderr)
	}
	var d codec.Detection
	if err := json.Unmarshal([]byte(stdout), &d); err != nil {
		t.Fatal(err)
	}
	if !d.Watermarked || d.WatermarkID == nil || *d.WatermarkID != want.String() || len(d.Units) != 2 {
		t.Errorf("detect: %s", stdout)
	}
	bad := filepath.Join(dir, "bad.mov")
	if err := os.WriteFile(bad, []byte("plain text"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = runCLI(t, "codec", "detect", bad)
	if code != 1 || !strings.Contains(stderr, "not a video file") {
		t.Errorf("detect of a text file: exit %d, stderr %q", code, stderr)
	}
}
