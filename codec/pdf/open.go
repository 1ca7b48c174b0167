package pdf

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/pdfcpu/pdfcpu/pkg/api"
	"github.com/pdfcpu/pdfcpu/pkg/pdfcpu"
	"github.com/pdfcpu/pdfcpu/pkg/pdfcpu/model"
	"github.com/pdfcpu/pdfcpu/pkg/pdfcpu/types"

	"filigrane/codec"
)

// document is one parsed PDF: the pdfcpu context plus what the refusal checks found.
type document struct {
	ctx     *model.Context
	path    string // the file the context was read from (the repaired copy after a repair pass)
	tmpDir  string // holds the repaired copy; removed by close
	inBytes int64
	info    Info
	lim     Limits
	codec   *codec.Codec
	// pageList is every page with its inherited attributes, from one walk of the page tree (page, pages.go);
	// pageWalkFailed records a tree that walk could not read, which is then read page by page.
	pageList       []pageRef
	pageWalkFailed bool
	// repeatedPages records a page tree that names a page object more than once (checkPageTree, pageCopies).
	repeatedPages bool
	// file, when set, is the File the document was opened from for itself alone (Adapter.open): close closes it.
	file *File
	// xmpBudget is what the metadata streams' edits may decode, all together: what the memory estimate counted
	// for them (the scan's xmp of the input, countMetadata), so that they hold no more than was reserved.
	xmpBudget int64
	// catalogXMP is what repairMetadata found of the catalog's metadata stream, and did with it.
	catalogXMP catalogXMPState
}

func (d *document) close() {
	if d.tmpDir != "" {
		os.RemoveAll(d.tmpDir)
	}
	if d.file != nil {
		d.file.Close()
	}
}

// open is File.open of a File of the document's own, for one use of src.
func (a *Adapter) open(ctx context.Context, src string, forEmbed bool) (*document, error) {
	f := a.Prepare(src)
	doc, err := f.open(ctx, forEmbed)
	if err != nil {
		f.Close()
		return nil, err
	}
	doc.file = f
	return doc, nil
}

// open reads the File's input within the limits and runs the refusal checks. forEmbed selects the stricter
// checks: a file that may be read (detection) may still be one that must not be rewritten (signatures, XFA,
// JavaScript).
func (f *File) open(ctx context.Context, forEmbed bool) (*document, error) {
	a, src := f.a, f.src
	lim := a.Limits.withDefaults()
	st, err := os.Stat(src)
	if err != nil {
		return nil, fmt.Errorf("pdf: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("pdf: %s is not a regular file", src)
	}
	if st.Size() > lim.MaxBytes {
		return nil, refuse(CodeTooLarge, "the file has %d bytes, more than the limit of %d", st.Size(), lim.MaxBytes)
	}
	if err := sniff(src); err != nil {
		return nil, err
	}
	doc := &document{path: src, inBytes: st.Size(), lim: lim, codec: a.Codec}
	if err := f.prescan(src, lim); err != nil {
		if !forEmbed && CodeOf(err) == CodeEncrypted {
			return f.openDecrypted(ctx, doc) // decrypt.go
		}
		return nil, err
	}
	// The input's scan (made once: prescan's), whose count the estimate reserved, also for a repaired copy.
	if scan, err := f.scan(src, lim); err == nil {
		doc.xmpBudget = min(scan.xmp, maxMetadataBytes)
	}
	// Parse, refuse, validate; a file that fails to parse or validate gets one repair pass (MuPDF rebuilds broken
	// cross-reference tables and streams) and is then read again from the start.
	perr := doc.load(ctx, src, forEmbed)
	if !forEmbed && CodeOf(perr) == CodeEncrypted && ctx.Err() == nil {
		return f.openDecrypted(ctx, doc)
	}
	if perr != nil && !isRefusal(perr) && ctx.Err() == nil {
		dir, err := os.MkdirTemp("", "filigrane-pdf-repair-")
		if err != nil {
			return nil, fmt.Errorf("pdf: repair: %w", err)
		}
		doc.tmpDir = dir
		fixed := filepath.Join(dir, "repaired.pdf")
		rerr := a.repair(ctx, src, fixed, lim)
		if CodeOf(rerr) == CodeTool {
			// Without the repairer the file's fate is unknown: the deployment's failure, not a broken file.
			doc.close()
			return nil, rerr
		}
		if rerr == nil {
			if st2, err := os.Stat(fixed); err == nil && st2.Size() <= 2*lim.MaxBytes {
				doc.info = Info{}
				// The repaired file is read by the same parser: its objects are bounded as the original's
				// (a file with no usable table is rebuilt from every object header it holds).
				err2 := f.prescan(fixed, lim)
				if err2 == nil {
					err2 = doc.load(ctx, fixed, forEmbed)
				}
				if err2 == nil || isRefusal(err2) {
					perr = err2
					doc.path = fixed
					doc.info.Repaired = true
				}
			}
		}
	}
	if perr != nil {
		return nil, doc.openFailed(ctx, perr, "the PDF structure is broken and could not be repaired")
	}
	return doc, nil
}

// openFailed closes d, whose opening failed with err, and returns what the caller is told: the context's end,
// a refusal as it is, anything else as a broken file for the reason broken.
func (d *document) openFailed(ctx context.Context, err error, broken string) error {
	d.close()
	if ctx.Err() != nil {
		return fmt.Errorf("pdf: parse: %w", ctx.Err())
	}
	if isRefusal(err) {
		return err
	}
	return &Error{Code: CodeBroken, Reason: broken, Err: err}
}

// load parses path into d, runs the refusal checks on the raw objects (before validation, which may rewrite or
// reject exactly the parts the checks look at), then, for embedding, validates (the writer relies on it).
func (d *document) load(ctx context.Context, path string, forEmbed bool) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("pdf: parser failure: %v", r)
		}
		// The objects of object streams are parsed as they are first read (the page walk, validation), each
		// under the parser's recursion limit (the nesting scan skips stream data): a file that reaches it is
		// refused as readContext refuses it, not repaired.
		if err != nil && !isRefusal(err) && errors.Is(err, model.ErrMaxRecursionDepthExceeded) {
			err = &Error{Code: CodeTooLarge, Reason: "the PDF nests objects deeper than the parser allows", Err: err}
		}
	}()
	pctx, err := readContext(ctx, path, d.lim)
	if err != nil {
		return err
	}
	d.ctx = pctx
	d.forgetPages()
	if err := d.inspect(forEmbed); err != nil {
		return err
	}
	if !forEmbed {
		return nil // detection reads the structural mark or renders with mutool: no pdfcpu writing follows
	}
	// Validation may replace objects it repairs (in the relaxed mode): the pages the refusal checks walked are
	// walked again from the validated table.
	defer d.forgetPages()
	d.repairInfo()
	d.repairMetadata()
	return safeValidate(pctx)
}

