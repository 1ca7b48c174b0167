package pdf

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"filigrane/codec"
)

// File is one input prepared for the calls of one request on it: the memory estimate, then the probe, the embed
// or the detection (the service's processor makes them in that order on one local copy). What they would each
// repeat on the same bytes is done by the first that needs it and reused by the others: the object scan before
// parsing (objstm.go: a read of the whole file, and of its inflated object streams), for a detection of an
// owner-protected document its decrypted copy (decrypt.go: a mutool run and a file of up to twice the input),
// and for a detection the structural mark read without parsing (quickStructural: a mutool show). A detection's
// estimate and probe of a document whose mark that read verifies are that read's: the detection will parse
// nothing, so neither scans, parses or decrypts it (an owner-protected marked document was decrypted by the
// estimate of each of the request's two stored-file calls, the edge's probe and the detection, for a
// detection that read its mark through mutool show).
// A result is reused only while the file is the one it was made from (the same file, size and modification
// time); refusals are reused as results are (the same bytes are refused the same way), other failures are not.
// The bounds are those of each step alone: nothing is read or made that one call would not; the copy is only
// kept longer (until Close, which removes it: the File is not used after). A File's calls may run concurrently;
// its steps then run one at a time.
type File struct {
	a   *Adapter
	src string

	mu    sync.Mutex
	scans map[string]scanned // by path: the input, its decrypted copy
	dir   string             // holds the decrypted copy; removed by Close
	dec   string             // the decrypted copy, once made
	decOf os.FileInfo        // the input the copy was made from
	quick quickRead          // quickStructural's answer, once asked
}

// quickRead is quickStructural's answer for the input of: the mark's id and the page count when ok.
type quickRead struct {
	of    os.FileInfo
	id    codec.ID
	pages int
	ok    bool
}

// quickMark is quickStructural of the input, asked once while the input is unchanged: the estimate, the probe
// and the detection of one request then agree on whether the detection parses the file. An answer cut short by
// ctx is not kept.
func (f *File) quickMark(ctx context.Context) quickRead {
	f.mu.Lock()
	defer f.mu.Unlock()
	st, err := os.Stat(f.src)
	if err != nil {
		return quickRead{}
	}
	if sameFile(f.quick.of, st) {
		return f.quick
	}
	id, pages, ok := f.a.quickStructural(ctx, f.src)
	q := quickRead{of: st, id: id, pages: pages, ok: ok}
	if ctx.Err() == nil {
		f.quick = q
	}
	return q
}

// scanned is one object scan and the file it read.
type scanned struct {
	of   os.FileInfo
	scan objectScan
	err  error
}

// Prepare returns src prepared for the calls of one request; the caller closes it once they are done.
func (a *Adapter) Prepare(src string) *File {
	return &File{a: a, src: src}
}

// Close removes what the File made (the decrypted copy).
func (f *File) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.scans, f.dec, f.decOf, f.quick = nil, "", nil, quickRead{}
	if f.dir == "" {
		return nil
	}
	dir := f.dir
	f.dir = ""
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("pdf: remove the decrypted copy: %w", err)
	}
	return nil
}

// Probe is Adapter.Probe of the File's input.
func (f *File) Probe(ctx context.Context) (Info, error) { return f.probe(ctx, true) }

// ProbeDetect is Adapter.ProbeDetect of the File's input.
func (f *File) ProbeDetect(ctx context.Context) (Info, error) { return f.probe(ctx, false) }

func (f *File) probe(ctx context.Context, forEmbed bool) (Info, error) {
	if !forEmbed {
		if q := f.quickMark(ctx); q.ok {
			return Info{Pages: q.pages, Marked: true, MarkedID: q.id}, nil // what the detection will read
		}
	}
	doc, err := f.open(ctx, forEmbed)
	if err != nil {
		return Info{}, err
	}
	defer doc.close()
	return doc.info, nil
}

// sameFile reports whether b is the file a was, unchanged.
func sameFile(a, b os.FileInfo) bool {
	return a != nil && b != nil && os.SameFile(a, b) && a.Size() == b.Size() && a.ModTime().Equal(b.ModTime())
}

// scan is scanObjects of path under lim, made once while the file is unchanged.
func (f *File) scan(path string, lim Limits) (objectScan, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st, err := os.Stat(path)
	if err == nil {
		if s, ok := f.scans[path]; ok && sameFile(s.of, st) {
			return s.scan, s.err
		}
	}
	if f.a.trace != nil {
		f.a.trace("scan")
	}
	scan, err := scanObjects(path, lim.MaxDecodeBytes, lim.MaxObjects, lim.MaxTokens)
	if st != nil && (err == nil || isRefusal(err)) {
		if f.scans == nil {
			f.scans = map[string]scanned{}
		}
		f.scans[path] = scanned{of: st, scan: scan, err: err}
	}
	return scan, err
}

// prescan runs the checks that read path's bytes before the parser does: nesting, then the object scan (object
// and cross-reference stream sizes, object and token counts).
func (f *File) prescan(path string, lim Limits) error {
	if err := checkNesting(path, lim.MaxDepth); err != nil {
		return err
	}
	_, err := f.scan(path, lim)
	return err
}

// decrypted is the path of the input's decrypted copy (decrypt.go), made once while the input is unchanged.
func (f *File) decrypted(ctx context.Context, lim Limits) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st, err := os.Stat(f.src)
	if err != nil {
		return "", fmt.Errorf("pdf: %w", err)
	}
	if f.dec != "" && sameFile(f.decOf, st) {
		return f.dec, nil
	}
	if f.dir == "" {
		dir, err := os.MkdirTemp("", "filigrane-pdf-decrypt-")
		if err != nil {
			return "", fmt.Errorf("pdf: decrypt: %w", err)
		}
		f.dir = dir
	}
	dec := filepath.Join(f.dir, "decrypted.pdf")
	f.dec, f.decOf = "", nil
	delete(f.scans, dec)
	if err := f.a.decrypt(ctx, f.src, dec, lim); err != nil {
		return "", err
	}
	f.dec, f.decOf = dec, st
	return dec, nil
}
