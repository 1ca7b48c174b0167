// Package mediakind is the one table of the media kinds the service accepts (image, document, video): their
// routes, extensions and MIME types, size and pixel/page limits per route, deadline, price rule, whether a
// synchronous detection may answer in the request, and the output's MIME type. The HTTP routes, the upload
// kinds, the limit checks, the prices and the processor read from it, so that adding a kind is a new row
// plus an Adapter.
//
// It owns data and small pure functions only: it does no I/O, holds no mutable state and knows nothing of
// HTTP or actors.
package mediakind

import (
	"context"
	"fmt"
	"path"
	"strings"
	"time"

	"filigrane/actors/jobstate"
	"filigrane/codec"
)

// Limits are the bounds of one kind, per route (spec 8). A byte limit of 0 means the route is not offered.
type Limits struct {
	// DirectEmbed is the largest file sent in the embed request itself.
	DirectEmbed int64
	// UploadEmbed is the largest file of an embed upload.
	UploadEmbed int64
	// BatchMember is the largest file of a batch item: its signed upload, or its member of a batch zip
	// (spec 8: "embed via upload or batch"; a zip member above it is refused with 413 before unpacking).
	BatchMember int64
	// DirectDetect is the largest file sent in a detection request itself ("files over 40 MB are sent
	// through an upload").
	DirectDetect int64
	// UploadDetect is the largest file of a detect upload.
	UploadDetect int64
	// SyncDetect is the largest file a synchronous detection answers in the request; 0: detection of this
	// kind always runs as a job.
	SyncDetect int64
	// EmbedPixels and DetectPixels bound an image's (or a frame's) pixels, per operation; 0: no pixel bound.
	EmbedPixels  int64
	DetectPixels int64
	// MaxPages bounds a document's pages; 0: not a paged kind.
	MaxPages int
	// MaxFrames and MaxDuration bound a video; 0: not a timed kind.
	MaxFrames   int64
	MaxDuration time.Duration
	// MaxWork bounds a video job's estimated CPU time of one core (codec/video's Cost of its frames, their size
	// and its seconds), checked from the probe before anything is held: a job that cannot finish before its
	// deadline is refused rather than run until the deadline fails it.
	MaxWork time.Duration
}

// Info is what a probe learns of a file before it is processed: enough to check limits, set the deadline and
// price the work.
type Info struct {
	Format string // upper case, as recorded on the job (PNG, JPEG, PDF, MP4)
	// Output is the format an embed writes when it is not Format (upper case): a video keeps its container,
	// except an MP4 whose audio only MOV stores, which comes back a MOV. Empty: Format (or, for images, the
	// request's output_format).
	Output   string
	Width    int
	Height   int
	Pages    int           // documents
	Frames   int           // videos; 1 for a still image
	Duration time.Duration // videos
	// MaxWork is the work bound (estimated CPU time of one core) a probe checked the file against: set by the
	// adapters of kinds with one (videos: the node's --max-video-work). The job keeps it (jobstate.Spec.MaxWork)
	// and every attempt judges the file by it (WorkBounded), so that a job accepted by one node's bound is not
	// refused later by another node's.
	MaxWork time.Duration
}

// MediaInfo is in's part of an asset record.
func (in Info) MediaInfo() jobstate.MediaInfo {
	return jobstate.MediaInfo{Width: in.Width, Height: in.Height, Pages: in.Pages, Frames: int64(in.Frames),
		DurationMS: in.Duration.Milliseconds()}
}

// Rates are the credit prices the price rules apply (the plan catalog's prices; DESIGN.md 5).
type Rates struct {
	ImageEmbed          int64 `json:"image_embed"`
	DocumentEmbed       int64 `json:"document_embed"`
	VideoEmbedPerMinute int64 `json:"video_embed_per_started_minute"`
	// VideoFramesPerMinute is how many frames one started minute of video pays for: a video with more frames
	// than its started minutes cover is priced by its frames instead (VideoMinutes), so that a credit bounds the
	// work, which is per frame (each is decoded, marked and encoded), whatever the frame rate. 0 means
	// DefaultVideoFramesPerMinute.
	VideoFramesPerMinute int64 `json:"video_frames_per_minute"`
	Detect               int64 `json:"detect"`
	// GPUHoldMultiplier multiplies the credits held for accelerator=gpu; the charge is the normal price when
	// the work ran on a CPU.
	GPUHoldMultiplier int64 `json:"gpu_hold_multiplier"`
}

