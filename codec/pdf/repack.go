package pdf

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"

	"github.com/pdfcpu/pdfcpu/pkg/pdfcpu/model"
	"github.com/pdfcpu/pdfcpu/pkg/pdfcpu/types"
)

// packPlain copies the file pdfcpu's writer wrote (src, with a cross-reference stream) to dst, moving the plain
// objects that may live in an object stream into object streams of its own and writing a new cross-reference
// stream. pdfcpu puts into object streams only what it writes within the page tree and the structure tree: a
// document's outline, named destinations, forms and information dictionary came out as plain objects whatever
// the input (gnuplot.pdf: 3,100 of them, 250 KB, that were 50 KB of its object streams). It moves each such
// object's bytes as the writer wrote them (between its "N G obj" line and "endobj"), so nothing is serialised
// twice, and copies every other object (streams, pdfcpu's own object streams) unchanged. What may not be in an
// object stream (PDF 32000 7.5.7) stays plain: streams, objects of a generation other than 0, an object the
// writer copied undecoded, and the cross-reference stream, replaced here. It returns the bytes written.
func packPlain(ctx context.Context, c *model.Context, src *os.File, dst io.Writer) (int64, error) {
	x, wc := c.XRefTable, c.Write
	eol := wc.Eol
	type placed struct {
		nr  int
		off int64
	}
	var objs []placed
	xrefNr := -1
	for nr, off := range wc.Table {
		e, ok := x.Table[nr]
		if !ok || e == nil || e.Free || e.Compressed {
			continue // compressed objects carry a placeholder offset
		}
		if _, isXRef := e.Object.(types.XRefStreamDict); isXRef {
			xrefNr = nr
			continue
		}
		objs = append(objs, placed{nr, off})
	}
	if xrefNr < 0 || x.Size == nil {
		return 0, fmt.Errorf("repack: the written file has no cross-reference stream")
	}
	xrefOff := wc.Table[xrefNr]
	slices.SortFunc(objs, func(a, b placed) int { return int(a.off - b.off) })
	// An object ends where the next thing the writer recorded begins: every object it wrote, freed ones
	// included, and the placeholders of compressed ones (taken between two objects).
	bounds := make([]int64, 0, len(wc.Table))
	for _, off := range wc.Table {
		bounds = append(bounds, off)
	}
	slices.Sort(bounds)
	endOf := func(off int64) int64 {
		i, _ := slices.BinarySearch(bounds, off+1)
		if i < len(bounds) && bounds[i] < xrefOff {
			return bounds[i]
		}
		return xrefOff
	}
	size := *x.Size

	in := io.NewSectionReader(src, 0, xrefOff)
	cw := &countingWriter{w: dst}
	first := xrefOff
	if len(objs) > 0 {
		first = objs[0].off
	}
	if _, err := io.Copy(cw, io.NewSectionReader(in, 0, first)); err != nil {
		return 0, fmt.Errorf("repack: header: %w", err)
	}
	type loc struct {
		typ    byte
		f2, f3 int64
	}
	locs := make(map[int]loc, len(objs))
	// Objects to pack are gathered a hundred at a time and their object stream written as soon as it is full,
	// so that no more than one stream's bodies are held (each at most 1 MB: bigger objects stay plain).
	next := size // the object streams take new numbers after the table's
	var group []int
	var head, body bytes.Buffer
	flush := func() error {
		if len(group) == 0 {
			return nil
		}
		data, err := deflate(append(head.Bytes(), body.Bytes()...))
		if err != nil {
			return fmt.Errorf("repack: object stream: %w", err)
		}
		for k, nr := range group {
			locs[nr] = loc{typ: 2, f2: int64(next), f3: int64(k)}
		}
		locs[next] = loc{typ: 1, f2: cw.n}
		fmt.Fprintf(cw, "%d 0 obj%s<</Filter/FlateDecode/First %d/Length %d/N %d/Type/ObjStm>>%sstream%s", next, eol, head.Len(), len(data), len(group), eol, eol)
		cw.Write(data)
		fmt.Fprintf(cw, "%sendstream%sendobj%s", eol, eol, eol)
		next++
		group, head, body = group[:0], bytes.Buffer{}, bytes.Buffer{}
		return cw.err
	}
	for i, o := range objs {
		if i%1024 == 0 && ctx.Err() != nil {
			return 0, ctx.Err()
		}
		end := endOf(o.off)
		e := x.Table[o.nr]
		if !objectSpan(in, o.nr, e, eol, o.off, end) {
			return 0, fmt.Errorf("repack: object %d at %d-%d is not one object as the writer writes one", o.nr, o.off, end)
		}
		if b := packableBody(e, o.nr, eol, in, o.off, end); b != nil {
			fmt.Fprintf(&head, "%d %d ", o.nr, body.Len())
			body.Write(b)
			body.WriteByte('\n')
			if group = append(group, o.nr); len(group) == objectStreamObjects {
				if err := flush(); err != nil {
					return 0, err
				}
			}
			continue
		}
		locs[o.nr] = loc{typ: 1, f2: cw.n, f3: int64(*e.Generation)}
		if _, err := io.Copy(cw, io.NewSectionReader(in, o.off, end-o.off)); err != nil {
			return 0, fmt.Errorf("repack: object %d: %w", o.nr, err)
		}
	}
	if err := flush(); err != nil {
		return 0, err
	}
	// pdfcpu's own object streams' members keep their places. An object still marked compressed that the writer
	// did not write (nothing reaches it) names the input's object stream: it is left free, not pointed there.
	for nr, e := range x.Table {
		if _, written := wc.Table[nr]; !written {
			continue
		}
		if e != nil && !e.Free && e.Compressed && e.ObjectStream != nil && e.ObjectStreamInd != nil && nr < size {
			locs[nr] = loc{typ: 2, f2: int64(*e.ObjectStream), f3: int64(*e.ObjectStreamInd)}
		}
	}
	locs[xrefNr] = loc{typ: 1, f2: cw.n}
	newSize := next
	var rows bytes.Buffer
	w2 := 4
	if cw.n >= 1<<32 {
		w2 = 8
	}
	for nr := range newSize {
		l := locs[nr]
		if nr == 0 {
			l = loc{f3: 65535}
		}
		rows.WriteByte(l.typ)
		for s := w2 - 1; s >= 0; s-- {
			rows.WriteByte(byte(l.f2 >> (8 * s)))
		}
		rows.Write([]byte{byte(l.f3 >> 8), byte(l.f3)})
	}
	data, err := deflate(rows.Bytes())
	if err != nil {
		return 0, fmt.Errorf("repack: cross-reference stream: %w", err)
	}
	trailer := fmt.Sprintf("/Root %s", x.Root.PDFString())
	if x.Info != nil {
		trailer += "/Info " + x.Info.PDFString()
	}
	if x.ID != nil {
		trailer += "/ID " + x.ID.PDFString()
	}
	xrefStart := cw.n
	fmt.Fprintf(cw, "%d 0 obj%s<</Filter/FlateDecode/Length %d/Size %d/Type/XRef/W[1 %d 2]%s>>%sstream%s", xrefNr, eol, len(data), newSize, w2, trailer, eol, eol)
	cw.Write(data)
	fmt.Fprintf(cw, "%sendstream%sendobj%sstartxref%s%d%s%%%%EOF%s", eol, eol, eol, eol, xrefStart, eol, eol)
	return cw.n, cw.err
}

