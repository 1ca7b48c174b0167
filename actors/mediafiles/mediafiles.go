// Package mediafiles adapts the file-path codecs (codec/video, codec/pdf) to the media-kind table's Adapter
// interface: it converts their probe results and reports to mediakind.Info and mediakind.Report, and their
// errors caused by the input to *mediakind.Refusal with a job error code and a sentence of ours (the codecs'
// own messages can carry temporary paths and tool output), and a missing ffmpeg or mutool to
// *mediakind.Unavailable. It does no I/O of its own.
package mediafiles

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"filigrane/actors/jobstate"
	"filigrane/actors/mediakind"
	"filigrane/codec"
	"filigrane/codec/pdf"
	"filigrane/codec/video"
	"filigrane/internal/problem"
)

// Job error codes of videos and documents (docs/errors.md).
const (
	CodeInvalidVideo     = string(problem.InvalidVideo)
	CodeVideoTooLarge    = string(problem.VideoTooLarge)
	CodeInvalidDocument  = string(problem.InvalidDocument)
	CodeDocumentTooLarge = string(problem.DocumentTooLarge)
	CodeProcessingError  = string(problem.ProcessingError)
)

// Video is the adapter of the video kind.
type Video struct{ A *video.Adapter }

// NewVideo is the video adapter with the table's bounds of the video kind (ffmpeg and ffprobe from PATH); a
// maxWork above zero replaces the table's MaxWork (a node on slower CPUs than the reference machine lowers it).
// An embed decodes at most the frames its price at rates pays for (mediakind.VideoFramesPaid of its probe), the
// probe that the hold was priced on: the work never outgrows the credits held.
func NewVideo(c *codec.Codec, rates mediakind.Rates, maxWork time.Duration) Video {
	k, _ := mediakind.ByMedia(jobstate.MediaVideo)
	if maxWork <= 0 {
		maxWork = k.Limits.MaxWork
	}
	return Video{A: &video.Adapter{Codec: c, Limits: video.Limits{
		MaxDuration: k.Limits.MaxDuration.Seconds(), MaxFrames: k.Limits.MaxFrames, MaxWork: maxWork},
		FrameBudget: func(in video.Info) int64 { return mediakind.VideoFramesPaid(rates, videoInfo(in)) }}}
}

// WithMaxWork is v judging the work of a video by bound instead of its own MaxWork (mediakind.WorkBounded): a
// job's attempts use the bound of the node that accepted it. A bound of 0 or less keeps v's.
func (v Video) WithMaxWork(bound time.Duration) mediakind.Adapter {
	if bound <= 0 {
		return v
	}
	a := *v.A
	a.Limits.MaxWork = bound
	return Video{A: &a}
}

// withBound is info with the work bound its probe checked.
func (v Video) withBound(info mediakind.Info) mediakind.Info {
	info.MaxWork = v.A.Limits.MaxWork
	return info
}

func videoInfo(in video.Info) mediakind.Info {
	format := strings.ToUpper(in.Container)
	if format == "" {
		format = "MP4"
	}
	var output string
	if c := in.OutputContainer(); c != "" && !strings.EqualFold(c, format) {
		output = strings.ToUpper(c)
	}
	return mediakind.Info{Format: format, Output: output, Width: in.Video.Width, Height: in.Video.Height,
		Frames: int(in.Video.Frames), Duration: time.Duration(in.Duration * float64(time.Second))}
}

// Probe reads the container and the video stream.
func (v Video) Probe(ctx context.Context, src string) (mediakind.Info, error) {
	in, err := v.A.Probe(ctx, src)
	if err != nil {
		return mediakind.Info{}, videoError(err)
	}
	return v.withBound(videoInfo(in)), nil
}

// ProbeDetect reads the container and the video stream for a detection, whose work bound counts a detection's
// work (less per frame than an embed's: no encoding).
func (v Video) ProbeDetect(ctx context.Context, src string) (mediakind.Info, error) {
	in, err := v.A.ProbeDetect(ctx, src)
	if err != nil {
		return mediakind.Info{}, videoError(err)
	}
	return v.withBound(videoInfo(in)), nil
}

