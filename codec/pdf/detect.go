package pdf

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"filigrane/codec"
)

// Detect looks for the mark in src: it reads the structural layer and, when that is missing or does not verify,
// renders every page and runs the image detector on it (on its own for at most aloneBudget pages, see there).
// The result has one unit per page (index from 0) and a combined verdict: the id most pages decoded, else the
// decode of the pages' soft outputs summed; pages that did not decode on their own report the document's id
// when their soft output matches its codeword (pageMatch).
func (a *Adapter) Detect(ctx context.Context, src string) (codec.Detection, error) {
	return a.DetectReserving(ctx, src, nil)
}

// Reserve reserves bytes of this process's memory for one part of a detection's work (a page under analysis),
// waiting while ctx lives; the detection calls release once that part is done. An error ends the detection,
// which returns it wrapped.
type Reserve func(ctx context.Context, bytes int64) (release func(), err error)

// DetectReserving is Detect that reserves each rendered page's memory through reserve (PageMemory of its size)
// as the renderer delivers it, before its pixels are read: the file's own part (EstimateMemory's File) is the
// caller's to reserve before. nil reserves nothing.
func (a *Adapter) DetectReserving(ctx context.Context, src string, reserve Reserve) (codec.Detection, error) {
	f := a.Prepare(src)
	defer f.Close()
	return f.DetectReserving(ctx, reserve)
}

// DetectReserving is Adapter.DetectReserving of the File's input.
func (f *File) DetectReserving(ctx context.Context, reserve Reserve) (codec.Detection, error) {
	a := f.a
	if a.Codec == nil {
		return codec.Detection{}, errors.New("pdf: adapter without a codec")
	}
	if q := f.quickMark(ctx); q.ok {
		return structuralDetection(q.id, q.pages), nil
	}
	doc, err := f.open(ctx, false)
	if err != nil {
		return codec.Detection{}, err
	}
	defer doc.close()
	if doc.info.Marked {
		return structuralDetection(doc.info.MarkedID, doc.info.Pages), nil
	}
	d, _, err := a.detectRenderedStats(ctx, doc, aloneBudget, reserve)
	return d, err
}

// DetectRendered skips the structural layer and detects on the rendered pages only (for measurements).
func (a *Adapter) DetectRendered(ctx context.Context, src string) (codec.Detection, error) {
	if a.Codec == nil {
		return codec.Detection{}, errors.New("pdf: adapter without a codec")
	}
	doc, err := a.open(ctx, src, false)
	if err != nil {
		return codec.Detection{}, err
	}
	defer doc.close()
	d, _, err := a.detectRenderedStats(ctx, doc, aloneBudget, nil)
	return d, err
}

// DetectRenderedStats is DetectRendered that also reports how the pages were decoded (the false-positive
// budget's counts), for tests and benchmarks.
func (a *Adapter) DetectRenderedStats(ctx context.Context, src string) (codec.Detection, DetectStats, error) {
	if a.Codec == nil {
		return codec.Detection{}, DetectStats{}, errors.New("pdf: adapter without a codec")
	}
	doc, err := a.open(ctx, src, false)
	if err != nil {
		return codec.Detection{}, DetectStats{}, err
	}
	defer doc.close()
	return a.detectRenderedStats(ctx, doc, aloneBudget, nil)
}

