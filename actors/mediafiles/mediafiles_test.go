package mediafiles_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"filigrane/actors/mediafiles"
	"filigrane/actors/mediakind"
	"filigrane/codec"
	"filigrane/codec/pdf"
	"filigrane/codec/video"
)

// TestRefusalsOfWrongFiles: a file that is not of the kind is a refusal with the kind's code and a sentence
// that names no path (the adapters run on temporary files whose names mean nothing to a client).
func TestRefusalsOfWrongFiles(t *testing.T) {
	if _, err := exec.LookPath("ffprobe"); err != nil {
		t.Fatal("ffprobe is not installed (scripts/setup.sh installs it)")
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "secret-temp-name.bin")
	if err := os.WriteFile(src, []byte("this is plain text, not media"), 0o600); err != nil {
		t.Fatal(err)
	}
	cdc, err := codec.New([]byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		a    mediakind.Adapter
		code string
	}{
		{"video", mediafiles.Video{A: &video.Adapter{Codec: cdc}}, mediafiles.CodeInvalidVideo},
		{"pdf", mediafiles.PDF{A: &pdf.Adapter{Codec: cdc}}, mediafiles.CodeInvalidDocument},
	}
	for _, c := range cases {
		_, err := c.a.Probe(context.Background(), src)
		var ref *mediakind.Refusal
		if !errors.As(err, &ref) || ref.Code != c.code {
			t.Fatalf("%s: probe of text: %v, want a refusal %s", c.name, err, c.code)
		}
		if strings.Contains(ref.Detail, dir) || strings.Contains(ref.Detail, "secret-temp-name") {
			t.Fatalf("%s: detail %q names the temporary file", c.name, ref.Detail)
		}
	}
}

// TestFFmpegFailureFailsAtOnceWithItsReason: ffmpeg exiting with an error while reading the file is a refusal
// of the file (invalid_video), and while writing the output a processing_error, both with ffmpeg's last words
// as the reason, so that the job fails once with it instead of being retried into a generic message. A tool
// killed by a signal is not the file's fault and stays retryable.
func TestFFmpegFailureFailsAtOnceWithItsReason(t *testing.T) {
	exited := exec.Command("sh", "-c", "exit 1").Run()
	killed := exec.Command("sh", "-c", "kill -9 $$").Run()
	if exited == nil || killed == nil {
		t.Fatal("the shell did not fail as asked")
	}
	const tail = "Invalid NAL unit size (1234 > 99); Error splitting the input into NAL units."
	cases := []struct {
		stage string
		cause error
		code  string // "" means not a refusal
	}{
		{"probe", exited, mediafiles.CodeInvalidVideo},
		{"decode", exited, mediafiles.CodeInvalidVideo},
		{"encode", exited, mediafiles.CodeProcessingError},
		{"remux", exited, mediafiles.CodeProcessingError},
		{"decode", killed, ""},
	}
	for _, c := range cases {
		err := mediafiles.VideoError(&video.ToolError{Stage: c.stage, Kind: video.ErrFFmpeg, Stderr: tail, Err: c.cause})
		var ref *mediakind.Refusal
		got := errors.As(err, &ref)
		if c.code == "" {
			if got {
				t.Errorf("%s killed: refusal %+v, want an error that is retried", c.stage, ref)
			}
			continue
		}
		if !got || ref.Code != c.code || !strings.Contains(ref.Detail, tail) || !strings.Contains(ref.Detail, c.stage) {
			t.Errorf("%s exited 1: %v, want a %s refusal naming the stage and ffmpeg's words", c.stage, err, c.code)
		}
	}
}

// TestSmallVideoRefusals: frames under the minimum and a mark that did not read back from small frames are
// refusals of the file (invalid_video, not retried), the first naming the minimum.
func TestSmallVideoRefusals(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("%w: 176x144: %s", video.ErrTooSmall, codec.VideoSizeRule()), codec.VideoSizeRule()},
		{fmt.Errorf("video: probe: %w", &video.SizeError{Width: 64, Height: 48}), "frames of 64x48 are too small"},
		{fmt.Errorf("%w: frames of 144x256", video.ErrMarkUnreadable), "could not be read back"},
	} {
		var ref *mediakind.Refusal
		if err := mediafiles.VideoError(c.err); !errors.As(err, &ref) || ref.Code != mediafiles.CodeInvalidVideo ||
			!strings.Contains(ref.Detail, c.want) {
			t.Errorf("%v: %v, want an invalid_video refusal saying %q", c.err, err, c.want)
		}
	}
}

