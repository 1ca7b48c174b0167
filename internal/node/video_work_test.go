package node_test

import (
	"strings"
	"testing"
	"time"

	"filigrane/internal/node"
)

// TestVideoWorkBoundRefusedAtProbe: a video whose estimated work is more than the node's bound (here lowered to
// 125 ms of one core, so that clips of a few frames show it) is refused when it is probed, before anything is
// held: 413 video_too_large whose detail says how many frames of its size one job takes, and the balance
// untouched. The embed of 40 frames of 256x256 (about 0.16 s at codec/video's EmbedCost) and the detection of
// the same clip (two seconds analysed, about 1.6 s) are refused; 10 frames of 512x384 (about 0.12 s) are
// embedded. Before, the bound did not exist: a job of any work within the frame and duration limits was
// accepted, held, and ran until the deadline failed it.
func TestVideoWorkBoundRefusedAtProbe(t *testing.T) {
	t.Parallel()
	requireFFmpeg(t)
	clip := fastClip(t)
	f := newFixture(t, inMemory(t), func(c *node.Config) { c.MaxVideoWork = 125 * time.Millisecond })
	before, held := balance(t, f, f.orgA)

	r := postFile(t, f.base+"/watermarks/videos/async", f.keyA, clip, "fast.mp4", `{"work":1}`)
	if p := decodeProblem(t, r); r.status != 413 || p.Code != "video_too_large" ||
		!strings.Contains(p.Detail, "40 frames of 256x256") || !strings.Contains(p.Detail, "parts of at most 31 frames of this size (0.7 s at its 40 fps)") {
		t.Fatalf("embed over the work bound: %d %s; want 413 video_too_large saying 31 frames fit", r.status, r.body)
	}
	r = postFile(t, f.base+"/watermarks/videos/detect", f.keyA, clip, "fast.mp4", "")
	if p := decodeProblem(t, r); r.status != 413 || p.Code != "video_too_large" || !strings.Contains(p.Detail, "more than we check") {
		t.Fatalf("detection over the work bound: %d %s; want 413 video_too_large", r.status, r.body)
	}
	if after, nowHeld := balance(t, f, f.orgA); after != before || nowHeld != held {
		t.Fatalf("balance %d held %d after the refusals; want %d and %d", after, nowHeld, before, held)
	}

	r = postFile(t, f.base+"/watermarks/videos/async", f.keyA, tinyMP4(t), "clip.mp4", `{"work":2}`)
	if r.status != 202 {
		t.Fatalf("embed within the work bound: %d %s; want 202", r.status, r.body)
	}
}
