package video

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Cost is how much CPU time of one core an operation on a video is expected to take, by a linear model whose
// coefficients were measured on the reference machine (docs/video.md, "Work and deadline"): every frame costs
// PerMegapixelFrame for each million of its pixels, and every second of video that has frames costs
// PerSecond. The estimate needs only the probe, so a job that cannot finish before its deadline is refused
// before anything is held or decoded.
type Cost struct {
	// PerMegapixelFrame is a frame's decoding (and, for an embed, marking and encoding) per million pixels.
	PerMegapixelFrame time.Duration
	// PerSecond is the work of each second of video whatever its frames: a detection analyses each second's mean
	// frame once (at most about 2.3 MP: larger frames are halved first).
	PerSecond time.Duration
}

// The costs of the two operations, measured on 320x240 to 3840x2160 clips with /usr/bin/time (user+system CPU
// of `filigrane codec embed` and `codec detect` and their ffmpeg children; docs/video.md has the figures):
//
//   - an embed costs about 0.046 to 0.049 CPU-s per megapixel-frame of moving content (testsrc2), 0.048 of a
//     still picture and 0.03 to 0.04 of black frames; real footage compressed as hard as a file of thousands
//     of large frames within the 20 MB upload must be (vtest and Megamind scaled to 1080p at 270 kbit/s,
//     vtest at 4K at 1.1 Mbit/s) costs 0.038 to 0.058. The rate is the highest of these, rounded up, so that
//     the estimate does not understate a film that reaches the bound; noise, which x264 spends five times
//     more on, and camera footage at its usual bitrates (0.06 to 0.09) cannot fill many frames within 20 MB;
//   - a detection decodes a frame for 0.003 (4K, halved while decoding) to 0.006 (1080p) CPU-s per
//     megapixel and analyses each second's mean frame for 0.5 to 0.75 CPU-s.
var (
	EmbedCost  = Cost{PerMegapixelFrame: 60 * time.Millisecond}
	DetectCost = Cost{PerMegapixelFrame: 6 * time.Millisecond, PerSecond: 800 * time.Millisecond}
)

// operation is an operation whose work a probe checks: its name in errors and its cost; marks: it writes a mark,
// so its probe refuses frames too small to carry one (codec.CheckVideoSize).
type operation struct {
	name  string
	cost  Cost
	marks bool
}

var (
	embedding = operation{name: "embed", cost: EmbedCost, marks: true}
	detecting = operation{name: "detect", cost: DetectCost}
	// readingBack is the detection of an embed's first seconds in its own output (Adapter.readBack): the
	// embed's probe bounded the work, and the read-back is part of it; a zero Cost bounds nothing.
	readingBack = operation{name: "detect"}
)

// frameCap is the most frames op decodes of the file info describes within limits: MaxFrames, or fewer when
// the work bound allows fewer of this size (byWork). A probe can understate the frames (a fragmented MP4 states
// none); decoding stops at the cap.
func (op operation) frameCap(info Info, l Limits) (n int64, byWork bool) {
	n = l.MaxFrames
	if w := op.cost.MaxFrames(info.Video.Width, info.Video.Height, info.Duration, l.MaxWork); w < n {
		return w, true
	}
	return n, false
}

// units is the seconds of video that get the per-second work: those the duration starts, and one more, since
// frames that do not start on a second's boundary straddle one more; never more than the frames.
func units(frames int64, seconds float64) int64 {
	if frames <= 0 {
		return 0
	}
	n := int64(math.Ceil(max(seconds, 0))) + 1
	if seconds > 1e6 {
		n = 1e6 + 1 // the limits refuse such durations; keep the arithmetic finite
	}
	return min(n, frames)
}

