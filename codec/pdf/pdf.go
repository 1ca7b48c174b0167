// Package pdf is the PDF media adapter of the watermark codec: it marks a PDF file with a watermark id and finds
// the id again, files on disk in and out. It owns PDF parsing and writing (through pdfcpu), the refusal of PDFs
// it must not or cannot mark, and page rendering for detection (through mutool as a limited subprocess). It must
// not know about HTTP, jobs or credits: callers map its typed errors (*Error, Code) to their own answers.
//
// The mark has two layers, detected independently:
//
//   - structural: the id and a MAC under the deployment key, kept in the catalog's /PieceInfo and the document
//     information dictionary. It survives byte copies and re-saves (qpdf, mutool clean) and is read without
//     rendering.
//   - visual: a faint, key-dependent tile (the image codec's pilot and coded chips for the id, high-passed)
//     drawn over every page as a gray image under a constant soft mask that darkens white paper by at most
//     Options.Strength levels and lightens dark backgrounds by as much (overlayImage). Its waxel is 1/512 of
//     the page's short side (2 pixels at 150 dpi on small pages), so a rendering of the page at any
//     resolution, or a screenshot of it, presents the pattern at a geometry the image detector tries first. It
//     survives printing to PDF, rasterisation and JPEG compression of the page images. The tile is drawn as
//     one image per page shape (no seams; about 7 KB each) while the images' bytes stay within a budget that
//     keeps the output under twice the input, else as abutting copies of one shared tile image (MuPDF renders
//     their edges as faint lines; pageImageBudget, Options.PageImage). The images have 4-bit levels, or binary
//     ones (error-diffused, half the bytes) in documents too small for the 4-bit image of their main page
//     shape (binaryLevels, Options.Binary).
//
// Detection decodes at most aloneBudget pages of a document on their own (a blind decode each, which is what the
// false-positive bound counts); the other pages are analysed at the overlay's known geometry and contribute
// through one combined decode and a codeword test against the document's ids (detect.go, docs/codec.md). The
// pixels it renders, all pages together, are bounded by what the file's size pays for (Limits.DetectPixels*).
//
// Text, vectors, links, outlines, metadata and page geometry are kept: the page content is wrapped in q/Q and
// the overlay is appended as one shared form XObject per page size. What would ship an unmarked copy beside the
// mark is dropped: thumbnails and applications' private data (metadata.go).
package pdf

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/pdfcpu/pdfcpu/pkg/api"

	"filigrane/codec"
)

// Code names a refusal; HTTP callers answer them as 422 with the Error's reason.
type Code string

// Refusal codes.
const (
	CodeNotPDF     Code = "pdf_not_pdf"     // the bytes are not a PDF (maybe another format)
	CodeEncrypted  Code = "pdf_encrypted"   // the PDF is encrypted
	CodeSigned     Code = "pdf_signed"      // the PDF carries digital signatures a rewrite would break
	CodeXFA        Code = "pdf_xfa"         // the PDF is an XFA form
	CodeJavaScript Code = "pdf_javascript"  // the PDF carries JavaScript
	CodeBroken     Code = "pdf_broken"      // the PDF could not be parsed, even after a repair pass
	CodeTooLarge   Code = "pdf_too_large"   // file size, page count, page size or a parsing budget exceeded
	CodeNoPages    Code = "pdf_no_pages"    // the document has no page
	CodePageTree   Code = "pdf_page_tree"   // the page tree names a node more than once, or (for marking) one page with two inherited views
	CodeRender     Code = "pdf_render"      // a page could not be rendered within its time and memory budget
	CodeTool       Code = "pdf_tool_absent" // the renderer is not installed (a server problem, not the input's)
)

// Error is a typed refusal or failure with a reason a user can read.
type Error struct {
	Code   Code
	Reason string
	Err    error // underlying cause, may be nil
}

func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("pdf: %s: %v", e.Reason, e.Err)
	}
	return "pdf: " + e.Reason
}

func (e *Error) Unwrap() error { return e.Err }

// Is makes errors.Is(err, &Error{Code: c}) match any Error with code c.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code && t.Reason == "" && t.Err == nil
}

func refuse(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Reason: fmt.Sprintf(format, args...)}
}