// quickStructural reads the structural mark and the page count without parsing the whole file: mutool loads
// objects lazily, so this costs tens of milliseconds whatever the document's size. Anything unexpected (no
// mutool, no mark, a MAC that does not verify, a page count out of bounds) answers false and the full path runs.
func (a *Adapter) quickStructural(ctx context.Context, src string) (codec.ID, int, bool) {
	lim := a.Limits.withDefaults()
	if st, err := os.Stat(src); err != nil || !st.Mode().IsRegular() || st.Size() > lim.MaxBytes || sniff(src) != nil {
		return codec.ID{}, 0, false
	}
	m := a.runner(lim)
	if m.available() != nil {
		return codec.ID{}, 0, false
	}
	var out limitedBuffer
	if err := m.run(ctx, lim.PageTimeout, 0, &out, "show", src, "trailer/Root/Pages/Count", "trailer/Info/"+infoKey,
		"trailer/Root/PieceInfo/"+pieceKey+"/Private/ID", "trailer/Root/PieceInfo/"+pieceKey+"/Private/MAC"); err != nil {
		return codec.ID{}, 0, false
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 4 {
		return codec.ID{}, 0, false
	}
	pages, err := strconv.Atoi(strings.TrimSpace(lines[0]))
	if err != nil || pages < 1 || pages > lim.MaxPages {
		return codec.ID{}, 0, false
	}
	if rest, ok := strings.CutPrefix(showString(lines[1]), infoPrefix); ok {
		if idHex, macHex, ok := strings.Cut(rest, ":"); ok {
			if id, ok := verifyStructural(a.Codec, idHex, macHex); ok {
				return id, pages, true
			}
		}
	}
	if id, ok := verifyStructural(a.Codec, showString(lines[2]), showString(lines[3])); ok {
		return id, pages, true
	}
	return codec.ID{}, 0, false
}

// showString decodes a string as mutool show prints it: (literal) with backslash escapes, or <hex>.
func showString(s string) string {
	s = strings.TrimSpace(s)
	switch {
	case len(s) >= 2 && s[0] == '(' && s[len(s)-1] == ')':
		return s[1 : len(s)-1] // the mark is hex digits and colons: no escapes to undo
	case len(s) >= 2 && s[0] == '<' && s[len(s)-1] == '>':
		b, err := hex.DecodeString(s[1 : len(s)-1])
		if err != nil {
			return ""
		}
		return string(b)
	}
	return ""
}

func structuralDetection(id codec.ID, pages int) codec.Detection {
	s := id.String()
	d := codec.Detection{Watermarked: true, Confidence: 1, WatermarkID: &s}
	for p := 0; p < pages; p++ {
		d.Units = append(d.Units, codec.Unit{Index: p, Watermarked: true, Confidence: 1, WatermarkID: &s})
	}
	return d
}

// renderDPI picks the resolution: the adapter's, lowered so that the largest page stays within RenderMaxPixels.
// The visual layer's geometry follows the page size, so detection does not depend on the resolution.
func (a *Adapter) renderDPI(doc *document) float64 {
	dpi := a.dpi()
	if maxArea := maxDisplayedArea(doc); maxArea > 0 {
		if px := maxArea * (dpi / 72) * (dpi / 72); px > float64(doc.lim.RenderMaxPixels) {
			dpi *= math.Sqrt(float64(doc.lim.RenderMaxPixels) / px)
		}
	}
	return dpi
}

// Page decodes and the false-positive bound (docs/codec.md, section 5). A page decoded on its own is a blind
// image decode: up to 14 synchronisation hypotheses, each checking up to 9 words against the frame check, so
// 126 · 2^-48 = 4.5e-13 per page. A document may have up to 10,000 pages, so at most aloneBudget pages are
// decoded on their own (all of them up to that count, else aloneBudget pages spread evenly over the document);
// every other page is analysed under the one geometry the overlay has on it (Codec.AnalyzeLumaAt: soft output
// chosen by the pilot alone, no decision), and contributes through the combined decode of all synchronised
// pages' soft outputs (one decode, 9 words) and through the codeword test of pageMatch against the ids the
// document decoded to. Per document, whatever its length:
//
//	P(false positive) ≤ 200 · 126 · 2^-48 + 9 · 2^-48 = 8.96e-11 ≤ 1e-10.
const aloneBudget = 200

// maxMatchIDs bounds how many of the document's decoded ids each page is compared with (the most voted first).
const maxMatchIDs = 8

// DetectStats counts the work of one detection by rendering, for tests and benchmarks: it is what the
// false-positive bound above is about.
type DetectStats struct {
	Pages    int // pages rendered
	Alone    int // pages decoded on their own (blind decodes, 126 checked words each at most)
	Analysed int // pages analysed at the overlay geometry only (no decision of their own)
	Synced   int // pages whose pilot synchronised (their soft output is summed and kept for the codeword test)
	Combined int // decodes of the summed soft outputs (9 checked words each at most)
	Matched  int // pages reported watermarked by the codeword test against a decoded id, not by their own decode
	// RenderWait is the renderer time the pages took to arrive, all processes together, which the document's
	// renderer time budget bounds; RenderAllowed is that budget once the pages counted were delivered (the
	// fixed part, renderTimeBudget, plus RenderTimePerMP a megapixel).
	RenderWait, RenderAllowed time.Duration
}

// alone reports whether page i (from 0) of a document of pages pages is decoded on its own under a budget of
// budget pages (aloneBudget; benchmarks pass more for a baseline): every page up to budget pages, else the first
// page of each of budget equal runs (the first page included).
func alone(i, pages, budget int) bool {
	if pages <= budget {
		return true
	}
	return i == 0 || i*budget/pages != (i-1)*budget/pages
}

// overlayWaxel is the waxel, in pixels, that the overlay of a page presents in a w×h rendering at dpi: 1/512 of
// the short side, at least minWaxelPt (overlayWriter.form). At 150 dpi it is the image detector's nominal
// geometry.
func overlayWaxel(w, h int, dpi float64) float64 {
	return max(float64(min(w, h))/codec.OverlayWaxelsPerShortSide, minWaxelPt*dpi/72)
}

// The work of a detection by rendering is the pages' pixels: rendering them, and analysing each at the
// overlay's geometry (aloneBudget bounds the costlier blind decodes separately, to 200 pages of about 0.5 CPU-s
// whatever their size). A document names its pages' sizes in a few bytes, so the pixels are bounded by what the
// file's size pays for (Limits.detectPixelBudget): checked on the pages' boxes before anything is rendered
// (estimatePixels), and counted as the renderer delivers them, which is what bounds a page whose box the
// estimate read differently from the renderer.
var errPixelBudget = errors.New("the detection's pixel budget is spent")

// estimatePixels is the pixels the renderer draws for the document's pages at dpi: each page's visible box as
// displayed (/UserUnit scales it), at most maxPixels (a larger page is refused by the renderer's reader). A page
// without a media box counts as US Letter, which is what MuPDF draws. ok is false when the page tree cannot be
// walked in one pass; the count as pages arrive then bounds the work alone. A page that is a copy of an earlier
// one (copyOf, pageCopies) is not rendered and counts nothing.
func estimatePixels(doc *document, dpi float64, maxPixels int, copyOf []int) (total int64, ok bool) {
	if _, _, err := doc.page(1); err != nil || doc.pageList == nil {
		return 0, false
	}
	for i, r := range doc.pageList {
		if i < len(copyOf) && copyOf[i] != i {
			continue
		}
		w, h := 612.0, 792.0
		if box := visibleBox(r.attrs.MediaBox, r.attrs.CropBox); box != nil {
			u := pageUserUnit(doc, r.dict)
			w, h = box.Width()*u, box.Height()*u
		}
		px := math.Ceil(w*dpi/72) * math.Ceil(h*dpi/72)
		total += int64(min(px, float64(maxPixels)))
	}
	return total, true
}

// pixelBudgetError is the refusal of a document whose pages need more pixels than its budget.
func pixelBudgetError(doc *document, needed string, dpi float64) *Error {
	l := doc.lim
	return refuse(CodeTooLarge, "detecting the mark renders every page: %s at %.0f dpi, more than the %d megapixels a file "+
		"of %d bytes allows (%d, plus %d a byte, at most %d)", needed, dpi, l.detectPixelBudget(doc.inBytes)/1e6, doc.inBytes,
		l.DetectPixelsFree/1e6, l.DetectPixelsPerByte, l.DetectPixels/1e6)
}

func (a *Adapter) detectRenderedStats(ctx context.Context, doc *document, budget int, reserve Reserve) (codec.Detection, DetectStats, error) {
	pages := doc.info.Pages
	r := renderer{mutool: a.runner(doc.lim), dpi: a.renderDPI(doc),
		pageLimit: doc.lim.PageTimeout, maxPixels: doc.lim.RenderMaxPixels + doc.lim.RenderMaxPixels/8,
		total: &renderTime{limit: doc.lim.renderTimeBudget(doc.inBytes), perMP: doc.lim.RenderTimePerMP}, now: a.now}
	if reserve != nil {
		r.reserve = func(ctx context.Context, w, h int) (func(), error) { return reserve(ctx, PageMemory(w, h)) }
	}
	// A page object the tree names at several places (mutool clean -gggg merges identical pages) is rendered and
	// decoded once, at its first mention: the same trial, not a new one, for the false-positive bound. What
	// follows works on the rendered pages (order); each mention reports its copy's unit at the end.
	copyOf, _, err := doc.pageCopies()
	if err != nil {
		return codec.Detection{}, DetectStats{}, err
	}
	order := make([]int, 0, pages) // the pages rendered (from 1)
	at := make([]int, pages)       // page i (from 0): its copy's place in order
	for i, c := range copyOf {
		if c == i {
			at[i] = len(order)
			order = append(order, i+1)
		} else {
			at[i] = at[c]
		}
	}
	pixelBudget := doc.lim.detectPixelBudget(doc.inBytes)
	if est, ok := estimatePixels(doc, r.dpi, r.maxPixels, copyOf); ok && est > pixelBudget {
		return codec.Detection{}, DetectStats{}, pixelBudgetError(doc, fmt.Sprintf("%d megapixels for its %d pages", est/1e6, len(order)), r.dpi)
	}
	pages = len(order)
	var rendered atomic.Int64 // pixels delivered by the renderer so far, all workers together
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	workers := max(1, min(doc.lim.renderWorkers(), pages))
	units := make([]codec.Unit, pages)
	softs := make([]pageSoft, pages)
	for i := range units {
		units[i] = codec.Unit{Index: i}
	}
	per := (pages + workers - 1) / workers
	var wg sync.WaitGroup
	errs := make([]error, workers)
	sums := make([]codec.FrameSoft, workers) // per worker: the sum of its pages' soft outputs
	stats := make([]DetectStats, workers)
	for w := 0; w < workers; w++ {
		first, last := w*per+1, min(pages, (w+1)*per)
		if first > last {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			st := &stats[w]
			errs[w] = r.render(ctx, doc.path, order[first-1:last], func(page int, g grayPage) {
				if rendered.Add(int64(g.Width)*int64(g.Height)) > pixelBudget {
					stop(errPixelBudget) // the renderers are killed; this page and those after it are not analysed
					return
				}
				i := at[page-1]
				lp := codec.LumaPlane{Pix: toFloat(g.Pix), Width: g.Width, Height: g.Height, Stride: g.Width}
				var soft codec.FrameSoft
				st.Pages++
				if alone(i, pages, budget) {
					det, s := a.Codec.DetectLumaSoft(lp)
					u := det.Units[0]
					u.Index = i
					units[i] = u
					soft = s
					st.Alone++
				} else {
					soft = a.Codec.AnalyzeLumaAt(lp, overlayWaxel(g.Width, g.Height, r.dpi))
					st.Analysed++
				}
				if soft.Coded == nil {
					return
				}
				softs[i] = quantise(soft.Coded)
				st.Synced++
				if sums[w].Coded == nil {
					sums[w].Coded = make([]float64, len(soft.Coded))
				}
				for k, v := range soft.Coded {
					sums[w].Coded[k] += v
				}
				sums[w].PilotZ = max(sums[w].PilotZ, soft.PilotZ)
			})
		}()
	}
	wg.Wait()
	st := DetectStats{RenderWait: time.Duration(r.total.used.Load()), RenderAllowed: r.total.allowed(r.total.pixels.Load())}
	for _, s := range stats {
		st.Pages += s.Pages
		st.Alone += s.Alone
		st.Analysed += s.Analysed
		st.Synced += s.Synced
	}
	// On an error the counts still say how far the detection got (for tests); the detection itself failed.
	if errors.Is(context.Cause(ctx), errPixelBudget) {
		return codec.Detection{}, st, pixelBudgetError(doc, fmt.Sprintf("more than %d megapixels", rendered.Load()/1e6), r.dpi)
	}
	for _, err := range errs {
		if err != nil {
			return codec.Detection{}, st, err
		}
	}
	d := combine(a.Codec, units, softs, sums, budget, &st)
	if len(copyOf) != pages {
		d.Units = make([]codec.Unit, len(copyOf))
		for i := range copyOf {
			d.Units[i] = units[at[i]]
			d.Units[i].Index = i
		}
	}
	return d, st, nil
}

func toFloat(p []uint8) []float32 {
	f := make([]float32, len(p))
	for i, v := range p {
		f[i] = float32(v)
	}
	return f
}

// pageSoft is a page's coded-bit LLRs kept for the codeword test, quantised to 8 bits over ±4 times their RMS
// (the test clips at 3 times the RMS, so nothing it uses is lost but the rounding): 912 bytes a page instead of
// 7 KB, which matters at 10,000 pages. nil when the page did not synchronise.
type pageSoft []int8

func quantise(coded []float64) pageSoft {
	var ms float64
	for _, v := range coded {
		ms += v * v
	}
	if ms == 0 {
		return nil
	}
	scale := 127 / (4 * math.Sqrt(ms/float64(len(coded))))
	q := make(pageSoft, len(coded))
	for i, v := range coded {
		q[i] = int8(max(-127, min(127, math.Round(v*scale))))
	}
	return q
}

func (q pageSoft) coded() []float64 {
	f := make([]float64, len(q))
	for i, v := range q {
		f[i] = float64(v)
	}
	return f
}

// pageMatch is the codeword test of one page against the ids the document decoded to (at most maxMatchIDs): the
// best id whose codeword correlates with the page's soft output at codec.SnapMinZ or more, with no other id
// within 3 of it (as codec.Snap). For a page that does not carry an id the correlation is about N(0, 1), so a
// document of 10,000 pages attributes a page wrongly with probability at most 10,000 · 8 · Q(9) = 9e-15; and
// it is only asked once the document has decoded, so it adds nothing to the document's false-positive bound.
// The confidence is the cosine between the page's clipped soft word and the codeword (z / √912).
func pageMatch(q pageSoft, ids []codec.ID) (codec.ID, float64, bool) {
	if q == nil || len(ids) == 0 {
		return codec.ID{}, 0, false
	}
	coded := q.coded()
	best, bestZ, secondZ := codec.ID{}, math.Inf(-1), math.Inf(-1)
	for _, id := range ids {
		z := codec.CodewordZ(coded, id)
		switch {
		case z > bestZ:
			best, bestZ, secondZ = id, z, bestZ
		case z > secondZ:
			secondZ = z
		}
	}
	if bestZ < codec.SnapMinZ || bestZ-secondZ < 3 {
		return codec.ID{}, 0, false
	}
	return best, min(1, bestZ/math.Sqrt(float64(len(q)))), true
}

// combine forms the document verdict from the pages: the id decoded by the most pages (ties: the most
// confident), else one decode of the summed soft outputs of the pages that synchronised. Then every page that
// did not decode to an id of its own is tested against the document's ids (pageMatch), so that pages not
// decoded alone, and damaged pages of a marked document, report the id they carry.
func combine(c *codec.Codec, units []codec.Unit, softs []pageSoft, sums []codec.FrameSoft, budget int, st *DetectStats) codec.Detection {
	d := codec.Detection{}
	type vote struct {
		n    int
		conf float64
	}
	votes := map[string]*vote{}
	for _, u := range units {
		if u.Watermarked && u.WatermarkID != nil {
			v := votes[*u.WatermarkID]
			if v == nil {
				v = &vote{}
				votes[*u.WatermarkID] = v
			}
			v.n++
			v.conf = max(v.conf, u.Confidence)
		}
	}
	var found []string
	if len(votes) > 0 {
		for id := range votes {
			found = append(found, id)
		}
		sort.Slice(found, func(i, j int) bool {
			a, b := votes[found[i]], votes[found[j]]
			if a.n != b.n {
				return a.n > b.n
			}
			if a.conf != b.conf {
				return a.conf > b.conf
			}
			return found[i] < found[j]
		})
		best := found[0]
		d.Watermarked, d.Confidence, d.WatermarkID = true, votes[best].conf, &best
	} else {
		synced, aloneOnly := 0, true
		for i, s := range softs {
			if s != nil {
				synced++
				aloneOnly = aloneOnly && alone(i, len(softs), budget)
			}
		}
		// One synchronised page decoded alone already failed its own decode; its sum is the same word.
		if synced >= 2 || synced == 1 && !aloneOnly {
			comb := c.CombineFrames(sums)
			st.Combined++
			if comb.Watermarked {
				d = comb
				found = []string{*comb.WatermarkID}
			} else {
				d.Confidence = comb.Confidence
				d.Soft = comb.Soft
			}
		}
		if !d.Watermarked {
			for _, u := range units {
				d.Confidence = max(d.Confidence, u.Confidence)
			}
		}
	}
	var ids []codec.ID
	for _, s := range found[:min(len(found), maxMatchIDs)] {
		if id, err := codec.ParseID(s); err == nil {
			ids = append(ids, id)
		}
	}
	for i := range units {
		if units[i].Watermarked {
			continue
		}
		if id, conf, ok := pageMatch(softs[i], ids); ok {
			s := id.String()
			units[i] = codec.Unit{Index: i, Watermarked: true, Confidence: conf, WatermarkID: &s}
			st.Matched++
		}
	}
	d.Units = units
	return d
}

// repair rewrites src with mutool clean, which rebuilds broken cross-reference tables, within the parse budget.
func (a *Adapter) repair(ctx context.Context, src, dst string, lim Limits) error {
	return a.clean(ctx, src, dst, lim)
}

// clean runs mutool clean with flags on src, writing dst, under the renderer's memory limit, the parse time
// budget and a file size limit of twice the input limit (what the caller accepts of its output): the objects of
// compressed object streams are written out plain, and those of an encrypted file were not counted before
// (decrypt.go), so the output could otherwise fill the disk for the whole minute.
func (a *Adapter) clean(ctx context.Context, src, dst string, lim Limits, flags ...string) error {
	m := a.runner(lim)
	if err := m.available(); err != nil {
		return err
	}
	args := append(append([]string{"clean"}, flags...), src, dst)
	if err := m.run(ctx, lim.ParseTimeout, 2*lim.MaxBytes, nil, args...); err != nil {
		os.Remove(dst)
		return err
	}
	return nil
}

// CheckRenderer reports whether mutool can be found, without running it: nil, or an *Error with CodeTool.
// Rendering pages for detection and the repair pass of a broken file need it.
func (a *Adapter) CheckRenderer() error {
	return a.runner(a.Limits.withDefaults()).available()
}
