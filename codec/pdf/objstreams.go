package pdf

import (
	"context"
	"fmt"

	"github.com/pdfcpu/pdfcpu/pkg/pdfcpu/model"
	"github.com/pdfcpu/pdfcpu/pkg/pdfcpu/types"
)

// This file owns how the marked document's objects are laid out by pdfcpu's writer: object streams and a
// cross-reference stream when the input had them, a classic cross-reference table when it had one. It does
// not change what any object says: pages, overlay and structural mark are the other files' job.

// setWriteLayout chooses the output's cross-reference form from the input's. pdfcpu's defaults write a
// cross-reference stream and object streams whatever the input was; a file that came with a classic table
// keeps one (readers and tools that predate PDF 1.5's streams still open it), a file that came with
// cross-reference streams keeps them, and its small objects go back into object streams.
func setWriteLayout(c *model.Context) {
	streams := c.Read != nil && c.Read.UsingXRefStreams
	c.WriteXRefStream = streams
	c.WriteObjectStream = streams
}

// decodeReachableLazy parses the objects of the input's object streams that the writer will write but that
// nothing read so far (validation skips keys it does not know, such as an annotation's private extras).
// pdfcpu's writer copies such a still-undecoded object's text as a plain object, outside any object stream,
// and does not follow the references inside it: an object stream of a hundred similar dictionaries deflated
// together was written out uncompressed (pdfcpu's annotTest.pdf: 86 KB in, 182 KB marked), and an object
// reachable only through one was dropped. Decoded here, the writer packs them into its object streams and
// writes what they reference.
//
// It follows what the writer follows (writtenKeys), so it decodes nothing the writer leaves out: an object
// that only a page's unknown entry names is not written, and decoding it would only cost memory (a 30 MB array
// behind such an entry took the embed from 17 MB to 1.05 GB, past the estimate). What it decodes costs what the
// memory estimate charges every token of the inflated object streams for (memory.go). An object that does not
// decode is left as it was: the writer then copies its text, as before.
func decodeReachableLazy(ctx context.Context, x *model.XRefTable) (decoded int, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("decoding object stream objects: parser failure: %v", r)
		}
	}()
	w := lazyWalk{x: x, seen: map[int]bool{}}
	if x.Root != nil {
		w.push(*x.Root)
	}
	if x.Info != nil {
		w.push(*x.Info)
	}
	for steps := 0; len(w.refs) > 0; steps++ {
		if steps%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return w.decoded, err
			}
		}
		ir := w.refs[len(w.refs)-1]
		w.refs = w.refs[:len(w.refs)-1]
		entry, ok := x.FindTableEntryForIndRef(&ir)
		if !ok || entry.Free || entry.Object == nil {
			continue
		}
		if _, lazy := entry.Object.(types.LazyObjectStreamObject); lazy {
			if _, err := x.Dereference(ir); err != nil {
				continue // left lazy: written as the text it was
			}
			w.decoded++
		}
		w.visit(entry.Object, x.Root != nil && ir.ObjectNumber == x.Root.ObjectNumber)
	}
	return w.decoded, nil
}

// lazyWalk is decodeReachableLazy's state: the objects seen and those still to visit. Direct objects are
// visited recursively (their nesting is bounded by the parser's depth limit), indirect ones through refs, each
// once, so the walk holds at most one entry per object whatever the size of an array.
type lazyWalk struct {
	x       *model.XRefTable
	seen    map[int]bool
	refs    []types.IndirectRef
	decoded int
}

func (w *lazyWalk) push(ir types.IndirectRef) {
	if n := ir.ObjectNumber.Value(); !w.seen[n] {
		w.seen[n] = true
		w.refs = append(w.refs, ir)
	}
}

func (w *lazyWalk) visit(o types.Object, catalog bool) {
	switch o := o.(type) {
	case types.IndirectRef:
		w.push(o)
	case types.Dict:
		keys := writtenKeys(o, catalog)
		if keys == nil {
			for _, v := range o {
				w.visit(v, false)
			}
			return
		}
		for _, k := range keys {
			if v, ok := o[k]; ok {
				w.visit(v, false)
			}
		}
	case types.StreamDict:
		for _, v := range o.Dict {
			w.visit(v, false)
		}
	case types.Array:
		for _, v := range o {
			w.visit(v, false)
		}
	}
}

// writtenKeys are the entries of d whose objects pdfcpu's writer (v0.15.0: writeRootObject, writePageDict,
// writePagesDictDepth) writes, for the catalog and the page tree's nodes; nil for any other dictionary, all
// of whose entries it writes.
func writtenKeys(d types.Dict, catalog bool) []string {
	if catalog {
		return catalogKeys
	}
	switch t := d.Type(); {
	case t != nil && *t == "Page":
		return pageKeys
	case t != nil && *t == "Pages":
		return pagesKeys
	}
	return nil
}

var (
	catalogKeys = []string{"Version", "Pages", "Extensions", "PageLabels", "Names", "Dests", "ViewerPreferences",
		"PageLayout", "PageMode", "Outlines", "Threads", "OpenAction", "AA", "URI", "AcroForm", "Metadata",
		"StructTreeRoot", "MarkInfo", "Lang", "SpiderInfo", "OutputIntents", "PieceInfo", "OCProperties", "Perms",
		"Legal", "Requirements", "Collection", "NeedsRendering"}
	pageKeys = []string{"Contents", "Resources", "MediaBox", "CropBox", "BleedBox", "TrimBox", "ArtBox",
		"BoxColorInfo", "PieceInfo", "LastModified", "Rotate", "Group", "Annots", "Thumb", "B", "Dur", "Trans", "AA",
		"Metadata", "StructParents", "ID", "PZ", "SeparationInfo", "Tabs", "TemplateInstantiated", "PresSteps",
		"UserUnit", "VP"}
	pagesKeys = []string{"Kids", "Resources", "MediaBox", "CropBox", "Rotate"}
)