// Embed marks every frame with the default encoding options.
func (v Video) Embed(ctx context.Context, src, dst string, id codec.ID) (mediakind.Report, error) {
	rep, err := v.A.Embed(ctx, src, dst, id, video.Options{})
	if err != nil {
		return mediakind.Report{}, videoError(err)
	}
	info := mediakind.Info{Format: strings.ToUpper(rep.Container), Width: rep.Width, Height: rep.Height,
		Frames: int(rep.FrameCount), Duration: time.Duration(rep.Duration * float64(time.Second))}
	source := info
	source.Width, source.Height = rep.SourceWidth, rep.SourceHeight
	segs := make([]jobstate.EmbedUnit, len(rep.Segments))
	for i, sg := range rep.Segments {
		segs[i] = jobstate.EmbedUnit{Index: sg.Index, StartTime: sg.StartTime, EndTime: sg.EndTime, Frames: sg.Frames}
	}
	return mediakind.Report{Info: info, Source: source, Units: int(rep.FrameCount), Segments: segs}, nil
}

// Detect reports one unit per second of video.
func (v Video) Detect(ctx context.Context, src string) (codec.Detection, error) {
	det, err := v.A.Detect(ctx, src)
	if err != nil {
		return codec.Detection{}, videoError(err)
	}
	return det, nil
}

// Available reports whether ffmpeg and ffprobe are installed: every video operation needs both.
func (v Video) Available(jobstate.Operation) error {
	if err := v.A.CheckTools(); err != nil {
		return videoError(err)
	}
	return nil
}

func videoError(err error) error {
	refuse := func(code, detail string) error { return &mediakind.Refusal{Code: code, Detail: detail, Err: err} }
	if we := (*video.WorkError)(nil); errors.As(err, &we) {
		return refuse(CodeVideoTooLarge, workDetail(we))
	}
	if le := (*video.LimitError)(nil); errors.As(err, &le) {
		return refuse(CodeVideoTooLarge, limitDetail(le))
	}
	if se := (*video.SizeError)(nil); errors.As(err, &se) {
		return refuse(CodeInvalidVideo, fmt.Sprintf("the video's frames of %dx%d are too small to carry a watermark: %s; "+
			"send a larger video", se.Width, se.Height, codec.VideoSizeRule()))
	}
	switch {
	case errors.Is(err, video.ErrToolMissing):
		return &mediakind.Unavailable{Detail: "this node cannot process videos now: ffmpeg is not installed; retry later", Err: err}
	case errors.Is(err, video.ErrNotVideo):
		return refuse(CodeInvalidVideo, "the file is not a video in a supported container (MP4, MOV)")
	case errors.Is(err, video.ErrNoVideoStream):
		return refuse(CodeInvalidVideo, "the file has no video stream")
	case errors.Is(err, video.ErrTruncated):
		return refuse(CodeInvalidVideo, "the video is truncated or corrupt")
	case errors.Is(err, video.ErrUnsupported):
		detail := "the video's encoding is not supported"
		if te := (*video.ToolError)(nil); errors.As(err, &te) && te.Stderr != "" {
			detail += ": ffmpeg: " + te.Stderr // which stream the container refused
		}
		return refuse(CodeInvalidVideo, detail)
	case errors.Is(err, video.ErrAlpha):
		return refuse(CodeInvalidVideo, "the video has an alpha channel (transparency), which the watermarked video "+
			"(H.264) cannot keep: send it without alpha, flattened onto its background")
	case errors.Is(err, video.ErrTooSmall):
		return refuse(CodeInvalidVideo, "the video's frames are too small to carry a watermark: "+codec.VideoSizeRule())
	case errors.Is(err, video.ErrMarkUnreadable):
		return refuse(CodeInvalidVideo, "the watermark could not be read back from the marked video: its frames are "+
			"smaller than one tile of the mark (a short side under 256 pixels) and this content does not carry it; "+
			"send a larger video")
	case errors.Is(err, video.ErrFrameBudget):
		return refuse(CodeVideoTooLarge, "the video has more frames than its container declares, more than its price covers "+
			"(the credits held for it); send it as an MP4 or MOV that states its frame count (not fragmented)")
	}
	var te *video.ToolError
	if errors.As(err, &te) && exitedOnItsOwn(te.Err) {
		// ffmpeg ended with an error of its own (not killed): the same file would fail the same way on every
		// attempt, so the job fails now, with ffmpeg's last words (paths reduced to file names) as the reason.
		why := "ffmpeg failed"
		if te.Stderr != "" {
			why += ": " + te.Stderr
		}
		if te.Stage == "probe" || te.Stage == "decode" {
			return refuse(CodeInvalidVideo, "the video could not be read ("+te.Stage+"): "+why)
		}
		return refuse(CodeProcessingError, "the watermarked video could not be written ("+te.Stage+"): "+why)
	}
	return err
}

