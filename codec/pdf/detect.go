package pdf

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"filigrane/codec"
)

// Detect looks for the mark in src: it reads the structural layer and, when that is missing or does not verify,
// renders every page and runs the image detector on it. The result has one unit per page (index from 0) and a
// combined verdict: the id most pages decoded, else the decode of the pages' soft outputs summed.
func (a *Adapter) Detect(ctx context.Context, src string) (codec.Detection, error) {
	if a.Codec == nil {
		return codec.Detection{}, errors.New("pdf: adapter without a codec")
	}
	if id, pages, ok := a.quickStructural(ctx, src); ok {
		return structuralDetection(id, pages), nil
	}
	doc, err := a.open(ctx, src, false)
	if err != nil {
		return codec.Detection{}, err
	}
	defer doc.close()
	if doc.info.Marked {
		return structuralDetection(doc.info.MarkedID, doc.info.Pages), nil
	}
	return a.detectRendered(ctx, doc)
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
	return a.detectRendered(ctx, doc)
}

// quickStructural reads the structural mark and the page count without parsing the whole file: mutool loads
// objects lazily, so this costs tens of milliseconds whatever the document's size. Anything unexpected (no
// mutool, no mark, a MAC that does not verify, a page count out of bounds) answers false and the full path runs.
func (a *Adapter) quickStructural(ctx context.Context, src string) (codec.ID, int, bool) {
	lim := a.Limits.withDefaults()
	if st, err := os.Stat(src); err != nil || !st.Mode().IsRegular() || st.Size() > lim.MaxBytes || sniff(src) != nil {
		return codec.ID{}, 0, false
	}
	if _, err := exec.LookPath(a.mutool()); err != nil {
		return codec.ID{}, 0, false
	}
	qctx, cancel := context.WithTimeout(ctx, lim.PageTimeout)
	defer cancel()
	script := fmt.Sprintf(`ulimit -v %d 2>/dev/null; exec "$0" "$@"`, max(lim.RenderMemory>>10, 64<<10))
	cmd := exec.CommandContext(qctx, "/bin/sh", "-c", script, a.mutool(), "show", src, "trailer/Root/Pages/Count",
		"trailer/Info/"+infoKey, "trailer/Root/PieceInfo/"+pieceKey+"/Private/ID",
		"trailer/Root/PieceInfo/"+pieceKey+"/Private/MAC")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second
	var out limitedBuffer
	cmd.Stdout = &out
	if err := cmd.Run(); err != nil {
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
	dims, err := doc.ctx.XRefTable.PageDims()
	if err != nil {
		return dpi
	}
	maxArea := 0.0
	for _, d := range dims {
		maxArea = max(maxArea, d.Width*d.Height)
	}
	if maxArea > 0 {
		if px := maxArea * (dpi / 72) * (dpi / 72); px > float64(doc.lim.RenderMaxPixels) {
			dpi *= math.Sqrt(float64(doc.lim.RenderMaxPixels) / px)
		}
	}
	return dpi
}

func (a *Adapter) detectRendered(ctx context.Context, doc *document) (codec.Detection, error) {
	pages := doc.info.Pages
	r := renderer{mutool: a.mutool(), dpi: a.renderDPI(doc), pageLimit: doc.lim.PageTimeout,
		memLimit: doc.lim.RenderMemory, maxPixels: doc.lim.RenderMaxPixels + doc.lim.RenderMaxPixels/8}
	workers := doc.lim.RenderWorkers
	if workers <= 0 {
		workers = min(runtime.GOMAXPROCS(0), 4)
	}
	workers = max(1, min(workers, pages))
	units := make([]codec.Unit, pages)
	softs := make([]codec.FrameSoft, pages)
	for i := range units {
		units[i] = codec.Unit{Index: i}
	}
	per := (pages + workers - 1) / workers
	var wg sync.WaitGroup
	errs := make([]error, workers)
	for w := 0; w < workers; w++ {
		first, last := w*per+1, min(pages, (w+1)*per)
		if first > last {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[w] = r.render(ctx, doc.path, first, last, func(page int, g grayPage) {
				det, soft := a.Codec.DetectLumaSoft(codec.LumaPlane{Pix: toFloat(g.Pix), Width: g.Width,
					Height: g.Height, Stride: g.Width})
				u := det.Units[0]
				u.Index = page - 1
				units[page-1] = u
				softs[page-1] = soft
			})
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return codec.Detection{}, err
		}
	}
	return combine(a.Codec, units, softs), nil
}

func toFloat(p []uint8) []float32 {
	f := make([]float32, len(p))
	for i, v := range p {
		f[i] = float32(v)
	}
	return f
}

// combine forms the document verdict from the pages: the id decoded by the most pages (ties: the most
// confident), else one decode of the summed soft outputs of the pages whose pilot synchronised.
func combine(c *codec.Codec, units []codec.Unit, softs []codec.FrameSoft) codec.Detection {
	d := codec.Detection{Units: units}
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
	if len(votes) > 0 {
		ids := make([]string, 0, len(votes))
		for id := range votes {
			ids = append(ids, id)
		}
		sort.Slice(ids, func(i, j int) bool {
			a, b := votes[ids[i]], votes[ids[j]]
			if a.n != b.n {
				return a.n > b.n
			}
			if a.conf != b.conf {
				return a.conf > b.conf
			}
			return ids[i] < ids[j]
		})
		best := ids[0]
		d.Watermarked, d.Confidence, d.WatermarkID = true, votes[best].conf, &best
		return d
	}
	var synced []codec.FrameSoft
	for _, s := range softs {
		if s.Coded != nil {
			synced = append(synced, s)
		}
	}
	if len(synced) >= 2 {
		comb := c.CombineFrames(synced)
		if comb.Watermarked {
			d.Watermarked, d.Confidence, d.WatermarkID = true, comb.Confidence, comb.WatermarkID
			return d
		}
		d.Confidence = comb.Confidence
	}
	for _, u := range units {
		d.Confidence = max(d.Confidence, u.Confidence)
	}
	return d
}

// repair rewrites src with mutool clean, which rebuilds broken cross-reference tables, within the parse budget.
func (a *Adapter) repair(ctx context.Context, src, dst string, lim Limits) error {
	if err := a.CheckRenderer(); err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, lim.ParseTimeout)
	defer cancel()
	script := fmt.Sprintf(`ulimit -v %d 2>/dev/null; exec "$0" "$@"`, max(lim.RenderMemory>>10, 64<<10))
	cmd := exec.CommandContext(rctx, "/bin/sh", "-c", script, a.mutool(), "clean", src, dst)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second
	var out limitedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		os.Remove(dst)
		return fmt.Errorf("mutool clean: %w: %s", err, out.String())
	}
	return nil
}

// CheckRenderer reports whether mutool can be found, without running it: nil, or an *Error with CodeTool.
// Rendering pages for detection and the repair pass of a broken file need it.
func (a *Adapter) CheckRenderer() error {
	if _, err := exec.LookPath(a.mutool()); err != nil {
		return &Error{Code: CodeTool, Reason: "the PDF renderer (mutool) is not installed", Err: err}
	}
	return nil
}
