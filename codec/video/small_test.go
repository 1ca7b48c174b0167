package video

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"filigrane/codec"
)

// TestSmallFrames: frames under half a tile of the mark are refused by the embed's probe (ErrTooSmall, a
// *SizeError naming the size and the minimum; a detection's probe reads them), in both orientations; frames between half a tile and a full one are marked only when the mark reads
// back from the output itself, else the embed fails with ErrMarkUnreadable and writes nothing (before, such a
// clip was marked and answered, and the service charged for a mark detection could not find). The rule's two
// orientations are codec's TestCheckVideoSize; the orientation was not what made small portrait clips fail
// (their content was: docs/video.md).
func TestSmallFrames(t *testing.T) {
	t.Parallel()
	a := testAdapter(t)
	dir := t.TempDir()
	ctx := context.Background()
	out := filepath.Join(dir, "out.mp4")
	noOutput := func(what string) {
		t.Helper()
		if _, err := os.Stat(out); !os.IsNotExist(err) {
			t.Errorf("%s: a failed embed left its output: %v", what, err)
		}
	}
	for _, size := range []string{"176x144"} {
		src := filepath.Join(dir, size+".mp4")
		makeClip(t, src, size, "25", "0.2") // refused from the probe: five frames say as much as any number
		// The embed's probe refuses it (a caller probes before it charges); a detection's probe reads it.
		var se *SizeError
		if _, err := a.Probe(ctx, src); !errors.As(err, &se) || !errors.Is(err, ErrTooSmall) || se.Width != 176 || se.Height != 144 {
			t.Errorf("%s: probe error %v, want a SizeError of 176x144", size, err)
		}
		if _, err := a.ProbeDetect(ctx, src); err != nil {
			t.Errorf("%s: detection probe: %v, want the video read", size, err)
		}
		_, err := a.Embed(ctx, src, out, testID(4), Options{})
		if !errors.Is(err, ErrTooSmall) || !strings.Contains(err.Error(), size) ||
			!strings.Contains(err.Error(), codec.VideoSizeRule()) {
			t.Errorf("%s: embed error %v, want ErrTooSmall naming the size and the minimum", size, err)
		}
		noOutput(size)
	}

	land := filepath.Join(dir, "land.mp4")
	// One second (25 frames): the mark reads back at confidence 0.997 (two seconds, 1.000, read it in the first
	// second's unit only) and the weakest mark still does not; each second more cost 0.5 CPU-s over the test.
	makeClip(t, land, "256x144", "25", "1")
	id := testID(5)
	// Under a work bound of 1 s the embed (25 frames of 256x144: about 0.05 s) is taken, and so is its read-back,
	// though a detection of the whole output would not be (two seconds analysed: about 1.6 s): the read-back is
	// part of the embed's work, not a detection of its own (before, the read-back was refused, ErrTooMuchWork).
	a.Limits = Limits{MaxWork: time.Second}
	rep, err := a.Embed(ctx, land, out, id, Options{})
	if err != nil {
		t.Fatal(err)
	}
	a.Limits = Limits{}
	if rep.Width != 256 || rep.Height != 144 {
		t.Fatalf("output %dx%d", rep.Width, rep.Height)
	}
	d, err := a.Detect(ctx, out)
	if err != nil {
		t.Fatal(err)
	}
	requireID(t, d, id, "256x144")
	if err := os.Remove(out); err != nil {
		t.Fatal(err)
	}

	// The weakest mark allowed does not survive in frames this small: the read-back fails the embed.
	_, err = a.Embed(ctx, land, out, testID(7), Options{PSNR: codec.MaxPSNR})
	if !errors.Is(err, ErrMarkUnreadable) {
		t.Errorf("a mark at %.0f dB on 256x144 frames: error %v, want ErrMarkUnreadable", codec.MaxPSNR, err)
	}
	noOutput("unreadable")
}