// workDetail tells the client why a video is more work than a job may take, and what to send instead: shorter
// parts (the frames of this size that fit, and how long that is at its frame rate), or smaller frames.
func workDetail(e *video.WorkError) string {
	var b strings.Builder
	frames := fmt.Sprintf("%d", e.Frames)
	if e.Decoded {
		frames = "more than " + frames
	}
	verb := "watermark"
	if e.Operation == "detect" {
		verb = "check"
	}
	fmt.Fprintf(&b, "the video has %s frames of %dx%d, more than we %s in one job before its deadline "+
		"(about %s of processing, the limit is %s): send it in parts of at most %d frames of this size",
		frames, e.Width, e.Height, verb, clock(e.Work.Seconds()), clock(e.Limit.Seconds()), e.MaxFrames)
	if e.FrameRate > 0 && e.MaxFrames > 0 {
		fmt.Fprintf(&b, " (%s at its %s fps)", clock(float64(e.MaxFrames)/e.FrameRate),
			strconv.FormatFloat(math.Round(e.FrameRate*100)/100, 'f', -1, 64))
	}
	if mp := math.Floor(e.MaxMegapixels*10) / 10; mp >= 0.1 && !e.Decoded { // rounded down: a size that fits
		fmt.Fprintf(&b, ", or with frames of at most %.1f megapixels", mp)
	}
	if e.Decoded {
		b.WriteString("; its container declares fewer frames than it holds (a fragmented MP4 declares none): " +
			"send it as an MP4 or MOV that states its frame count")
	}
	return b.String()
}

// limitDetail tells the client which bound a video is over, by how much, and what to send instead (every
// refusal by a limit names it: before, "the video is longer than we process" left the client guessing).
func limitDetail(e *video.LimitError) string {
	switch {
	case e.Kind == video.ErrTooLong:
		return fmt.Sprintf("the video lasts %.1f s, longer than we process (the limit is %.0f s, %s): send it in parts "+
			"of at most %s", e.Duration, e.MaxDuration, clock(e.MaxDuration), clock(e.MaxDuration))
	case e.Kind == video.ErrTooLarge:
		d := fmt.Sprintf("the video's frames of %dx%d are larger than we process (the limit is %d pixels on the longer "+
			"side and %d pixels a frame)", e.Width, e.Height, e.MaxSide, e.MaxPixels)
		if w, h := fitFrame(e.Width, e.Height, e.MaxSide, e.MaxPixels); w > 0 && h > 0 {
			d += fmt.Sprintf(": send it scaled down to at most %dx%d", w, h)
		}
		return d
	case e.Box != "":
		return fmt.Sprintf("the video's index (its %s box) is %d bytes, more than we read (the limit is %d bytes): "+
			"send it in shorter parts", e.Box, e.Frames, e.MaxFrames)
	case e.Samples:
		return fmt.Sprintf("the video's tracks declare %d samples (video frames and audio packets together), more than "+
			"we read (the limit is %d): send it in shorter parts", e.Frames, e.MaxFrames)
	case e.Decoded:
		return fmt.Sprintf("the video has more than %d frames, more than we process (the limit is %d frames; its "+
			"container declares fewer): send it in parts of at most %d frames", e.MaxFrames, e.MaxFrames, e.MaxFrames)
	}
	return fmt.Sprintf("the video has %d frames, more than we process (the limit is %d frames): send it in parts of "+
		"at most %d frames", e.Frames, e.MaxFrames, e.MaxFrames)
}

// fitFrame is the largest even frame size of the aspect ratio of w×h within maxSide on its longer side and
// maxPixels in all, or 0, 0 when there is none.
func fitFrame(w, h, maxSide, maxPixels int) (int, int) {
	if w <= 0 || h <= 0 {
		return 0, 0
	}
	scale := min(float64(maxSide)/float64(max(w, h)), math.Sqrt(float64(maxPixels)/(float64(w)*float64(h))))
	fw, fh := int(float64(w)*scale)&^1, int(float64(h)*scale)&^1
	for fw > 0 && fh > 0 && (max(fw, fh) > maxSide || fw*fh > maxPixels) { // rounding up past a bound
		fw, fh = fw-2, fh-2
	}
	return fw, fh
}