func isRefusal(err error) bool {
	var e *Error
	return errors.As(err, &e)
}

// sniff refuses files that are not PDFs, naming the format when it is a common one.
func sniff(src string) error {
	f, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("pdf: %w", err)
	}
	defer f.Close()
	head := make([]byte, 1024)
	n, err := io.ReadFull(f, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return fmt.Errorf("pdf: %w", err)
	}
	head = head[:n]
	if bytes.Contains(head, []byte("%PDF-")) {
		return nil
	}
	kind := "an unknown format"
	for _, m := range []struct {
		magic, name string
	}{
		{"\x89PNG", "a PNG image"}, {"\xff\xd8\xff", "a JPEG image"}, {"GIF8", "a GIF image"},
		{"PK\x03\x04", "a ZIP archive (maybe an office document)"}, {"%!PS", "PostScript"},
		{"\xd0\xcf\x11\xe0", "an OLE document (maybe an old office file)"}, {"{\\rtf", "RTF"},
		{"II*\x00", "a TIFF image"}, {"MM\x00*", "a TIFF image"}, {"RIFF", "a RIFF file (WebP, WAV or AVI)"},
		{"<?xml", "XML"}, {"<!DOCTYPE html", "HTML"}, {"<html", "HTML"},
	} {
		if bytes.HasPrefix(head, []byte(m.magic)) {
			kind = m.name
			break
		}
	}
	if n >= 8 && string(head[4:8]) == "ftyp" {
		kind = "an MP4/MOV or HEIF file"
	}
	if n == 0 {
		kind = "empty"
	}
	return refuse(CodeNotPDF, "the file is not a PDF (it is %s): no %%PDF- header in its first 1024 bytes", kind)
}

