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
// It walks what the writer walks, from the catalog and the information dictionary, so it decodes no more than
// the writer would hold of a file read whole (the memory estimate's per-object and per-token costs). An object
// that does not decode is left as it was: the writer then copies its text, as before.
func decodeReachableLazy(ctx context.Context, x *model.XRefTable) (decoded int, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("decoding object stream objects: parser failure: %v", r)
		}
	}()
	seen := map[int]bool{}
	var stack []types.Object
	if x.Root != nil {
		stack = append(stack, *x.Root)
	}
	if x.Info != nil {
		stack = append(stack, *x.Info)
	}
	for steps := 0; len(stack) > 0; steps++ {
		if steps%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return decoded, err
			}
		}
		o := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		switch o := o.(type) {
		case types.IndirectRef:
			n := o.ObjectNumber.Value()
			if seen[n] {
				continue
			}
			seen[n] = true
			entry, ok := x.FindTableEntryForIndRef(&o)
			if !ok || entry.Free || entry.Object == nil {
				continue
			}
			if _, lazy := entry.Object.(types.LazyObjectStreamObject); lazy {
				if _, err := x.Dereference(o); err != nil {
					continue // left lazy: written as the text it was
				}
				decoded++
			}
			stack = append(stack, entry.Object)
		case types.Dict:
			for _, v := range o {
				stack = append(stack, v)
			}
		case types.StreamDict:
			for _, v := range o.Dict {
				stack = append(stack, v)
			}
		case types.Array:
			stack = append(stack, o...)
		}
	}
	return decoded, nil
}