// Class is a work class: the pool of workers that runs a kind's jobs. Each node has a pool per class it
// runs and advertises the free slots of each in its cluster metadata, so that work goes where there is room
// for it and a long video never holds a slot that short images wait for.
type Class string

// Work classes.
const (
	// ClassCPU is short CPU work: images and documents (seconds).
	ClassCPU Class = "cpu"
	// ClassCPULong is long CPU work: videos (minutes), kept off the short pool.
	ClassCPULong Class = "cpu-long"
	// ClassGPU is work for an accelerator; only nodes with the gpu role and a device run it.
	ClassGPU Class = "gpu"
)

// Classes lists the work classes in a fixed order.
func Classes() []Class { return []Class{ClassCPU, ClassCPULong, ClassGPU} }

// Kind is one row of the table.
type Kind struct {
	// Media is the kind's name on jobs, uploads, assets and plans.
	Media jobstate.Media
	// RoutePrefix is the path its requests are sent to; "/async", "/detect" and "/detect/async" follow it.
	RoutePrefix string
	// Extensions are the filename extensions (lower case, with the dot) that name a file of this kind, as a
	// detect upload's filename does.
	Extensions []string
	// MIMETypes are the content types of files of this kind.
	MIMETypes []string
	Limits    Limits
	// SyncWait is how long a synchronous embed waits for its job before answering 202 with the receipt; a
	// synchronous detection of a kind with SyncDetect waits as long as its request's budget allows.
	SyncWait time.Duration
	// OutputMIME and OutputExt describe the watermarked file by default; AltOutputMIME lists the other types a
	// request may ask for (images: the output_format option, jobstate.OutputFormat).
	OutputMIME    string
	OutputExt     string
	AltOutputMIME []string
	// Noun names one file of the kind in messages ("image", "PDF", "video").
	Noun string
	// Class is the work class of the kind's jobs on a CPU (an accelerator=gpu job prefers ClassGPU).
	Class Class
}

// SyncWait is the spec's wait of a synchronous request before it answers 202 (spec 8: 20 seconds).
const SyncWait = 20 * time.Second

