package pdf

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// grayPage is one rendered page: 8-bit luma, row-major, no padding.
type grayPage struct {
	Pix           []uint8
	Width, Height int
}

// renderer runs mutool draw on a page range and streams the pages as raw PGM on its stdout. The process gets a
// time budget per page (a timer reset by every page that arrives), besides the limits of every mutool process
// (mutoolRunner: address space, its own process group).
type renderer struct {
	mutool    mutoolRunner
	dpi       float64
	pageLimit time.Duration
	maxPixels int
	// total, when set, is the renderer time all the document's pages may take together, shared by the
	// renderer processes; now reads the clock for it (nil: time.Now; tests advance their own).
	total *renderTime
	now   func() time.Time
	// reserve, when set, reserves the memory of each page once its size is read, before its pixels are: the
	// page is read, and then analysed by the caller, only once it is granted. Its wait counts in neither of
	// the page's time budgets (the renderer is blocked on its output meanwhile, not drawing).
	reserve func(ctx context.Context, w, h int) (release func(), err error)
}

// renderTime is a document's renderer time budget: what its pages took to arrive, all processes together,
// against limit plus perMP for each megapixel delivered. A page's own allowance is counted with its time, so
// pages that draw within perMP a megapixel never run the budget down, and costlier ones draw on limit.
type renderTime struct {
	limit  time.Duration
	perMP  time.Duration
	used   atomic.Int64 // nanoseconds
	pixels atomic.Int64 // delivered so far
}

// spend counts d for a page of pixels pixels and reports whether the budget still holds.
func (b *renderTime) spend(d time.Duration, pixels int64) bool {
	if b == nil {
		return true
	}
	px := b.pixels.Add(pixels)
	return time.Duration(b.used.Add(int64(d))) <= b.allowed(px)
}

// allowed is the budget once px pixels have been delivered (float: the product can pass int64 in theory).
func (b *renderTime) allowed(px int64) time.Duration {
	return b.limit + time.Duration(min(float64(b.perMP)*float64(px)/1e6, float64(math.MaxInt64/2)))
}

// errRenderTimeout marks a page that did not arrive within its budget.
var errRenderTimeout = errors.New("page rendering exceeded its time budget")

// errRenderTotal marks a document whose pages took longer than its renderer time budget.
var errRenderTotal = errors.New("rendering exceeded the document's time budget")

// render calls fn for each page of pages (1-based, increasing) in order. A page the renderer skipped (it failed
// on it) shows up as fewer pages: the caller counts what arrived.
func (r renderer) render(ctx context.Context, path string, pages []int, fn func(page int, g grayPage)) error {
	if len(pages) == 0 {
		return nil
	}
	if err := r.mutool.available(); err != nil {
		return err
	}
	cmd, stderr := r.mutool.command(ctx, 0, "draw", "-q", "-r", strconv.FormatFloat(r.dpi, 'f', 2, 64), "-c", "gray", "-F", "pgm",
		"-o", "-", path, pageRanges(pages))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return fmt.Errorf("pdf: render: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("pdf: render: %w", err)
	}
	// The page timer kills the process group as ctx's end does (mutoolRunner.command).
	kill := func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	timer := time.AfterFunc(r.pageLimit, kill)
	timedOut := func() bool { return !timer.Stop() }

	now := r.now
	if now == nil {
		now = time.Now
	}
	br := bufio.NewReaderSize(stdout, 1<<16)
	k, page := 0, pages[0] // the page expected next and its place in pages
	var readErr, reserveErr error
	for k < len(pages) {
		page = pages[k]
		// The wait for a page is the renderer's time on it (the analysis of the previous one runs before).
		waitFrom := now()
		w, h, err := readPGMHeader(br, r.maxPixels)
		if err != nil {
			if !errors.Is(err, io.EOF) {
				readErr = err
			}
			break
		}
		release := func() {}
		if r.reserve != nil {
			if timedOut() {
				readErr = errRenderTimeout
				break
			}
			waited := now().Sub(waitFrom)
			if release, reserveErr = r.reserve(ctx, w, h); reserveErr != nil {
				break
			}
			timer.Reset(r.pageLimit)
			waitFrom = now().Add(-waited)
		}
		pix, err := readPGMPixels(br, w, h)
		switch {
		case err != nil:
			readErr = err
		case timedOut():
			readErr = errRenderTimeout
		case !r.total.spend(now().Sub(waitFrom), int64(w)*int64(h)):
			readErr = errRenderTotal
		}
		if readErr != nil {
			release()
			break
		}
		fn(page, grayPage{Pix: pix, Width: w, Height: h})
		release()
		k++
		timer.Reset(r.pageLimit)
	}
	expired := timedOut()
	if readErr != nil || reserveErr != nil {
		kill()
	}
	io.Copy(io.Discard, stdout)
	werr := cmd.Wait()
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("pdf: render: %w", ctx.Err())
	case reserveErr != nil:
		return fmt.Errorf("pdf: memory for page %d: %w", page, reserveErr)
	case errors.Is(readErr, errRenderTotal):
		return &Error{Code: CodeTooLarge, Reason: fmt.Sprintf("rendering the pages took longer than a file of this size allows, all pages together: %s, plus %s a megapixel rendered (%s at page %d)",
			r.total.limit, r.total.perMP, r.total.allowed(r.total.pixels.Load()).Round(time.Millisecond), page), Err: errRenderTotal}
	case errors.Is(readErr, errRenderTimeout) || expired && k < len(pages):
		return &Error{Code: CodeRender, Reason: fmt.Sprintf("page %d did not render within %s", page, r.pageLimit), Err: errRenderTimeout}
	case readErr != nil:
		return &Error{Code: CodeRender, Reason: fmt.Sprintf("page %d could not be rendered", page), Err: readErr}
	case werr != nil && k < len(pages):
		return &Error{Code: CodeRender, Reason: fmt.Sprintf("page %d could not be rendered (renderer: %s)", page, stderr.String()), Err: werr}
	}
	return nil
}

