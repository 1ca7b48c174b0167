package node_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"filigrane/actors"
	"filigrane/cluster"
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

// TestWorkerUsesTheAcceptingNodesBound: two nodes with different work bounds, one after the other on the same
// store (a change of --max-video-work rolled out node by node). An api node (it accepts, runs no work) with the
// default bound accepts the embed of a 40-frame 256x256 clip (about 0.16 s of one core); it stops with the job
// queued, and a worker node bounded at 125 ms, which refuses that clip at its own probe
// (TestVideoWorkBoundRefusedAtProbe), starts on the same data directory, takes the job and embeds it: the job is
// judged by the bound that accepted it, kept in its record. Before, the worker's own bound failed the job
// late, 413 video_too_large after its hold.
func TestWorkerUsesTheAcceptingNodesBound(t *testing.T) {
	t.Parallel()
	requireFFmpeg(t)
	clip := fastClip(t)
	f := newFixture(t, inMemory(t), func(c *node.Config) { c.Roles = []cluster.Role{cluster.RoleAPI} })
	r := postFile(t, f.base+"/watermarks/videos/async", f.keyA, clip, "fast.mp4", `{"bound":1}`)
	if r.status != 202 {
		t.Fatalf("embed under the default bound: %d %s; want 202", r.status, r.body)
	}
	rc := decodeReceipt(t, r)
	if rc.Status != "queued" {
		t.Fatalf("the api node's job is %s; want it queued (no worker runs it there)", rc.Status)
	}
	f.stop(t)

	f.n = startNode(t, f.dataDir, f.clk, inMemory(t), func(c *node.Config) { c.MaxVideoWork = 125 * time.Millisecond })
	t.Cleanup(func() { stopNode(t, f.n) })
	f.base = "http://" + f.n.APIAddr()
	// Sent for orgB (keyExpiring: all scopes): orgA's one slot is the queued job's, and a request over the
	// limit is refused 429 before its file is read and probed.
	if r := postFile(t, f.base+"/watermarks/videos/async", f.keyExpiring, clip, "fast.mp4", `{"bound":2}`); r.status != 413 {
		t.Fatalf("the worker node's own probe of the clip: %d %s; want 413", r.status, r.body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // only turns a hang into a failure
	defer cancel()
	// The sweep (periodic in production, off in these tests) offers the queued jobs of a node that starts.
	if _, _, err := f.n.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if rep, err := (actors.JobClient{Caller: f.n.Cluster()}).Await(ctx, f.orgA, rc.RequestID); err != nil || rep.Record == nil {
		t.Fatalf("awaiting the job: %v %+v", err, rep)
	}
	if st := decodeReceipt(t, call(t, "GET", f.base+rc.StatusURL, f.keyA, nil)); st.Status != "succeeded" {
		t.Fatalf("job accepted under the default bound, run on a node bounded at 125 ms: %s; want it succeeded", st.raw)
	}
}