// readContext parses and validates (relaxed) one file under the parsing budgets.
func readContext(ctx context.Context, path string, lim Limits) (*model.Context, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("pdf: %w", err)
	}
	defer f.Close()
	conf := model.NewDefaultConfiguration()
	conf.ValidationMode = model.ValidationRelaxed
	conf.Optimize = false
	conf.Cmd = model.VALIDATE
	conf.Limits.MaxStreamBytes = lim.MaxBytes
	conf.Limits.MaxDecodeBytes = lim.MaxDecodeBytes
	conf.Limits.MaxObjectCount = lim.MaxObjects
	conf.Limits.MaxXRefEntries = lim.MaxObjects
	conf.Limits.MaxObjectStreamCount = lim.MaxObjects
	conf.Limits.MaxRecursionDepth = lim.MaxDepth
	pctx, cancel := context.WithTimeout(ctx, lim.ParseTimeout)
	defer cancel()
	c, err := safeRead(pctx, f, conf)
	if err != nil {
		if errors.Is(err, pdfcpu.ErrWrongPassword) || strings.Contains(err.Error(), "password") {
			return nil, &Error{Code: CodeEncrypted, Reason: "the PDF is encrypted with a password; remove the encryption and send it again", Err: err}
		}
		if errors.Is(err, model.ErrMaxRecursionDepthExceeded) {
			return nil, &Error{Code: CodeTooLarge, Reason: fmt.Sprintf("the PDF nests objects deeper than %d levels", lim.MaxDepth), Err: err}
		}
		if isLimitError(err) {
			return nil, &Error{Code: CodeTooLarge, Reason: "the PDF exceeds a parsing budget (decoded stream size or object count)", Err: err}
		}
		if pctx.Err() != nil {
			return nil, &Error{Code: CodeTooLarge, Reason: fmt.Sprintf("parsing the PDF took longer than %s", lim.ParseTimeout), Err: err}
		}
		return nil, err
	}
	if c.XRefTable.Encrypt != nil || c.XRefTable.E != nil {
		return nil, refuse(CodeEncrypted, "the PDF is encrypted (even if it opens without a password, a rewrite would drop its protection); remove the encryption and send it again")
	}
	return c, nil
}

// safeRead runs pdfcpu's reader, turning a panic inside them into an error: hostile input must not
// bring the process down.
func safeRead(ctx context.Context, f *os.File, conf *model.Configuration) (c *model.Context, err error) {
	defer func() {
		if r := recover(); r != nil {
			c, err = nil, fmt.Errorf("pdf: parser failure: %v", r)
		}
	}()
	return pdfcpu.ReadWithContext(ctx, f, conf)
}

// safeValidate runs pdfcpu's relaxed validation (which also completes the page tree and resource
// information the writer relies on), turning a panic into an error.
func safeValidate(c *model.Context) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("pdf: validator failure: %v", r)
		}
	}()
	if err := api.ValidateContext(c); err != nil {
		return fmt.Errorf("validate: %w", err)
	}
	return nil
}

func isLimitError(err error) bool {
	s := err.Error()
	return strings.Contains(s, "exceeds limit") || strings.Contains(s, "exceeds max") || strings.Contains(s, "limit exceeded") ||
		strings.Contains(s, "too large")
}

// inspect fills doc.info and refuses what must not be marked.
func (d *document) inspect(forEmbed bool) error {
	xt := d.ctx.XRefTable
	if xt.Root == nil {
		return errors.New("pdf: no document catalog")
	}
	if err := xt.EnsurePageCount(); err != nil {
		if isLimitError(err) || errors.Is(err, model.ErrMaxRecursionDepthExceeded) {
			return &Error{Code: CodeTooLarge, Reason: "the page tree exceeds a parsing budget (decoded stream size or nesting)", Err: err}
		}
		return fmt.Errorf("pdf: page tree: %w", err)
	}
	d.info.Pages = xt.PageCount
	d.info.Version = xt.VersionString()
	if xt.PageCount == 0 {
		return refuse(CodeNoPages, "the PDF has no pages")
	}
	if xt.PageCount > d.lim.MaxPages {
		return refuse(CodeTooLarge, "the PDF has %d pages, more than the limit of %d", xt.PageCount, d.lim.MaxPages)
	}
	// Before anything walks the pages (the checks below, the overlay, the renderer): a node named twice
	// multiplies the pages below it for all of them.
	if err := d.checkPageTree(); err != nil {
		return err
	}
	root, err := xt.Catalog()
	if err != nil {
		return &Error{Code: CodeBroken, Reason: "the document catalog is missing", Err: err}
	}
	if id, ok := d.structuralMark(root); ok {
		d.info.Marked, d.info.MarkedID = true, id
	}
	if !forEmbed {
		// Detection neither writes the file nor runs its scripts: the checks below (a walk over every page's
		// annotations) would only cost time.
		return nil
	}
	d.info.Signed = d.signed(root)
	d.info.XFA = d.xfa(root)
	d.info.JavaScript = d.javascript(root)
	switch {
	case d.info.Signed:
		return refuse(CodeSigned, "the PDF is digitally signed; marking it rewrites the file, which would invalidate the signatures. Mark the unsigned document and sign afterwards")
	case d.info.XFA:
		return refuse(CodeXFA, "the PDF is an XFA form, whose pages are generated by the viewer and cannot be marked")
	case d.info.JavaScript:
		return refuse(CodeJavaScript, "the PDF contains JavaScript, which is not accepted; remove the scripts and send it again")
	}
	return nil
}

