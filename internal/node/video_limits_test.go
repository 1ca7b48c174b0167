package node_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// lavfiClip is an H.264 MP4 of ffmpeg's lavfi source src (for example "color=size=256x128:rate=1:duration=601"),
// encoded as fast as x264 goes.
func lavfiClip(t *testing.T, src string) []byte {
	t.Helper()
	out := filepath.Join(t.TempDir(), "clip.mp4")
	cmd := exec.Command("ffmpeg", "-nostdin", "-v", "error", "-f", "lavfi", "-i", src, "-pix_fmt", "yuv420p",
		"-c:v", "libx264", "-preset", "ultrafast", "-threads", "1", out)
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("ffmpeg %s: %v: %s", src, err, msg)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestVideoLimitsNamedAtProbe: a video over a limit of the video kind is refused when it is probed, before
// anything is held, with a detail that names the limit and what to send instead: a clip of 601 seconds says the
// limit is 600 s and to send parts of at most 10 min, frames of 4112x256 say the limits and a size that fits
// (the other limits' sentences: mediafiles' TestVideoLimitDetails). Before, the two said only "the video is
// longer than we process" and "the video's frames are larger than we process". Frames too small to carry a mark:
// TestUnmarkableVideosRefusedUncharged.
func TestVideoLimitsNamedAtProbe(t *testing.T) {
	t.Parallel()
	requireFFmpeg(t)
	long := lavfiClip(t, "color=c=gray:size=256x128:rate=1:duration=601")
	wide := lavfiClip(t, "color=c=gray:size=4112x256:rate=1:duration=1")
	f := newFixture(t, inMemory(t))
	before, held := balance(t, f, f.orgA)

	r := postFile(t, f.base+"/watermarks/videos/async", f.keyA, long, "long.mp4", `{"long":1}`)
	if p := decodeProblem(t, r); r.status != 413 || p.Code != "video_too_large" ||
		!strings.Contains(p.Detail, "lasts 601.0 s") || !strings.Contains(p.Detail, "the limit is 600 s") ||
		!strings.Contains(p.Detail, "send it in parts of at most 10 min") {
		t.Fatalf("601 s clip: %d %s; want 413 video_too_large naming the limit and the parts to send", r.status, r.body)
	}
	r = postFile(t, f.base+"/watermarks/videos/async", f.keyA, wide, "wide.mp4", `{"wide":1}`)
	if p := decodeProblem(t, r); r.status != 413 || p.Code != "video_too_large" || !strings.Contains(p.Detail, "4112x256") ||
		!strings.Contains(p.Detail, "the limit is 4096 pixels on the longer side") ||
		!strings.Contains(p.Detail, "scaled down to at most 4096x254") {
		t.Fatalf("4112x256 frames: %d %s; want 413 video_too_large naming the limits and a size that fits", r.status, r.body)
	}
	if after, nowHeld := balance(t, f, f.orgA); after != before || nowHeld != held {
		t.Fatalf("balance %d held %d after the refusals; want %d and %d", after, nowHeld, before, held)
	}
}