// CodeOf returns the code of a typed error in err's chain, or "" when there is none.
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// Limits bound the work one file may cause. Zero fields take the defaults of DefaultLimits.
type Limits struct {
	MaxBytes        int64         // file size
	MaxPages        int           // page count
	MaxPageSide     float64       // longest page side in points (14400 is the PDF maximum of 200 inches)
	MaxDecodeBytes  int64         // bytes one stream, and all object and cross-reference streams together, may decode to while parsing
	MaxObjects      int           // objects the file names (cross-reference sections; object headers), counted before parsing (objcount.go)
	MaxTokens       int64         // syntax tokens of the file and its inflated object streams, counted before parsing (tokens.go)
	MaxDepth        int           // nesting of dictionaries, arrays and the page tree while parsing
	ParseTimeout    time.Duration // whole parse (pdfcpu, cancelled through the context)
	PageTimeout     time.Duration // rendering one page
	RenderMemory    int64         // address-space limit of the renderer process, in bytes
	RenderMaxPixels int           // pixels of one rendered page; larger pages are rendered at a lower resolution
	RenderWorkers   int           // renderer processes in parallel (0: one per CPU, at most 4)
	// Detection renders and analyses every page (detect.go), so its work grows with the pages' pixels, which a
	// few bytes a page can name. The pixels rendered for one detection, all pages together, are bounded by
	// DetectPixelsFree plus DetectPixelsPerByte for each byte of the file, and by DetectPixels whatever its
	// size (detectPixelBudget).
	DetectPixels        int64
	DetectPixelsFree    int64
	DetectPixelsPerByte int64
	// The pixels do not bound the renderer's time on a page that is costly to draw (many distinct page
	// objects can share one such content stream), so the time the pages take to arrive, all together, is
	// bounded: by RenderTime plus RenderTimePerMB for each megabyte of the file (renderTimeBudget), plus
	// RenderTimePerMP for each megapixel the renderer has delivered so far. The last term pays for the pages
	// themselves, so a long document is not cut off part-way by a figure set for a short one, and it stays
	// bounded by what the file pays for: the pixels are (detectPixelBudget).
	RenderTime      time.Duration
	RenderTimePerMB time.Duration
	RenderTimePerMP time.Duration
}

// DefaultLimits are the limits for uploads of up to 64 MB.
func DefaultLimits() Limits {
	return Limits{
		MaxBytes:       64 << 20,
		MaxPages:       10000,
		MaxPageSide:    14400,
		MaxDecodeBytes: 256 << 20,
		MaxObjects:     200_000,
		// The parser spends 0.09-0.70 CPU-s and 30-81 MB a million tokens (0s the most, <<>> the least:
		// bench/README.md, "PDF syntax tokens"); real documents have 0.1-0.41 a byte, 1.18 million for the
		// largest measured (octave.pdf, 4.7 MB, 1,158 pages), about 6.4 million for a 64 MB file of images.
		// 16 million bounds a parse near 10 CPU-s and 1 GB (15.7 million 0s, embedded), where object streams
		// inflating to the 256 MB bound held 168 million (26-45 CPU-s).
		MaxTokens:       16_000_000,
		MaxDepth:        64,
		ParseTimeout:    60 * time.Second,
		PageTimeout:     10 * time.Second,
		RenderMemory:    1 << 30,
		RenderMaxPixels: 16 << 20,
		// 2,000 MP is about 950 Letter or A4 pages at 150 dpi whatever the file; beyond that a page of that
		// size needs 1.05 kB of file (the real documents measured have 3.2 to 90 kB a page, test booklets
		// 0.65 kB; a crafted page sharing its content with the others, a few dozen bytes: docs/ARCHITECTURE.md
		// "Security audit"); 24,000 MP covers 10,000 A4 pages. One Letter page costs about 0.065 CPU-s to
		// render and analyse (0.14 s for a 16 MP page), so the floor is about a CPU-minute and the ceiling,
		// reached only by a file of 11 MB or more, about 13.
		DetectPixels:        24_000_000_000,
		DetectPixelsFree:    2_000_000_000,
		DetectPixelsPerByte: 2000,
		// Real documents render in a few ms a page (octave.pdf: 1,158 pages in 2.7 CPU-s; gnuplot.pdf, 311
		// pages of plots, 0.7 s): 60 s covers thousands of pages even on a loaded node, and a document of costly
		// pages (maps, drawings) brings their bytes: 10 s a megabyte, 700 s for the largest detection upload,
		// under the job deadline.
		RenderTime:      60 * time.Second,
		RenderTimePerMB: 10 * time.Second,
		// A marked page renders about 7 times slower than an unmarked one (its overlay image is drawn under a
		// soft mask): 17 against 2.4 ms of CPU a gnuplot.pdf page at 150 dpi (2.1 MP), and the renderer waits
		// for the CPU the pages' analysis takes: on a 2-core node at a load of 6, 1,555 marked Letter pages
		// took 89.5 s of renderer time, against the 72 s that RenderTime and RenderTimePerMB allow their
		// 1.3 MB (docs/codec.md, section 8). 40 ms a megapixel is 84 ms a Letter page at 150 dpi (203 s for
		// that document); at most 80 s more for the 2,000 MP a small file may render, 960 s at the 24,000 MP
		// ceiling (with the 700 s of a 64 MB file, under the 30-minute job deadline).
		RenderTimePerMP: 40 * time.Millisecond,
	}
}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	return Limits{
		MaxBytes: orDefault(l.MaxBytes, d.MaxBytes), MaxPages: orDefault(l.MaxPages, d.MaxPages),
		MaxPageSide: orDefault(l.MaxPageSide, d.MaxPageSide), MaxDecodeBytes: orDefault(l.MaxDecodeBytes, d.MaxDecodeBytes),
		MaxObjects: orDefault(l.MaxObjects, d.MaxObjects), MaxDepth: orDefault(l.MaxDepth, d.MaxDepth),
		MaxTokens:    orDefault(l.MaxTokens, d.MaxTokens),
		ParseTimeout: orDefault(l.ParseTimeout, d.ParseTimeout), PageTimeout: orDefault(l.PageTimeout, d.PageTimeout),
		RenderMemory: orDefault(l.RenderMemory, d.RenderMemory), RenderMaxPixels: orDefault(l.RenderMaxPixels, d.RenderMaxPixels),
		RenderWorkers: l.RenderWorkers,
		DetectPixels:  orDefault(l.DetectPixels, d.DetectPixels), DetectPixelsFree: orDefault(l.DetectPixelsFree, d.DetectPixelsFree),
		DetectPixelsPerByte: orDefault(l.DetectPixelsPerByte, d.DetectPixelsPerByte),
		RenderTime:          orDefault(l.RenderTime, d.RenderTime), RenderTimePerMB: orDefault(l.RenderTimePerMB, d.RenderTimePerMB),
		RenderTimePerMP: orDefault(l.RenderTimePerMP, d.RenderTimePerMP),
	}
}

