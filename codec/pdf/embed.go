package pdf

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/pdfcpu/pdfcpu/pkg/api"

	"filigrane/codec"
)

// Embed marks src with id and writes the marked PDF to dst. dst is written to a temporary file next to it and
// renamed into place, so a failure leaves no partial output. Inputs that must not be marked are refused with an
// *Error before any work on the content.
func (a *Adapter) Embed(ctx context.Context, src, dst string, id codec.ID, opt Options) (EmbedReport, error) {
	f := a.Prepare(src)
	defer f.Close()
	return f.Embed(ctx, dst, id, opt)
}

// Embed is Adapter.Embed of the File's input.
func (f *File) Embed(ctx context.Context, dst string, id codec.ID, opt Options) (EmbedReport, error) {
	a := f.a
	if a.Codec == nil {
		return EmbedReport{}, errors.New("pdf: adapter without a codec")
	}
	strength := opt.Strength
	if strength == 0 {
		strength = DefaultStrength
	}
	if math.IsNaN(strength) || strength < MinStrength || strength > MaxStrength {
		return EmbedReport{}, fmt.Errorf("pdf: strength %.2f outside %.0f..%.0f", strength, MinStrength, MaxStrength)
	}
	if opt.PageImage && opt.Tiles {
		return EmbedReport{}, errors.New("pdf: options PageImage and Tiles both set")
	}
	doc, err := f.open(ctx, true)
	if err != nil {
		return EmbedReport{}, err
	}
	defer doc.close()
	rep := EmbedReport{Pages: doc.info.Pages, InBytes: doc.inBytes, Strength: strength, Repaired: doc.info.Repaired,
		Rewritten: true}
	mode := overlayAuto
	switch {
	case opt.PageImage:
		mode = overlayPageImages
	case opt.Tiles:
		mode = overlayTiles
	}
	ow, err := newOverlayWriter(doc, a.Codec, id, strength, mode, opt.Binary, pageImageBudget(doc.inBytes, doc.info.Pages))
	if err != nil {
		return EmbedReport{}, fmt.Errorf("pdf: overlay: %w", err)
	}
	if err := ow.plan(doc.info.Pages); err != nil {
		return EmbedReport{}, fmt.Errorf("pdf: overlay: %w", err)
	}
	// A page object named at several places in the page tree (mutool clean -gggg merges identical pages) gets
	// its overlay once, at its first mention: a second would be drawn over the first. Each mention is a page of
	// the receipt. Mentions that inherit another box, rotation or resources would need two overlays on one page.
	copyOf, differ, err := doc.pageCopies()
	if err != nil {
		return EmbedReport{}, err
	}
	if differ[0] > 0 {
		return EmbedReport{}, refuse(CodePageTree, "page %d shows the same page object as page %d but inherits another size, rotation or resources, "+
			"so one overlay cannot fit both; write each page as its own object (for example qpdf --empty --pages in.pdf -- out.pdf) and send it again",
			differ[0], differ[1])
	}
	for p := 1; p <= doc.info.Pages; p++ {
		if p%64 == 0 && ctx.Err() != nil {
			return EmbedReport{}, fmt.Errorf("pdf: embed: %w", ctx.Err())
		}
		if c := copyOf[p-1]; c != p-1 {
			u := rep.Units[c]
			u.Index = p - 1
			rep.Units = append(rep.Units, u)
			continue
		}
		u, err := ow.page(p)
		if err != nil {
			return EmbedReport{}, err
		}
		rep.Units = append(rep.Units, u)
	}
	rep.PageImageBytes = ow.pageImageBytes
	rep.OverlayBits = ow.lv.bits
	now := time.Now()
	if err := doc.writeStructural(a.Codec, id, now); err != nil {
		return EmbedReport{}, fmt.Errorf("pdf: structural mark: %w", err)
	}
	meta, err := doc.prepareMetadata(&rep, now)
	if err != nil {
		return EmbedReport{}, fmt.Errorf("pdf: metadata: %w", err)
	}
	n, err := writeAtomic(ctx, doc, dst, meta)
	if err != nil {
		return EmbedReport{}, err
	}
	rep.OutBytes = n
	return rep, nil
}

// writeAtomic writes the document to a temporary file in dst's directory and renames it to dst, laid out as
// the input was (objstreams.go). The input's creation date and, in a rewritten metadata stream, the dates the
// writer wrote are put in place (meta, metadata.go).
func writeAtomic(ctx context.Context, doc *document, dst string, meta *metadataEdit) (int64, error) {
	setWriteLayout(doc.ctx)
	if _, err := decodeReachableLazy(ctx, doc.ctx.XRefTable); err != nil {
		return 0, fmt.Errorf("pdf: write: %w", err)
	}
	f, err := os.CreateTemp(filepath.Dir(dst), ".filigrane-pdf-*")
	if err != nil {
		return 0, fmt.Errorf("pdf: create output: %w", err)
	}
	tmp := f.Name()
	ok := false
	defer func() {
		if !ok {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if err := safeWrite(doc, f); err != nil {
		return 0, fmt.Errorf("pdf: write: %w", err)
	}
	if err := doc.patchWritten(f, meta); err != nil {
		return 0, fmt.Errorf("pdf: write: metadata: %w", err)
	}
	if doc.ctx.WriteObjectStream {
		g, err := repacked(ctx, doc, f, filepath.Dir(dst))
		if ctx.Err() != nil {
			return 0, fmt.Errorf("pdf: write: %w", ctx.Err())
		}
		if err == nil { // else the writer's file stands: valid, only larger
			f.Close()
			os.Remove(tmp)
			f, tmp = g, g.Name()
		}
	}
	if err := f.Sync(); err != nil {
		return 0, fmt.Errorf("pdf: write: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("pdf: write: %w", err)
	}
	if err := f.Close(); err != nil {
		return 0, fmt.Errorf("pdf: write: %w", err)
	}
	if err := os.Rename(tmp, dst); err != nil {
		return 0, fmt.Errorf("pdf: write: %w", err)
	}
	ok = true
	return st.Size(), nil
}

func safeWrite(doc *document, f *os.File) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("writer failure: %v", r)
		}
	}()
	return api.WriteContext(doc.ctx, f)
}