// clock writes seconds as "9 min 38 s", "30 min", "42 s" or "0.8 s", rounded down.
func clock(seconds float64) string {
	if seconds < 10 {
		return strconv.FormatFloat(math.Floor(seconds*10)/10, 'f', -1, 64) + " s"
	}
	s := int64(seconds)
	switch {
	case s < 60:
		return fmt.Sprintf("%d s", s)
	case s%60 == 0:
		return fmt.Sprintf("%d min", s/60)
	}
	return fmt.Sprintf("%d min %d s", s/60, s%60)
}

// exitedOnItsOwn reports whether err is the exit status of a process that ended by itself with an error, as
// opposed to one killed by a signal (the node's memory pressure, a stop) or one that never started.
func exitedOnItsOwn(err error) bool {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Exited() && ws.ExitStatus() != 0
}

// PDF is the adapter of the document kind.
type PDF struct{ A *pdf.Adapter }

// NewPDF is the PDF adapter with the table's bounds of the document kind (mutool from PATH).
func NewPDF(c *codec.Codec) PDF {
	k, _ := mediakind.ByMedia(jobstate.MediaDocument)
	return PDF{A: &pdf.Adapter{Codec: c, Limits: pdf.Limits{
		MaxBytes: k.MaxInput(jobstate.OperationDetect), MaxPages: k.Limits.MaxPages}}}
}

// Probe opens the document and reads its page count.
func (p PDF) Probe(ctx context.Context, src string) (mediakind.Info, error) {
	a, release := p.prepare(src)
	defer release()
	return a.Probe(ctx, src)
}

// ProbeDetect opens the document for a detection: a signed document, an XFA form or one with JavaScript is
// read (the refusals of marking, which rewrites the file, do not apply).
func (p PDF) ProbeDetect(ctx context.Context, src string) (mediakind.Info, error) {
	a, release := p.prepare(src)
	defer release()
	return a.ProbeDetect(ctx, src)
}

// Embed marks the document with the default strength.
func (p PDF) Embed(ctx context.Context, src, dst string, id codec.ID) (mediakind.Report, error) {
	a, release := p.prepare(src)
	defer release()
	return a.Embed(ctx, src, dst, id)
}

// Detect reads the structural mark, else renders the pages.
func (p PDF) Detect(ctx context.Context, src string) (codec.Detection, error) {
	return p.DetectReserving(ctx, src, nil)
}

// DetectReserving is Detect reserving each rendered page's memory through reserve as it arrives (the
// structural mark, when it verifies, renders nothing and reserves nothing).
func (p PDF) DetectReserving(ctx context.Context, src string, reserve mediakind.Reserve) (codec.Detection, error) {
	a, release := p.prepare(src)
	defer release()
	return a.DetectReserving(ctx, src, reserve)
}

// EstimateMemory bounds what probing, embedding or detecting the document holds in this process: pdfcpu's
// model of it (from the objects and bytes the scan before parsing counts) and a detection's pages under
// analysis. mutool runs in its own memory-limited process and is not counted.
func (p PDF) EstimateMemory(ctx context.Context, src string, op jobstate.Operation) (mediakind.Memory, error) {
	a, release := p.prepare(src)
	defer release()
	return a.EstimateMemory(ctx, src, op)
}

// Prepare returns the adapter for one request's calls on src (mediakind.Preparer): they share the document's
// scan before parsing and an owner-protected document's decrypted copy (pdf.File), which release removes.
func (p PDF) Prepare(src string) (mediakind.Adapter, func()) { return p.prepare(src) }

func (p PDF) prepare(src string) (preparedPDF, func()) {
	f := p.A.Prepare(src)
	return preparedPDF{PDF: p, f: f, src: src}, func() { f.Close() }
}

// preparedPDF is PDF with the calls on src made through f; a call on another file is PDF's (a File of its own).
type preparedPDF struct {
	PDF
	f   *pdf.File
	src string
}