// Table returns the kinds, image first. It is built on each call: callers may keep or change their copy.
func Table() []Kind {
	return []Kind{
		{
			Media: jobstate.MediaImage, RoutePrefix: "/watermarks/images", Noun: "image",
			// Every format codec/imageio reads: a batch item or a detect upload is typed by its name, so a
			// format missing here is refused there (422) although a direct request of the same file works.
			Extensions: []string{".jpg", ".jpeg", ".jpe", ".jfif", ".png", ".gif", ".webp", ".tif", ".tiff", ".bmp",
				".ppm", ".pgm", ".pnm"},
			MIMETypes: []string{"image/jpeg", "image/png", "image/gif", "image/webp", "image/tiff", "image/bmp",
				netpbmMIME},
			Limits: Limits{
				// Direct embed: 40 MB, an extension of the spec's 20 MB (pixels stay at 40 MP): Etchv's SDKs send
				// files up to 40 MB in the request itself. A node can hold to 20 MB (serve --max-direct-embed).
				DirectEmbed: 40_000_000, UploadEmbed: 50_000_000, BatchMember: 50_000_000,
				DirectDetect: 40_000_000, UploadDetect: 192_000_000, SyncDetect: 95_000_000,
				EmbedPixels: 40_000_000,
				// Detection decodes into the decoder's own layout and analyses a region reduced to 48 MP; the
				// spec sets no pixel bound besides the file size.
				DetectPixels: 200_000_000,
			},
			SyncWait: SyncWait, OutputMIME: "image/png", OutputExt: "png", Class: ClassCPU,
			AltOutputMIME: []string{"image/jpeg", "image/webp"},
		},
		{
			Media: jobstate.MediaDocument, RoutePrefix: "/watermarks/documents", Noun: "PDF",
			Extensions: []string{".pdf"},
			MIMETypes:  []string{"application/pdf"},
			Limits: Limits{
				// The spec does not show a direct limit for PDFs; the upload's is taken.
				DirectEmbed: 20_000_000, UploadEmbed: 20_000_000, BatchMember: 20_000_000,
				DirectDetect: 40_000_000, UploadDetect: 64_000_000, SyncDetect: 95_000_000,
				MaxPages: 10_000,
			},
			SyncWait: SyncWait, OutputMIME: "application/pdf", OutputExt: "pdf", Class: ClassCPU,
		},
		{
			Media: jobstate.MediaVideo, RoutePrefix: "/watermarks/videos", Noun: "video",
			Extensions: []string{".mp4", ".m4v", ".mov"},
			MIMETypes:  []string{"video/mp4", "video/quicktime"},
			Limits: Limits{
				DirectEmbed: 20_000_000, UploadEmbed: 20_000_000, BatchMember: 20_000_000,
				DirectDetect: 40_000_000, UploadDetect: 100_000_000,
				SyncDetect: 0, // video detection always runs as a job
				// codec/video's bounds (ten minutes at up to 60 fps); the deadline reaches its 90-minute cap at 240 frames.
				MaxFrames: 36_000, MaxDuration: 10 * time.Minute,
				// Half that cap, on a node that gives the job about one core: a job at the bound may wait for a
				// worker as long as it runs, and ten minutes of 1080p at 30 fps (about 37 minutes) fit with room
				// for a second attempt from the start when a node is lost (docs/video.md, "Work and deadline").
				// A third refused that video, which the duration limit advertises. Below 240 frames the deadline
				// is shorter, but 15 s a frame is far above any frame's work.
				MaxWork: jobstate.MaxVideoDeadline / 2,
			},
			SyncWait: SyncWait, OutputMIME: "video/mp4", OutputExt: "mp4", Class: ClassCPULong,
		},
	}
}

// ByMedia returns the row of media.
func ByMedia(m jobstate.Media) (Kind, bool) {
	for _, k := range Table() {
		if k.Media == m {
			return k, true
		}
	}
	return Kind{}, false
}

// ByFilename returns the row whose extensions include the filename's (case-insensitive).
func ByFilename(name string) (Kind, bool) {
	ext := strings.ToLower(path.Ext(name))
	if ext == "" {
		return Kind{}, false
	}
	for _, k := range Table() {
		for _, e := range k.Extensions {
			if e == ext {
				return k, true
			}
		}
	}
	return Kind{}, false
}

// ClassesFor lists the work classes a job may run in, preferred first: an accelerator=gpu job prefers the
// gpu class and falls back to its kind's CPU class (it is then charged the normal price, DESIGN.md 4); an
// unknown media kind runs as short CPU work.
func ClassesFor(m jobstate.Media, acc jobstate.Accelerator) []Class {
	c := ClassCPU
	if k, ok := ByMedia(m); ok && k.Class != "" {
		c = k.Class
	}
	if acc == jobstate.AcceleratorGPU {
		return []Class{ClassGPU, c}
	}
	return []Class{c}
}

// DirectLimit is the largest file a request of op sends in its body.
func (k Kind) DirectLimit(op jobstate.Operation) int64 {
	if op == jobstate.OperationDetect {
		return k.Limits.DirectDetect
	}
	return k.Limits.DirectEmbed
}

// UploadLimit is the largest file an upload for op holds.
func (k Kind) UploadLimit(op jobstate.Operation) int64 {
	if op == jobstate.OperationDetect {
		return k.Limits.UploadDetect
	}
	return k.Limits.UploadEmbed
}

// MaxInput is the largest input a job of op can have, by any route: what a processor copies at most.
func (k Kind) MaxInput(op jobstate.Operation) int64 {
	return max(k.DirectLimit(op), k.UploadLimit(op))
}

// MaxPixels is the pixel bound of op; 0 when the kind has none.
func (k Kind) MaxPixels(op jobstate.Operation) int64 {
	if op == jobstate.OperationDetect {
		return k.Limits.DetectPixels
	}
	return k.Limits.EmbedPixels
}