func (d *document) dict(o types.Object) types.Dict {
	if o == nil {
		return nil
	}
	dd, err := d.ctx.XRefTable.DereferenceDict(o)
	if err != nil {
		return nil
	}
	return dd
}

func (d *document) name(o types.Object) string {
	o, err := d.ctx.XRefTable.Dereference(o)
	if err != nil || o == nil {
		return ""
	}
	if n, ok := o.(types.Name); ok {
		return n.Value()
	}
	return ""
}

func (d *document) signed(root types.Dict) bool {
	if perms := d.dict(root["Perms"]); perms != nil && (perms["DocMDP"] != nil || perms["UR3"] != nil) {
		return true
	}
	form := d.dict(root["AcroForm"])
	if form == nil {
		return false
	}
	if o, err := d.ctx.XRefTable.Dereference(form["SigFlags"]); err == nil {
		if n, ok := o.(types.Integer); ok && n.Value()&1 != 0 {
			return true
		}
	}
	// A signature field with a value is a signature, whatever SigFlags says.
	budget := 10000
	var walk func(o types.Object, depth int) bool
	walk = func(o types.Object, depth int) bool {
		if depth > d.lim.MaxDepth || budget <= 0 {
			return false
		}
		arr, err := d.ctx.XRefTable.DereferenceArray(o)
		if err != nil {
			return false
		}
		for _, e := range arr {
			budget--
			f := d.dict(e)
			if f == nil {
				continue
			}
			if d.name(f["FT"]) == "Sig" && f["V"] != nil {
				return true
			}
			if walk(f["Kids"], depth+1) {
				return true
			}
		}
		return false
	}
	return walk(form["Fields"], 0)
}

func (d *document) xfa(root types.Dict) bool {
	form := d.dict(root["AcroForm"])
	return form != nil && form["XFA"] != nil
}

// javascript looks where scripts run from: the document-level name tree, the open action, the catalog's and the
// pages' additional actions, and the actions of page annotations (links and widgets).
func (d *document) javascript(root types.Dict) bool {
	if names := d.dict(root["Names"]); names != nil && names["JavaScript"] != nil {
		return true
	}
	if d.isJSAction(root["OpenAction"], 0) || d.hasJSAA(root["AA"]) {
		return true
	}
	xt := d.ctx.XRefTable
	for p := 1; p <= xt.PageCount; p++ {
		pd, _, err := d.page(p)
		if err != nil || pd == nil {
			continue
		}
		if d.hasJSAA(pd["AA"]) {
			return true
		}
		annots, err := xt.DereferenceArray(pd["Annots"])
		if err != nil {
			continue
		}
		for i, an := range annots {
			if i > 10000 {
				break
			}
			ad := d.dict(an)
			if ad == nil {
				continue
			}
			if d.isJSAction(ad["A"], 0) || d.hasJSAA(ad["AA"]) {
				return true
			}
		}
	}
	return false
}

func (d *document) hasJSAA(o types.Object) bool {
	aa := d.dict(o)
	for _, v := range aa {
		if d.isJSAction(v, 0) {
			return true
		}
	}
	return false
}

// isJSAction reports a JavaScript action, following /Next chains to a bounded depth.
func (d *document) isJSAction(o types.Object, depth int) bool {
	if depth > 16 {
		return false
	}
	act := d.dict(o)
	if act == nil {
		return false
	}
	if d.name(act["S"]) == "JavaScript" || act["JS"] != nil {
		return true
	}
	next, err := d.ctx.XRefTable.Dereference(act["Next"])
	if err != nil || next == nil {
		return false
	}
	if arr, ok := next.(types.Array); ok {
		for _, e := range arr {
			if d.isJSAction(e, depth+1) {
				return true
			}
		}
		return false
	}
	return d.isJSAction(next, depth+1)
}