// objectStreamObjects is how many objects an object stream holds, as pdfcpu's own (ObjectStreamMaxObjects).
const objectStreamObjects = 100

// packableBody is the body of the object nr written at [off, end) if it may move into an object stream, else nil.
// objectSpan has checked the span: "nr 0 obj" and its end of line, the body, then "endobj" between ends of line.
func packableBody(e *model.XRefTableEntry, nr int, eol string, in io.ReaderAt, off, end int64) []byte {
	if e.Generation == nil || *e.Generation != 0 || end-off > 1<<20 {
		return nil
	}
	switch e.Object.(type) {
	case types.Dict, types.Array, types.Integer, types.Float, types.StringLiteral, types.HexLiteral, types.Name, types.Boolean:
	default:
		return nil // streams, undecoded copies, null
	}
	head := len(strconv.Itoa(nr) + " 0 obj" + eol)
	body := make([]byte, end-off-int64(head+len(eol+"endobj"+eol)))
	if _, err := in.ReadAt(body, off+int64(head)); err != nil {
		return nil
	}
	return body
}

// objectSpan reports whether [off, end) starts with object nr's header and ends with "endobj": the bytes the
// writer wrote for it and nothing else. Any other layout stops the repacking (the writer's file is kept).
func objectSpan(in io.ReaderAt, nr int, e *model.XRefTableEntry, eol string, off, end int64) bool {
	if e.Generation == nil {
		return false
	}
	head := []byte(fmt.Sprintf("%d %d obj%s", nr, *e.Generation, eol))
	tail := []byte(eol + "endobj" + eol)
	if end-off < int64(len(head)+len(tail)) {
		return false
	}
	h, t := make([]byte, len(head)), make([]byte, len(tail))
	if _, err := in.ReadAt(h, off); err != nil {
		return false
	}
	if _, err := in.ReadAt(t, end-int64(len(tail))); err != nil {
		return false
	}
	return bytes.Equal(h, head) && bytes.Equal(t, tail)
}

func deflate(b []byte) ([]byte, error) {
	var z bytes.Buffer
	w := zlib.NewWriter(&z)
	if _, err := w.Write(b); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return z.Bytes(), nil
}

// countingWriter counts what it writes and keeps the first error (later writes are dropped).
type countingWriter struct {
	w   io.Writer
	n   int64
	err error
}

func (c *countingWriter) Write(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.w.Write(p)
	c.n += int64(n)
	c.err = err
	return n, err
}

// repacked writes packPlain's copy of the writer's file f to a new temporary file in dir and returns it, or
// an error and no file.
func repacked(ctx context.Context, doc *document, f *os.File, dir string) (g *os.File, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("repack: %v", r)
		}
		if err != nil && g != nil {
			g.Close()
			os.Remove(g.Name())
			g = nil
		}
	}()
	g, err = os.CreateTemp(dir, ".filigrane-pdf-*")
	if err != nil {
		return nil, err
	}
	w := bufio.NewWriterSize(g, 1<<16)
	if _, err = packPlain(ctx, doc.ctx, f, w); err != nil {
		return g, err
	}
	return g, w.Flush()
}