// SyncDetect reports whether a synchronous detection of this kind may answer in the request.
func (k Kind) SyncDetect() bool { return k.Limits.SyncDetect > 0 }

// Deadline is how long a job of this kind may take from acceptance (spec 8): 30 minutes, and for video 15
// seconds more per frame, at most 90 minutes.
func (k Kind) Deadline(info Info) time.Duration { return jobstate.DeadlineFor(k.Media, info.Frames) }

// Price is the credits op costs on a file described by info (DESIGN.md 5): an image or PDF embed costs its
// rate per file, a video embed its rate per priced minute (VideoMinutes: its started minutes, or more when its
// frames are more than those minutes pay for), a detection the detect rate per file whatever the kind. A PDF
// detection's work grows with its pages; the spec shows no price per page, so the price stays per file and
// codec/pdf bounds the work instead (the pages' pixels by the file's size, docs/ARCHITECTURE.md "Security
// audit").
func (k Kind) Price(op jobstate.Operation, r Rates, info Info) int64 {
	if op == jobstate.OperationDetect {
		return r.Detect
	}
	switch k.Media {
	case jobstate.MediaDocument:
		return r.DocumentEmbed
	case jobstate.MediaVideo:
		return r.VideoEmbedPerMinute * VideoMinutes(r, info)
	}
	return r.ImageEmbed
}

// DefaultVideoFramesPerMinute is the frames a started minute of video pays for by default: a minute at 60 fps,
// the highest common rate. Every video at up to 60 fps is priced by its duration alone; a faster one (slow
// motion at 240 fps, or 36,000 frames that declare one second) by its frames.
const DefaultVideoFramesPerMinute = 3600

// FramesPerMinute is r's VideoFramesPerMinute, DefaultVideoFramesPerMinute when unset.
func (r Rates) FramesPerMinute() int64 {
	if r.VideoFramesPerMinute > 0 {
		return r.VideoFramesPerMinute
	}
	return DefaultVideoFramesPerMinute
}

// VideoMinutes is the minutes a video embed is priced for: the minutes its duration starts, or its frames
// counted in minutes of r's FramesPerMinute (rounded up), whichever is more; at least one.
func VideoMinutes(r Rates, info Info) int64 {
	perMinute := r.FramesPerMinute()
	byFrames := (max(int64(info.Frames), 0) + perMinute - 1) / perMinute
	return max(StartedMinutes(info.Duration), byFrames)
}

// VideoFramesPaid is the most frames a video embed priced on info pays for: its priced minutes' frames. An
// embed that decodes more than that (a stream whose probe understated its frames) is stopped there, so that
// the work never outgrows the credits held for it.
func VideoFramesPaid(r Rates, info Info) int64 { return VideoMinutes(r, info) * r.FramesPerMinute() }

// StartedMinutes counts the minutes d starts, at least one.
func StartedMinutes(d time.Duration) int64 {
	if d <= 0 {
		return 1
	}
	return int64((d + time.Minute - 1) / time.Minute)
}

// netpbmMIME is the content type of a Netpbm file (PPM, PGM: codec/imageio's "pnm" format).
const netpbmMIME = "image/x-portable-anymap"

// ContentType is the content type recorded for an input of format (as Info.Format names it).
func (k Kind) ContentType(format string) string {
	switch k.Media {
	case jobstate.MediaImage:
		if strings.EqualFold(format, "PNM") {
			return netpbmMIME // "image/pnm" is no registered type
		}
		return "image/" + strings.ToLower(format)
	case jobstate.MediaDocument:
		return "application/pdf"
	}
	if strings.EqualFold(format, "MOV") {
		return "video/quicktime"
	}
	return "video/mp4"
}

// InputExt is the file extension of an input of format (as Info.Format names it), for naming a source whose
// client-given name has none: an image's format in lower case (jpeg as "jpg"), "pdf", a video's container
// ("mp4", "mov").
func (k Kind) InputExt(format string) string {
	switch k.Media {
	case jobstate.MediaImage:
		if strings.EqualFold(format, "JPEG") {
			return "jpg"
		}
		return strings.ToLower(format)
	case jobstate.MediaDocument:
		return "pdf"
	}
	if strings.EqualFold(format, "MOV") {
		return "mov"
	}
	return "mp4"
}