// pageRanges is pages (increasing) as mutool draw's page list: runs of consecutive pages as first-last, joined
// by commas ("1-4,6,9-12"), which keeps the argument short when only a few pages are left out.
func pageRanges(pages []int) string {
	var b strings.Builder
	for i := 0; i < len(pages); {
		j := i
		for j+1 < len(pages) && pages[j+1] == pages[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(pages[i]))
		if j > i {
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(pages[j]))
		}
		i = j + 1
	}
	return b.String()
}

// readPGM reads one binary 8-bit PGM image, refusing sizes above maxPixels.
func readPGM(br *bufio.Reader, maxPixels int) (grayPage, error) {
	w, h, err := readPGMHeader(br, maxPixels)
	if err != nil {
		return grayPage{}, err
	}
	pix, err := readPGMPixels(br, w, h)
	if err != nil {
		return grayPage{}, err
	}
	return grayPage{Pix: pix, Width: w, Height: h}, nil
}

// readPGMHeader reads the header of one binary 8-bit PGM image, refusing sizes above maxPixels; the samples
// follow (readPGMPixels). io.EOF: no image at all.
func readPGMHeader(br *bufio.Reader, maxPixels int) (w, h int, err error) {
	magic := make([]byte, 2)
	if _, err := io.ReadFull(br, magic); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return 0, 0, fmt.Errorf("truncated PGM header")
		}
		return 0, 0, err
	}
	if string(magic) != "P5" {
		return 0, 0, fmt.Errorf("renderer wrote %q, not a PGM", magic)
	}
	var v [3]int
	for i := range v {
		n, err := pgmInt(br)
		if err != nil {
			return 0, 0, err
		}
		v[i] = n
	}
	// Exactly one whitespace byte separates the header from the samples.
	if _, err := br.ReadByte(); err != nil {
		return 0, 0, err
	}
	w, h, maxv := v[0], v[1], v[2]
	if w <= 0 || h <= 0 || maxv != 255 || w > math.MaxInt32/h || w*h > maxPixels {
		return 0, 0, fmt.Errorf("renderer wrote a %dx%d PGM with maximum %d", w, h, maxv)
	}
	return w, h, nil
}

// readPGMPixels reads the w×h samples that follow a PGM header.
func readPGMPixels(br *bufio.Reader, w, h int) ([]uint8, error) {
	pix := make([]uint8, w*h)
	if _, err := io.ReadFull(br, pix); err != nil {
		return nil, fmt.Errorf("truncated PGM: %w", err)
	}
	return pix, nil
}

func pgmInt(br *bufio.Reader) (int, error) {
	n, digits := 0, 0
	for {
		c, err := br.ReadByte()
		if err != nil {
			return 0, fmt.Errorf("truncated PGM header")
		}
		switch {
		case c >= '0' && c <= '9':
			if digits >= 9 {
				return 0, fmt.Errorf("PGM header number too long")
			}
			n = n*10 + int(c-'0')
			digits++
		case c == '#' && digits == 0:
			if _, err := br.ReadSlice('\n'); err != nil {
				return 0, fmt.Errorf("truncated PGM header")
			}
		case c == ' ' || c == '\n' || c == '\r' || c == '\t':
			if digits > 0 {
				br.UnreadByte()
				return n, nil
			}
		default:
			return 0, fmt.Errorf("bad PGM header byte %q", c)
		}
	}
}