// Of estimates the work of frames of width×height pixels over seconds of video.
func (c Cost) Of(frames int64, width, height int, seconds float64) time.Duration {
	mp := float64(width) * float64(height) / 1e6
	est := float64(frames)*mp*float64(c.PerMegapixelFrame) + float64(units(frames, seconds))*float64(c.PerSecond)
	if est > float64(math.MaxInt64) {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(est)
}

// MaxFrames is the most frames of width×height pixels over seconds of video whose estimated work is within
// limit; at least 0.
func (c Cost) MaxFrames(width, height int, seconds float64, limit time.Duration) int64 {
	perFrame := float64(width) * float64(height) / 1e6 * float64(c.PerMegapixelFrame)
	rest := float64(limit) - float64(units(math.MaxInt64, seconds))*float64(c.PerSecond)
	if rest <= 0 {
		// Even one frame a second is too much; fewer frames mean fewer seconds with frames.
		rest = float64(limit)
		perFrame += float64(c.PerSecond)
	}
	if perFrame <= 0 {
		return math.MaxInt64
	}
	return int64(min(rest/perFrame, float64(math.MaxInt64/2)))
}

// MaxMegapixels is the largest frame, in millions of pixels, of which frames over seconds of video are within
// limit; 0 when no frame size is.
func (c Cost) MaxMegapixels(frames int64, seconds float64, limit time.Duration) float64 {
	rest := float64(limit) - float64(units(frames, seconds))*float64(c.PerSecond)
	if rest <= 0 || frames <= 0 || c.PerMegapixelFrame <= 0 {
		return 0
	}
	return rest / (float64(frames) * float64(c.PerMegapixelFrame))
}

// WorkError is a video whose estimated work (Cost) is more than Limits.MaxWork: from its probe, or, when the
// probe understated its frames, as the frame past the bound is decoded. It wraps ErrTooMuchWork.
type WorkError struct {
	Operation string // "embed" or "detect"
	// Frames is the probe's count, or the frames decoded when Decoded is set (then the file has more).
	Frames        int64
	Decoded       bool
	Width, Height int
	Seconds       float64 // the probe's duration
	FrameRate     float64 // the average frame rate, 0 when unknown
	Work, Limit   time.Duration
	// MaxFrames is the most frames of this size the limit allows over this duration; MaxMegapixels the largest
	// frame, in millions of pixels, for this many frames.
	MaxFrames     int64
	MaxMegapixels float64
}

func (e *WorkError) Error() string {
	more := ""
	if e.Decoded {
		more = "more than "
	}
	return fmt.Sprintf("%v: %s %s%d frames of %dx%d, about %v of work, the limit is %v (%d frames of this size)",
		ErrTooMuchWork, e.Operation, more, e.Frames, e.Width, e.Height, e.Work.Round(time.Second), e.Limit, e.MaxFrames)
}

func (e *WorkError) Unwrap() error { return ErrTooMuchWork }

// checkWork fails with a *WorkError when info's estimated work under cost is more than limit.
func checkWork(op string, cost Cost, info Info, limit time.Duration) error {
	v := info.Video
	work := cost.Of(v.Frames, v.Width, v.Height, info.Duration)
	if work <= limit {
		return nil
	}
	return workError(op, cost, info, limit, v.Frames, false)
}

func workError(op string, cost Cost, info Info, limit time.Duration, frames int64, decoded bool) *WorkError {
	v := info.Video
	var rate float64
	if v.AvgFrameRate.Valid() {
		rate = v.AvgFrameRate.Float()
	}
	return &WorkError{Operation: op, Frames: frames, Decoded: decoded, Width: v.Width, Height: v.Height,
		Seconds: info.Duration, FrameRate: rate, Work: cost.Of(frames, v.Width, v.Height, info.Duration), Limit: limit,
		MaxFrames:     cost.MaxFrames(v.Width, v.Height, info.Duration, limit),
		MaxMegapixels: cost.MaxMegapixels(frames, info.Duration, limit)}
}

// asWorkError turns the ErrTooManyFrames of a decode stopped at the work bound into the WorkError that says so.
func asWorkError(err error, op string, cost Cost, info Info, limit time.Duration, maxFrames int64) error {
	if !errors.Is(err, ErrTooManyFrames) {
		return err
	}
	return workError(op, cost, info, limit, maxFrames, true)
}