// detectPixelBudget is how many pixels one detection may render, all pages together, for a file of size bytes.
func (l Limits) detectPixelBudget(size int64) int64 {
	if size > 0 && l.DetectPixelsPerByte > (l.DetectPixels-l.DetectPixelsFree)/size {
		return l.DetectPixels
	}
	return min(l.DetectPixels, l.DetectPixelsFree+l.DetectPixelsPerByte*max(size, 0))
}

// renderWorkers is how many pages a detection renders and analyses at once: RenderWorkers, else one per CPU,
// at most 4.
func (l Limits) renderWorkers() int {
	if l.RenderWorkers > 0 {
		return l.RenderWorkers
	}
	return min(runtime.GOMAXPROCS(0), 4)
}

// renderTimeBudget is how long a detection's pages may take to render, all together, for a file of size bytes,
// before the allowance of the pixels rendered (RenderTimePerMP, counted by renderTime as the pages arrive).
func (l Limits) renderTimeBudget(size int64) time.Duration {
	return l.RenderTime + time.Duration(float64(l.RenderTimePerMB)*float64(max(size, 0))/(1<<20))
}

// orDefault is v when set (above zero), else the default d.
func orDefault[T int | int64 | float64 | time.Duration](v, d T) T {
	if v > 0 {
		return v
	}
	return d
}

// Adapter marks and detects PDFs with one codec. It holds no per-file state and is safe for concurrent use.
type Adapter struct {
	Codec  *codec.Codec
	Mutool string // path of mutool; "" means "mutool" on PATH
	Limits Limits
	// RenderDPI is the resolution pages are rendered at for detection (0: 150).
	RenderDPI float64
	// now reads the clock for the renderer's time budget (nil: time.Now); tests set it.
	now func() time.Time
	// trace, when set (tests), is told each costly step as it starts: "mutool <command>" for each mutool
	// process, "scan" for each object scan before parsing (objstm.go).
	trace func(step string)
}