// TestVideoFrameBudgetIsThePrice: the video adapter's frame budget is the frames the catalog's price of the
// probe pays for (at 10 frames a minute here: 40 frames in one second are 4 minutes, 40 frames; 41 are 5, 50
// frames; a long clip of few frames its minutes' frames), and an embed stopped by it is refused with
// video_too_large, a sentence that says why.
func TestVideoFrameBudgetIsThePrice(t *testing.T) {
	v := mediafiles.NewVideo(nil, mediakind.Rates{VideoEmbedPerMinute: 1, VideoFramesPerMinute: 10}, 0)
	for _, c := range []struct {
		seconds float64
		frames  int64
		want    int64
	}{{1, 40, 40}, {1, 41, 50}, {150, 5, 30}} {
		in := video.Info{Duration: c.seconds, Video: video.Stream{Frames: c.frames}}
		if got := v.A.FrameBudget(in); got != c.want {
			t.Errorf("%v s of %d frames: budget %d, want %d", c.seconds, c.frames, got, c.want)
		}
	}
	var ref *mediakind.Refusal
	err := mediafiles.VideoError(fmt.Errorf("video: marking frames: %w: more than 40 frames decoded", video.ErrFrameBudget))
	if !errors.As(err, &ref) || ref.Code != mediafiles.CodeVideoTooLarge || !strings.Contains(ref.Detail, "more frames than its container declares") {
		t.Errorf("an embed over its frame budget: %v, want a video_too_large refusal saying why", err)
	}
}

// TestWorkRefusalSaysWhatFits: a video over the work bound is a video_too_large refusal whose detail says what to
// send instead: the frames of its size that one job takes and how long that is at its rate, or the frame size at
// which its frames fit; one found while decoding (more frames than its container declared) says to send a file
// that states its frame count.
func TestWorkRefusalSaysWhatFits(t *testing.T) {
	t.Parallel()
	in := video.Info{Duration: 600, Video: video.Stream{Width: 1920, Height: 1080, Frames: 36000,
		AvgFrameRate: video.Rational{Num: 60000, Den: 1001}}}
	err := mediafiles.VideoError(video.Limits{}.CheckWork("embed", video.EmbedCost, in))
	const want = "the video has 36000 frames of 1920x1080, more than we watermark in one job before its deadline " +
		"(about 74 min 38 s of processing, the limit is 45 min): send it in parts of at most 21701 frames of this size " +
		"(6 min 2 s at its 59.94 fps), or with frames of at most 1.2 megapixels"
	var ref *mediakind.Refusal
	if !errors.As(err, &ref) || ref.Code != mediafiles.CodeVideoTooLarge || ref.Detail != want {
		t.Errorf("embed over the bound: %v\nwant a video_too_large refusal %q", err, want)
	}
	decoded := &video.WorkError{Operation: "detect", Frames: 26507, Decoded: true, Width: 3840, Height: 2160,
		Work: 45 * time.Minute, Limit: 45 * time.Minute, MaxFrames: 26507}
	if err := mediafiles.VideoError(fmt.Errorf("video: decoding: %w", decoded)); !errors.As(err, &ref) ||
		ref.Code != mediafiles.CodeVideoTooLarge || !strings.Contains(ref.Detail, "more than 26507 frames of 3840x2160, more than we check") ||
		!strings.Contains(ref.Detail, "states its frame count") {
		t.Errorf("detection stopped while decoding: %v", err)
	}
}

// TestVideoLimitDetails: every refusal by a video limit is video_too_large with a detail that names what the
// file has, the limit, and what to send instead (before, "the video is longer than we process" named none).
func TestVideoLimitDetails(t *testing.T) {
	for _, c := range []struct {
		err  *video.LimitError
		want []string
	}{
		{&video.LimitError{Kind: video.ErrTooLong, Duration: 601, MaxDuration: 600},
			[]string{"lasts 601.0 s", "the limit is 600 s, 10 min", "parts of at most 10 min"}},
		{&video.LimitError{Kind: video.ErrTooLarge, Width: 7680, Height: 4320, MaxSide: 4096, MaxPixels: 4096 * 2304},
			[]string{"frames of 7680x4320", "4096 pixels on the longer side and 9437184 pixels a frame", "at most 4096x2304"}},
		{&video.LimitError{Kind: video.ErrTooLarge, Width: 3000, Height: 3500, MaxSide: 4096, MaxPixels: 4096 * 2304},
			[]string{"frames of 3000x3500", "at most 2844x3318"}},
		{&video.LimitError{Kind: video.ErrTooManyFrames, Frames: 40000, MaxFrames: 36000},
			[]string{"has 40000 frames", "the limit is 36000 frames", "parts of at most 36000 frames"}},
		{&video.LimitError{Kind: video.ErrTooManyFrames, Frames: 36001, MaxFrames: 36000, Decoded: true},
			[]string{"more than 36000 frames", "the limit is 36000 frames", "parts of at most 36000 frames"}},
		{&video.LimitError{Kind: video.ErrTooManyFrames, Frames: 3_000_000, MaxFrames: 2_000_000, Samples: true},
			[]string{"declare 3000000 samples", "the limit is 2000000", "shorter parts"}},
		{&video.LimitError{Kind: video.ErrTooManyFrames, Box: "moov", Frames: 40 << 20, MaxFrames: 32 << 20},
			[]string{"moov box) is 41943040 bytes", "the limit is 33554432 bytes", "shorter parts"}},
	} {
		var ref *mediakind.Refusal
		err := mediafiles.VideoError(fmt.Errorf("video: probe: %w", c.err))
		if !errors.As(err, &ref) || ref.Code != mediafiles.CodeVideoTooLarge || !errors.Is(err, c.err.Kind) {
			t.Errorf("%v: %v, want a video_too_large refusal", c.err, err)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(ref.Detail, w) {
				t.Errorf("%v: detail %q, want it to say %q", c.err, ref.Detail, w)
			}
		}
	}
}
