package video

import (
	"context"
	"errors"
	"fmt"
	"io"

	"filigrane/codec"
)

// SegmentSeconds is the length of a detection unit. Frames are averaged over a segment before analysis: the mark
// is the same in every frame and adds up, while moving content and coding noise average out, and one analysis
// per second instead of one per frame keeps detection cheaper than decoding.
const SegmentSeconds = 1

// detectMaxPixels is the frame size above which detection analyses frames reduced by half (bounded memory and
// time; the mark's waxels of large frames span several pixels and survive the reduction).
const detectMaxPixels = 2_300_000

// Detect looks for a mark in the video stream of src. The result's units are the segments (one per second from
// the first frame, in order, with their start and end times); the overall decision combines the soft bits of all segments, and when that does
// not decode, of the mean of all frames. Detection.Soft and the codeword LLRs behind it are kept, so
// Codec.Snap can match a short or damaged clip against the issued ids.
func (a *Adapter) Detect(ctx context.Context, src string) (codec.Detection, error) {
	return a.detect(ctx, src, 0)
}

// detect is Detect on the first seconds of src (all of it when seconds is 0). A limited read does not check the
// number of frames decoded against the container's.
func (a *Adapter) detect(ctx context.Context, src string, seconds float64) (codec.Detection, error) {
	if a.Codec == nil {
		return codec.Detection{}, errors.New("video: adapter without a codec")
	}
	t, err := a.tools()
	if err != nil {
		return codec.Detection{}, err
	}
	op := detecting
	if seconds > 0 {
		op = readingBack
	}
	info, err := t.probe(ctx, src, op)
	if err != nil {
		return codec.Detection{}, err
	}
	v := info.Video
	w, h, vf := v.Width, v.Height, ""
	if w*h > detectMaxPixels {
		w, h = w/2, h/2
		vf = fmt.Sprintf("scale=%d:%d:flags=area", w, h)
	}
	ctx, stop := context.WithTimeout(ctx, t.limits.Timeout)
	defer stop()
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	decode := t.newProc(pctx, "decode", t.ffmpeg, t.decodeArgs(src, v, "gray", vf, seconds)...)
	decode.redact = []string{src}
	out, err := decode.cmd.StdoutPipe()
	if err != nil {
		return codec.Detection{}, err
	}
	var pl pipeline
	if err := pl.start(decode); err != nil {
		return codec.Detection{}, err
	}
	acc := newSegmenter(a.Codec, w, h)
	maxFrames, byWork := op.frameCap(info, t.limits)
	_, goErr := walkMKV(out, nil, w*h, maxFrames, "", func(pix []byte, ms int64) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		acc.add(pix, ms)
		return nil
	})
	if byWork {
		goErr = asWorkError(goErr, op.name, op.cost, info, t.limits.MaxWork, maxFrames)
	}
	if goErr != nil {
		io.Copy(io.Discard, out) //nolint:errcheck // let the decoder finish or fail on its own
	}
	if err := pl.waitAll(pctx, cancel, goErr); err != nil {
		if ctx.Err() != nil {
			return codec.Detection{}, fmt.Errorf("video: detection stopped: %w", ctx.Err())
		}
		return codec.Detection{}, err
	}
	if acc.frames == 0 {
		return codec.Detection{}, fmt.Errorf("%w: no frame could be decoded", ErrTruncated)
	}
	if seconds == 0 {
		if err := decode.checkComplete(int64(acc.frames), info); err != nil {
			return codec.Detection{}, err
		}
	}
	return acc.result(), nil
}

// segmenter sums frames per segment (cut by a timeline) and over the whole clip, and analyses each finished
// segment.
type segmenter struct {
	c          *codec.Codec
	w, h       int
	tl         *timeline
	seg        []float32 // sum of the current segment's frames
	all        []float32 // sum of all frames
	frames     int
	softs      []codec.FrameSoft
	units      []codec.Unit
	scratchOut []float32
}

func newSegmenter(c *codec.Codec, w, h int) *segmenter {
	return &segmenter{c: c, w: w, h: h, tl: newTimeline(), seg: make([]float32, w*h), all: make([]float32, w*h),
		scratchOut: make([]float32, w*h)}
}

func (s *segmenter) add(pix []byte, ms int64) {
	if s.tl.add(ms) {
		s.flush()
	}
	for i, v := range pix[:s.w*s.h] {
		f := float32(v)
		s.seg[i] += f
		s.all[i] += f
	}
	s.frames++
}

// flush analyses the segment the timeline just closed and starts a new sum.
func (s *segmenter) flush() {
	sg := s.tl.segs[len(s.tl.segs)-1]
	fs := s.analyze(s.seg, sg.Frames)
	s.softs = append(s.softs, fs)
	d := s.c.CombineFrames([]codec.FrameSoft{fs})
	start, end := sg.StartTime, sg.EndTime
	s.units = append(s.units, codec.Unit{Index: sg.Index, Watermarked: d.Watermarked,
		Confidence: d.Confidence, WatermarkID: d.WatermarkID, StartTime: &start, EndTime: &end})
	clear(s.seg)
}

func (s *segmenter) analyze(sum []float32, n int) codec.FrameSoft {
	inv := 1 / float32(n)
	for i, v := range sum {
		s.scratchOut[i] = v * inv
	}
	return s.c.AnalyzeVideoLuma(codec.LumaPlane{Pix: s.scratchOut, Width: s.w, Height: s.h, Stride: s.w})
}

// result combines the segments; when that fails, the mean of all frames gets one more decoding attempt (it
// helps when no single segment synchronises).
func (s *segmenter) result() codec.Detection {
	if s.tl.finish() {
		s.flush()
	}
	d := s.c.CombineFrames(s.softs)
	if !d.Watermarked && len(s.softs) > 1 {
		if whole := s.c.CombineFrames([]codec.FrameSoft{s.analyze(s.all, s.frames)}); whole.Watermarked {
			d = whole
		}
	}
	d.Units = s.units
	return d
}