// Options tune one embedding.
type Options struct {
	// Strength is the peak darkening of the visual layer on a white page, in 8-bit levels (0: DefaultStrength).
	Strength float64
	// PageImage and Tiles force one way of drawing the visual layer; with neither (the default) the document
	// gets page images within a byte budget and tiles beyond it (pageImageBudget). A page image is one image per
	// page shape; tiles are a grid of abutting copies of one shared tile image. MuPDF draws abutting images
	// with a one-pixel overlap at fractional positions, so with tiles every tile edge renders as a line about 2
	// levels darker than the grain (faintly visible on a white page when looked for); one image has no inner
	// edges. Robustness measured the same either way in the benchmark (bench/README.md), and better with page
	// images on small pages at the weakest strength (minWaxelReach); the cost is the output size: 4.5-9 KB per
	// page shape instead of about 4.4 KB per document. Pages whose waxel grid is above maxPageImagePixels get
	// tiles either way. Setting both is an error.
	PageImage bool
	Tiles     bool
	// Binary draws the visual layer with binary levels (one bit a sample, error-diffused: binaryLevels), which
	// the default keeps for documents too small for the 4-bit images (chooseLevels). Half the bytes and more
	// robust to screenshots (56 of 56 96-dpi JPEG q85 screenshots of one-page documents of seven sizes give
	// the exact id, against 41 with 4 bits), but a grain with about 1.4 times the standard deviation and
	// 1.3-1.4 times the low-frequency part of the 4-bit one (TestBinaryLevelsKeepTheGrainFine; docs/codec.md,
	// "Tiny PDF documents"), about the 4-bit grain at strength 5: so not the default.
	Binary bool
}

// DefaultStrength is the visual layer's default peak darkening in 8-bit levels; MaxStrength bounds requests.
const (
	DefaultStrength = 4.0
	MinStrength     = 1.0
	MaxStrength     = 8.0
)

// Info describes a PDF as Probe found it.
type Info struct {
	Pages   int
	Version string
	// Signed, XFA and JavaScript are what Embed refuses (Probe refuses them too, with the reason).
	Signed     bool
	XFA        bool
	JavaScript bool
	Repaired   bool // the file parsed only after the repair pass
	// Marked reports a valid structural mark; MarkedID is its id.
	Marked   bool
	MarkedID codec.ID
}

// PageUnit is what Embed did to one page.
type PageUnit struct {
	Index  int     `json:"index"`
	Width  float64 `json:"width_pt"`  // the visible box as displayed (after /Rotate and /UserUnit), in points
	Height float64 `json:"height_pt"` //
	Tiles  int     `json:"tiles"`     // copies of the mark's tile covering the page (drawn as tiles or as one page image)
	// PageImage reports that the page's overlay is one image (no seams) rather than a grid of tile images.
	PageImage bool `json:"page_image"`
}

// EmbedReport describes one embedding.
type EmbedReport struct {
	Pages     int        `json:"pages"`
	Units     []PageUnit `json:"units"`
	InBytes   int64      `json:"in_bytes"`
	OutBytes  int64      `json:"out_bytes"`
	Strength  float64    `json:"strength"`
	Repaired  bool       `json:"repaired"`
	Rewritten bool       `json:"rewritten"`
	// PageImageBytes is what the page images added to the file (their encoded streams; 0 with tiles only).
	PageImageBytes int64 `json:"page_image_bytes"`
	// OverlayBits is the sample depth of the visual layer's images: 4, or 1 for a document too small for the
	// 4-bit overlay (binaryLevels).
	OverlayBits int `json:"overlay_bits"`
	// PDFA is the PDF/A part and conformance the input's XMP metadata declared ("1B", "2U"; "?" for metadata
	// too large to edit that names the PDF/A identification, which is then dropped; empty for none);
	// PDFARemoved, that the output no longer declares it: the overlay's transparency breaks PDF/A-1, and
	// PDF/A-2 and -3 allow it only with a PDF/A output intent (pdfa.go; docs/codec.md, "PDF/A").
	PDFA        string `json:"pdfa,omitempty"`
	PDFARemoved bool   `json:"pdfa_removed,omitempty"`
}

func (a *Adapter) mutool() string {
	if a.Mutool != "" {
		return a.Mutool
	}
	return "mutool"
}

func (a *Adapter) dpi() float64 {
	if a.RenderDPI > 0 {
		return a.RenderDPI
	}
	return 150
}

// pdfcpu keeps a configuration directory under the user's home unless told not to; the service must not write
// there, and the switch is process-global in pdfcpu, so it is flipped once here.
var disableConfigDir sync.Once

func init() {
	disableConfigDir.Do(api.DisableConfigDir)
}

// Probe parses src and reports what it is, refusing (with a typed error) what Embed would refuse, before any
// work on the content.
func (a *Adapter) Probe(ctx context.Context, src string) (Info, error) {
	f := a.Prepare(src)
	defer f.Close()
	return f.Probe(ctx)
}

// ProbeDetect is Probe for a detection: it refuses what Detect refuses (a file it cannot read), and not what only
// Embed refuses (signatures, XFA, JavaScript: detection neither rewrites the file nor runs its scripts).
func (a *Adapter) ProbeDetect(ctx context.Context, src string) (Info, error) {
	f := a.Prepare(src)
	defer f.Close()
	return f.ProbeDetect(ctx)
}
