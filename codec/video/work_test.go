package video

import (
	"errors"
	"testing"
	"time"
)

// TestWorkBound: the work bound of the default limits (45 minutes of one core at EmbedCost and DetectCost) is
// checked from the probe alone. Every video the duration limit allows at up to 1080p30 is embedded: ten minutes
// of 720p at 60 fps, and of 1080p at 30 fps (18,000 frames, about 37 minutes; the bound of a third of the
// deadline, 30 minutes, refused it though the service advertises ten minutes); ten minutes of 1080p at 60 fps
// (about 75 minutes) or of 1440p at 30 fps, and 4,800 frames of 4096x2304, are refused with a WorkError that
// says how many frames of their size fit. A detection, without the encoding, reads every video within the
// frame and duration limits: ten minutes of 3840x2160 at 60 fps (about 38 minutes).
func TestWorkBound(t *testing.T) {
	t.Parallel()
	info := func(w, h int, frames int64, seconds float64) Info {
		return Info{Duration: seconds, Video: Stream{Width: w, Height: h, Frames: frames,
			AvgFrameRate: Rational{Num: int64(float64(frames)/seconds + 0.5), Den: 1}}}
	}
	var l Limits
	for _, c := range []struct {
		name   string
		op     operation
		in     Info
		refuse bool
	}{
		{"embed 720p60 10 min", embedding, info(1280, 720, 36000, 600), false},
		{"embed 1080p30 10 min", embedding, info(1920, 1080, 18000, 600), false},
		{"embed 1080p60 10 min", embedding, info(1920, 1080, 36000, 600), true},
		{"embed 1440p30 10 min", embedding, info(2560, 1440, 18000, 600), true},
		{"embed 4096x2304 4,700 frames", embedding, info(4096, 2304, 4700, 157), false},
		{"embed 4096x2304 4,800 frames", embedding, info(4096, 2304, 4800, 160), true},
		{"detect 1080p60 10 min", detecting, info(1920, 1080, 36000, 600), false},
		{"detect 2160p60 10 min", detecting, info(3840, 2160, 36000, 600), false},
		{"detect 4096x2304 at 60 fps 10 min", detecting, info(4096, 2304, 36000, 600), false},
	} {
		err := l.CheckWork(c.op.name, c.op.cost, c.in)
		if !c.refuse {
			if err != nil {
				t.Errorf("%s: %v; want it taken", c.name, err)
			}
			continue
		}
		var we *WorkError
		if !errors.Is(err, ErrTooMuchWork) || !errors.As(err, &we) {
			t.Errorf("%s: %v; want a WorkError", c.name, err)
			continue
		}
		v := c.in.Video
		if we.Frames != v.Frames || we.Width != v.Width || we.Work <= 45*time.Minute || we.Limit != 45*time.Minute ||
			we.MaxFrames >= v.Frames || we.FrameRate <= 0 {
			t.Errorf("%s: %+v", c.name, we)
		}
		// MaxFrames is what fits: one frame more does not.
		if c.op.cost.Of(we.MaxFrames, v.Width, v.Height, c.in.Duration) > we.Limit ||
			c.op.cost.Of(we.MaxFrames+1, v.Width, v.Height, c.in.Duration) <= we.Limit {
			t.Errorf("%s: %d frames is not the most that fit", c.name, we.MaxFrames)
		}
		// So do these frames at MaxMegapixels.
		px := we.MaxMegapixels * 1e6
		if c.op.cost.Of(v.Frames, int(px), 1, c.in.Duration) > we.Limit || px >= float64(v.Width*v.Height) {
			t.Errorf("%s: %.2f MP do not fit or are not smaller", c.name, we.MaxMegapixels)
		}
	}
	// A lower bound refuses less work (a node on slower CPUs); the frames that fit scale with it.
	small := Limits{MaxWork: 100 * time.Millisecond}
	if err := small.CheckWork("embed", EmbedCost, info(256, 256, 40, 1)); !errors.Is(err, ErrTooMuchWork) {
		t.Errorf("40 frames of 256x256 under a 100 ms bound: %v", err)
	}
	if err := small.CheckWork("embed", EmbedCost, info(256, 256, 20, 1)); err != nil {
		t.Errorf("20 frames of 256x256 under a 100 ms bound: %v", err)
	}
}
