package actors_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"filigrane/actors"
	"filigrane/actors/jobstate"
	"filigrane/actors/mediafiles"
	"filigrane/actors/mediakind"
	"filigrane/codec"
)

// TestJobKeepsTheBoundThatAcceptedIt: a video job is judged by the work bound its accepting node's probe
// checked (the record's MaxWork), not by the bound of the node that runs it. The probe reports the bound it
// checked; a worker whose own bound (125 ms of one core) refuses a 40-frame 256x256 clip (about 0.16 s) embeds
// it for a job accepted under 45 minutes, and refuses it for a job accepted under 100 ms, though its own bound
// is then larger than the job's; a record without a bound (accepted before the bound was kept) is judged by
// the worker's own. Before, every worker used its own: the job accepted under 45 minutes failed late,
// video_too_large after its hold. Real ffmpeg.
func TestJobKeepsTheBoundThatAcceptedIt(t *testing.T) {
	if _, err := exec.LookPath("ffmpeg"); err != nil {
		t.Fatal("ffmpeg is not installed (scripts/setup.sh installs it)")
	}
	ctx := context.Background()
	clip := filepath.Join(t.TempDir(), "clip.mp4")
	if out, err := exec.Command("ffmpeg", "-nostdin", "-v", "error", "-f", "lavfi", "-i", "testsrc=size=256x256:rate=40",
		"-t", "1", "-pix_fmt", "yuv420p", "-c:v", "libx264", "-preset", "ultrafast", "-threads", "1", clip).CombinedOutput(); err != nil {
		t.Fatalf("ffmpeg: %v: %s", err, out)
	}
	b, err := os.ReadFile(clip)
	if err != nil {
		t.Fatal(err)
	}
	cdc, err := codec.New([]byte(codec.DevelopmentKey))
	if err != nil {
		t.Fatal(err)
	}
	kind, _ := mediakind.ByMedia(jobstate.MediaVideo)
	edge, _ := newFileMedia(t, mediafiles.NewVideo(cdc, actors.DefaultCatalog().Prices, 0))
	if _, err := edge.Blobs.Put(ctx, "inputs/clip", bytes.NewReader(b)); err != nil {
		t.Fatal(err)
	}
	info, perr := edge.ProbeStored(ctx, kind, jobstate.OperationEmbed, "inputs/clip", time.Second)
	if perr != nil || info.Frames != 40 || info.MaxWork != kind.Limits.MaxWork {
		t.Fatalf("probe under the default bound: %+v %+v; want 40 frames checked against %v", info, perr, kind.Limits.MaxWork)
	}

	worker, tmp := newFileMedia(t, mediafiles.NewVideo(cdc, actors.DefaultCatalog().Prices, 125*time.Millisecond))
	worker.Blobs = edge.Blobs
	job := func(bound time.Duration) *jobstate.Record {
		rec := videoJob(t, jobstate.OperationEmbed, "inputs/clip", int64(len(b)))
		rec.MaxWork = bound
		return rec
	}
	out, perr := worker.Process(ctx, job(info.MaxWork))
	if perr != nil || out.Media.Frames != 40 {
		t.Fatalf("embed of a job accepted under %v on a worker bounded at 125 ms: %+v %+v; want the 40 frames marked",
			info.MaxWork, out, perr)
	}
	for _, bound := range []time.Duration{100 * time.Millisecond, 0} {
		_, perr := worker.Process(ctx, job(bound))
		if perr == nil || perr.Code != mediafiles.CodeVideoTooLarge || perr.Retryable ||
			!strings.Contains(perr.Detail, "40 frames of 256x256") {
			t.Errorf("job bound %v on a worker bounded at 125 ms: %+v; want video_too_large", bound, perr)
		}
	}
	assertEmptyDir(t, tmp)
}