// OutputType is the content type and the file extension of an embed's output whose format (as Info.Format names
// it) is format: a video keeps its container, so a MOV source comes back a QuickTime file, named .mov and typed
// video/quicktime, where the kind's default (OutputMIME, OutputExt) would call it an MP4. Other kinds write their
// one format (images: their output_format, which the caller chooses).
func (k Kind) OutputType(format string) (mime, ext string) {
	if k.Media == jobstate.MediaVideo && strings.EqualFold(format, "MOV") {
		return "video/quicktime", "mov"
	}
	return k.OutputMIME, k.OutputExt
}

// Report is what an embed did, per unit (page, frame) where the codec reports units.
type Report struct {
	Info Info // of the output
	// Source is the input's Info where it differs from the output's in more than format (a video padded to
	// even sizes); zero means "as Info".
	Source Info
	Units  int
	// Segments are a video's units for the receipt (one per second of frames); nil for other kinds.
	Segments []jobstate.EmbedUnit
	// Bytes is the size of the written output.
	Bytes int64
}

// Adapter runs the codec on files of one kind, as paths on local disk: the processor copies the stored input
// to a bounded temporary file and streams the output back. Errors the input causes are *Refusal; any other
// error is the server's and the attempt is retried.
type Adapter interface {
	Probe(ctx context.Context, src string) (Info, error)
	Embed(ctx context.Context, src, dst string, id codec.ID) (Report, error)
	Detect(ctx context.Context, src string) (codec.Detection, error)
}

// WorkBounded is implemented by the adapters that refuse a file whose estimated work is more than a bound
// (videos). WithMaxWork is the adapter judging by bound instead of its own: a worker runs a job with the bound
// of the node that accepted it (Info.MaxWork, kept in the job's record), whatever its own setting.
type WorkBounded interface {
	WithMaxWork(bound time.Duration) Adapter
}

// DetectProber is implemented by the adapters whose probe before a detection refuses less than the probe before
// an embed (Adapter.Probe): a PDF that must not be rewritten (signed, an XFA form, with JavaScript) is refused
// for marking but is read for detection, which neither rewrites the file nor runs its scripts.
type DetectProber interface {
	ProbeDetect(ctx context.Context, src string) (Info, error)
}

// Refusal is an error caused by the input: retrying cannot help, and the job fails with Code (a job error
// code, docs/errors.md) and Detail (a sentence for the client).
type Refusal struct {
	Code   string
	Detail string
	Err    error
}

func (r *Refusal) Error() string {
	if r.Err != nil {
		return fmt.Sprintf("%s: %s: %v", r.Code, r.Detail, r.Err)
	}
	return r.Code + ": " + r.Detail
}

func (r *Refusal) Unwrap() error { return r.Err }

// Unavailable is an error of the deployment, not of the input: a program the kind needs (ffmpeg and ffprobe
// for videos, mutool to render PDF pages) is not installed on this node. Another attempt on the same node
// cannot help and the client is not at fault: the job fails at once, uncharged, with the media_unavailable
// code, and the edge answers that code with 503 before it accepts a request (Checker).
type Unavailable struct {
	Detail string // a sentence for the client, naming the missing program
	Err    error
}

func (u *Unavailable) Error() string {
	if u.Err != nil {
		return fmt.Sprintf("%s: %v", u.Detail, u.Err)
	}
	return u.Detail
}

func (u *Unavailable) Unwrap() error { return u.Err }

// Checker is implemented by the adapters that run external programs. Available reports, cheaply and without
// touching a file, whether op can run on this node now: nil, or an *Unavailable. Checked per request, so
// that installing the program needs no restart.
type Checker interface {
	Available(op jobstate.Operation) error
}

// Estimator is implemented by the adapters whose work holds memory in this process that grows with the file
// (a PDF's parsed model). EstimateMemory reads src before the work, cheaply, and returns an upper estimate of
// what op holds at its peak; the processor reserves it in the node's decode budget before calling the
// adapter. An error is what the work would answer (a *Refusal for a file over the kind's bounds).
type Estimator interface {
	EstimateMemory(ctx context.Context, src string, op jobstate.Operation) (Memory, error)
}