func (p preparedPDF) Probe(ctx context.Context, src string) (mediakind.Info, error) {
	if src != p.src {
		return p.PDF.Probe(ctx, src)
	}
	in, err := p.f.Probe(ctx)
	if err != nil {
		return mediakind.Info{}, pdfError(err, jobstate.OperationEmbed)
	}
	return mediakind.Info{Format: "PDF", Pages: in.Pages}, nil
}

func (p preparedPDF) ProbeDetect(ctx context.Context, src string) (mediakind.Info, error) {
	if src != p.src {
		return p.PDF.ProbeDetect(ctx, src)
	}
	in, err := p.f.ProbeDetect(ctx)
	if err != nil {
		return mediakind.Info{}, pdfError(err, jobstate.OperationDetect)
	}
	return mediakind.Info{Format: "PDF", Pages: in.Pages}, nil
}

func (p preparedPDF) Embed(ctx context.Context, src, dst string, id codec.ID) (mediakind.Report, error) {
	if src != p.src {
		return p.PDF.Embed(ctx, src, dst, id)
	}
	rep, err := p.f.Embed(ctx, dst, id, pdf.Options{})
	if err != nil {
		return mediakind.Report{}, pdfError(err, jobstate.OperationEmbed)
	}
	return mediakind.Report{Info: mediakind.Info{Format: "PDF", Pages: rep.Pages}, Units: rep.Pages, Bytes: rep.OutBytes}, nil
}

func (p preparedPDF) Detect(ctx context.Context, src string) (codec.Detection, error) {
	return p.DetectReserving(ctx, src, nil)
}

func (p preparedPDF) DetectReserving(ctx context.Context, src string, reserve mediakind.Reserve) (codec.Detection, error) {
	if src != p.src {
		return p.PDF.DetectReserving(ctx, src, reserve)
	}
	det, err := p.f.DetectReserving(ctx, pdf.Reserve(reserve))
	if err != nil {
		return codec.Detection{}, pdfError(err, jobstate.OperationDetect)
	}
	return det, nil
}

func (p preparedPDF) EstimateMemory(ctx context.Context, src string, op jobstate.Operation) (mediakind.Memory, error) {
	if src != p.src {
		return p.PDF.EstimateMemory(ctx, src, op)
	}
	m, err := p.f.EstimateMemory(ctx, op == jobstate.OperationDetect)
	if err != nil {
		return mediakind.Memory{}, pdfError(err, op)
	}
	return mediakind.Memory{Bytes: m.Bytes, File: m.File}, nil
}

// Available reports whether mutool is installed. Both operations need it: detection renders the pages of a
// file without an intact structural mark, and embedding repairs broken cross-reference tables with it. Asking
// for it up front keeps the answer the same for every PDF.
func (p PDF) Available(op jobstate.Operation) error {
	if err := p.A.CheckRenderer(); err != nil {
		return pdfError(err, op)
	}
	return nil
}

// pdfError maps the adapter's typed errors to the API's answers for operation op, whose verb the detail names:
// a detection's refusal said "cannot be watermarked" to a client who asked for nothing of the kind.
func pdfError(err error, op jobstate.Operation) error {
	var pe *pdf.Error
	if !errors.As(err, &pe) {
		return err // the server's problem: retried
	}
	if pe.Code == pdf.CodeTool {
		return &mediakind.Unavailable{Detail: "this node cannot process PDFs now: mutool is not installed; retry later", Err: err}
	}
	code := CodeInvalidDocument
	if pe.Code == pdf.CodeTooLarge {
		code = CodeDocumentTooLarge
	}
	// The adapter's reasons are sentences about the document, without paths.
	verb := "watermarked"
	if op == jobstate.OperationDetect {
		verb = "checked for a watermark"
	}
	return &mediakind.Refusal{Code: code, Detail: "the PDF cannot be " + verb + ": " + pe.Reason, Err: err}
}

var (
	_ mediakind.Adapter      = Video{}
	_ mediakind.Adapter      = PDF{}
	_ mediakind.Checker      = Video{}
	_ mediakind.Checker      = PDF{}
	_ mediakind.Estimator    = PDF{}
	_ mediakind.PageReserver = PDF{}
	_ mediakind.DetectProber = PDF{}
	_ mediakind.DetectProber = Video{}
	_ mediakind.WorkBounded  = Video{}
	_ mediakind.Preparer     = PDF{}
	_ mediakind.PageReserver = preparedPDF{}
	_ mediakind.DetectProber = preparedPDF{}
)
