package node_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"filigrane/actors"
	"filigrane/internal/node"
)

// framesPriced is a node tweak whose plan catalog prices a video's frames at 10 a minute (the default is 3,600,
// a minute at 60 fps): a clip of a few frames then shows the price by frames at a small cost.
func framesPriced(t *testing.T) func(*node.Config) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "plans.json")
	if err := os.WriteFile(path, []byte(`{"prices": {"video_frames_per_minute": 10}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	return func(c *node.Config) { c.PlansFile = path }
}

// fastClip is a one-second 256x256 H.264 MP4 of 40 frames (40 fps): at 10 frames a minute, 4 minutes' price.
func fastClip(t *testing.T) []byte {
	t.Helper()
	out := filepath.Join(t.TempDir(), "fast.mp4")
	cmd := exec.Command("ffmpeg", "-nostdin", "-v", "error", "-f", "lavfi", "-i", "testsrc=size=256x256:rate=40", "-t", "1",
		"-pix_fmt", "yuv420p", "-c:v", "libx264", "-preset", "ultrafast", "-threads", "1", out)
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("ffmpeg: %v: %s", err, msg)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestVideoPricedByFrames: a one-second clip whose 40 frames are more than its started minute pays for (10 a
// minute in this catalog) is held and charged by its frames, 4 credits, by a single request and as a batch
// item alike: the 202 receipt shows the hold and the frames counted, the finished job's receipt the same
// charge, and the balance is 4 lower with nothing held. Before, each cost 1 credit (its started minute).
func TestVideoPricedByFrames(t *testing.T) {
	t.Parallel()
	requireFFmpeg(t)
	clip := fastClip(t)
	f := newFixture(t, inMemory(t), framesPriced(t))
	before, _ := balance(t, f, f.orgA)
	r := postFile(t, f.base+"/watermarks/videos/async", f.keyA, clip, "fast.mp4", `{"fast":1}`)
	if r.status != 202 {
		t.Fatalf("video embed: %d %s", r.status, r.body)
	}
	var held struct {
		Credits    int64 `json:"credits"`
		FrameCount int   `json:"frame_count"`
	}
	if json.Unmarshal(r.body, &held) != nil || held.Credits != 4 || held.FrameCount != 40 {
		t.Fatalf("accepted receipt %s; want 4 credits held for 40 frames", r.body)
	}
	rc := decodeReceipt(t, r)
	if res := waitResult(t, f, f.keyA, rc.ResultURL); res.status != 200 {
		t.Fatalf("embed result: %d %.200s", res.status, res.body)
	}
	st := call(t, "GET", f.base+rc.StatusURL, f.keyA, nil)
	if done := decodeReceipt(t, st); st.status != 200 || done.Status != "succeeded" || done.Credits != 4 {
		t.Fatalf("finished receipt %d %s; want succeeded, 4 credits charged", st.status, st.body)
	}
	if after, held := balance(t, f, f.orgA); after != before-4 || held != 0 {
		t.Fatalf("balance %d held %d; want %d and nothing held", after, held, before-4)
	}

	// A batch item of the same clip is priced the same way.
	b := newBatchFixture(t, "scale", 100, framesPriced(t))
	z := postZip(t, b, "frames-priced-01", zipOf(t, map[string][]byte{"fast.mp4": clip}, []string{"fast.mp4"}),
		`{"items":[{"filename":"fast.mp4","data":{"fast":2}}]}`)
	if z.status != 202 {
		t.Fatalf("zip batch: %d %s", z.status, z.body)
	}
	done := waitBatch(t, b, decodeBatch(t, z).BatchID, "completed", "failed")
	if done.Status != "completed" || len(done.Items) != 1 || done.Items[0].Credits == nil || *done.Items[0].Credits != 4 ||
		done.Credits["charged"] != 4 || done.Credits["refunded"] != 0 {
		t.Fatalf("batch ended %s, credits %v, items %+v; want completed, 4 charged for the item", done.Status, done.Credits, done.Items)
	}
	rep, err := actors.OrgClient{Caller: b.n.Cluster()}.Get(context.Background(), b.org)
	if err != nil || rep.Balance != 96 || rep.Held != 0 {
		t.Fatalf("batch org after: %+v %v; want 96 credits, nothing held", rep, err)
	}
}