// Reserve reserves bytes of the node's decode memory for one part of work in progress (a page under analysis),
// waiting while ctx lives; release gives it back once that part is done. Its errors are the processor's, for
// the processor to read back from the adapter's error (wrapped).
type Reserve func(ctx context.Context, bytes int64) (release func(), err error)

// PageReserver is implemented by the Estimators whose detection holds memory per page, of a size known only
// once the page is rendered (a PDF). DetectReserving is Detect reserving each page's memory through reserve as
// the page arrives, and giving it back once analysed; the processor reserves only the estimate's File before,
// instead of every page at the largest size.
type PageReserver interface {
	DetectReserving(ctx context.Context, src string, reserve Reserve) (codec.Detection, error)
}

// Preparer is implemented by the adapters whose calls on one file would repeat costly steps (a PDF's scan
// before parsing, an owner-protected PDF's decrypted copy). Prepare returns the adapter the processor makes one
// request's calls on the local file src with (the estimate, then the probe, the embed or the detection), which
// makes those steps once, and release, which the processor calls once the calls are done and which removes
// what they kept.
type Preparer interface {
	Prepare(src string) (a Adapter, release func())
}

// Memory is an Estimator's answer, in bytes.
type Memory struct {
	// Bytes is the estimated peak.
	Bytes int64
	// File is the part of Bytes that the file causes; the rest is the operation's fixed working memory (a
	// detection's pages being analysed, one per render worker, at the largest page size). A file is too large
	// for a node only when File is more than its whole budget: the fixed part is reserved up to the budget,
	// so that on a small node such work runs alone rather than never. A PageReserver's detection reserves
	// File only, and its pages as they arrive.
	File int64
}

// LimitsMarkdown renders the table's limits and prices as the Markdown table of README.md ("Media kinds"),
// so that the documentation is checked against the table (TestREADMEMatchesTable).
func LimitsMarkdown() string {
	mb := func(n int64) string {
		if n == 0 {
			return "—"
		}
		return fmt.Sprintf("%d MB", n/1_000_000)
	}
	var b strings.Builder
	b.WriteString("| Kind | Routes | Extensions | Direct embed | Embed upload | Direct detect | Detect upload | Sync detect | Bound | Embed price | Output | Work class |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, k := range Table() {
		sync := "up to " + mb(k.Limits.SyncDetect)
		if !k.SyncDetect() {
			sync = "always a job"
		}
		bound := "—"
		switch {
		case k.Limits.EmbedPixels > 0:
			bound = fmt.Sprintf("%d MP embed, %d MP detect", k.Limits.EmbedPixels/1_000_000, k.Limits.DetectPixels/1_000_000)
		case k.Limits.MaxPages > 0:
			bound = fmt.Sprintf("%d pages", k.Limits.MaxPages)
		case k.Limits.MaxFrames > 0:
			bound = fmt.Sprintf("%d frames, %v", k.Limits.MaxFrames, k.Limits.MaxDuration)
			if k.Limits.MaxWork > 0 {
				bound += fmt.Sprintf(", %v of estimated work (one core)", k.Limits.MaxWork)
			}
		}
		price := "1 credit per file"
		if k.Media == jobstate.MediaVideo {
			price = fmt.Sprintf("1 credit per started minute or per started %d frames (60 fps), whichever is more", DefaultVideoFramesPerMinute)
		}
		output := "`" + k.OutputMIME + "`"
		if len(k.AltOutputMIME) > 0 {
			output += " (or `" + strings.Join(k.AltOutputMIME, "`, `") + "` by `output_format`)"
		}
		if mov, _ := k.OutputType("MOV"); mov != k.OutputMIME {
			output += " (`" + mov + "` from a MOV)"
		}
		fmt.Fprintf(&b, "| %s | `%s` | %s | %s | %s | %s | %s | %s | %s | %s | %s | `%s` |\n", k.Media, k.RoutePrefix,
			strings.Join(k.Extensions, " "), mb(k.Limits.DirectEmbed), mb(k.Limits.UploadEmbed), mb(k.Limits.DirectDetect),
			mb(k.Limits.UploadDetect), sync, bound, price, output, k.Class)
	}
	return b.String()
}
