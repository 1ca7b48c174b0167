package video

import (
	"errors"
	"fmt"

	"filigrane/codec"
)

// The kinds of failure a caller maps to a response (each a 422 problem code, or 413 for the limits). Every error
// the adapter returns for bad input wraps exactly one of them; match with errors.Is.
var (
	ErrNotVideo      = errors.New("video: not a video file")
	ErrNoVideoStream = errors.New("video: no video stream")
	ErrTruncated     = errors.New("video: file is truncated or corrupt")
	ErrUnsupported   = errors.New("video: unsupported video")
	ErrTooLong       = errors.New("video: too long")
	ErrTooLarge      = errors.New("video: frames too large")
	ErrTooManyFrames = errors.New("video: too many frames")
	// ErrTooMuchWork: the video's estimated work (Cost) is more than Limits.MaxWork; the error is a *WorkError.
	ErrTooMuchWork = errors.New("video: more work than one job may take")
	// ErrFrameBudget: the embed decoded more frames than Adapter.FrameBudget allows for the file's probe (the
	// probe understated them).
	ErrFrameBudget = errors.New("video: more frames than the probe declared")
	ErrTooSmall    = errors.New("video: frames too small to carry a watermark")
	// ErrAlpha: embedding a video whose frames have an alpha plane, which the H.264 output cannot keep (the
	// transparent parts would come out opaque). Detection reads such a video.
	ErrAlpha = errors.New("video: alpha channel, which the watermarked output cannot keep")
	// ErrMarkUnreadable: the frames are under one tile of the mark, and the embed's own output did not read back
	// (nothing is written).
	ErrMarkUnreadable = errors.New("video: the watermark does not read back from the marked video")
	ErrFFmpeg         = errors.New("video: ffmpeg failed")
	// ErrToolMissing is the deployment's fault, not the input's: ffmpeg or ffprobe is not installed.
	ErrToolMissing = errors.New("video: ffmpeg or ffprobe is not installed")
)

// ToolError is a failed ffmpeg or ffprobe run: which stage, how it ended, and the tail of its stderr, which is
// usually the only useful reason. It wraps a kind (ErrFFmpeg unless the stderr shows a more specific one) and
// the process error.
type ToolError struct {
	Stage  string // "probe", "decode", "encode", "remux"
	Kind   error
	Stderr string // last lines of the tool's stderr
	Err    error  // the exit status or start error
}

func (e *ToolError) Error() string {
	msg := fmt.Sprintf("%v: %s: %v", e.Kind, e.Stage, e.Err)
	if e.Stderr != "" {
		msg += ": " + e.Stderr
	}
	return msg
}

// Unwrap returns both the kind and the process error, so errors.Is finds either.
func (e *ToolError) Unwrap() []error { return []error{e.Kind, e.Err} }

// Reason is the text a caller shows to the client: the kind and the tool's last words, without process details.
func Reason(err error) string {
	var te *ToolError
	if errors.As(err, &te) {
		if te.Stderr != "" {
			return te.Kind.Error() + ": " + te.Stderr
		}
		return te.Kind.Error()
	}
	return err.Error()
}

// LimitError is a refusal by one of the bounds other than the work's (Limits.Check, the sample count before
// ffprobe, MaxFrames while decoding): which kind it is (Kind: ErrTooLong, ErrTooLarge or ErrTooManyFrames), what
// the file has and what the limit is, so that a caller's answer can name both and say what to send instead.
// errors.Is(err, Kind) holds.
type LimitError struct {
	Kind error
	// ErrTooLong: seconds.
	Duration, MaxDuration float64
	// ErrTooLarge: the frame size, the limit on the longer side and on the pixels of one frame.
	Width, Height, MaxSide, MaxPixels int
	// ErrTooManyFrames: the frames (or, with Samples, the samples every track declares; with Box, the bytes of
	// the index box named Box) and their limit.
	Frames, MaxFrames int64
	Samples           bool
	Box               string
	// Decoded: the frames were counted while decoding, past MaxFrames, in a file that declared fewer.
	Decoded bool
}

func (e *LimitError) Error() string {
	switch {
	case e.Kind == ErrTooLong:
		return fmt.Sprintf("%v: %.1f s, the limit is %.0f s", e.Kind, e.Duration, e.MaxDuration)
	case e.Kind == ErrTooLarge:
		return fmt.Sprintf("%v: %dx%d, the limit is %d pixels per side and %d per frame", e.Kind, e.Width, e.Height,
			e.MaxSide, e.MaxPixels)
	case e.Box != "":
		return fmt.Sprintf("%v: a %s box of %d bytes, the limit is %d", e.Kind, e.Box, e.Frames, e.MaxFrames)
	case e.Samples:
		return fmt.Sprintf("%v: the tracks declare %d samples, the limit is %d", e.Kind, e.Frames, e.MaxFrames)
	case e.Decoded:
		return fmt.Sprintf("%v: more than %d frames decoded", e.Kind, e.MaxFrames)
	}
	return fmt.Sprintf("%v: %d frames, the limit is %d", e.Kind, e.Frames, e.MaxFrames)
}

// Unwrap returns the kind.
func (e *LimitError) Unwrap() error { return e.Kind }

// SizeError is ErrTooSmall with the frame size that codec.CheckVideoSize refused.
type SizeError struct{ Width, Height int }

func (e *SizeError) Error() string {
	return fmt.Sprintf("%v: %dx%d: %s", ErrTooSmall, e.Width, e.Height, codec.VideoSizeRule())
}

// Unwrap returns ErrTooSmall.
func (e *SizeError) Unwrap() error { return ErrTooSmall }
