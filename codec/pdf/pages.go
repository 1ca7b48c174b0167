package pdf

import (
	"fmt"
	"math"

	"github.com/pdfcpu/pdfcpu/pkg/pdfcpu/model"
	"github.com/pdfcpu/pdfcpu/pkg/pdfcpu/types"
)

// pageRef is one page as the page tree gives it: its dictionary (the table's own map, so changes to it are
// changes to the document) and the attributes it inherits (media box, crop box, rotation, resources).
type pageRef struct {
	dict  types.Dict
	attrs model.InheritedPageAttrs
}

// page returns page p (from 1) with its inherited attributes. The first call walks the whole page tree once and
// keeps every page: pdfcpu's PageDict walks the tree from its root for each page it is asked for, which on a
// document whose root lists 10,000 pages is 10,000 dereferences per page (about 100 s of lookups for one
// embed). A tree the walk does not read as pdfcpu does (its pages do not add up to the page count, an entry of
// an unexpected type) is left to PageDict, page by page, as before.
func (d *document) page(p int) (types.Dict, *model.InheritedPageAttrs, error) {
	if d.pageList == nil && !d.pageWalkFailed {
		list, err := d.walkPages()
		if err != nil || len(list) != d.ctx.XRefTable.PageCount {
			d.pageWalkFailed = true
		} else {
			d.pageList = list
		}
	}
	if d.pageList != nil {
		if p < 1 || p > len(d.pageList) {
			return nil, nil, model.ErrPageNotFound
		}
		r := &d.pageList[p-1]
		return r.dict, &r.attrs, nil
	}
	pd, _, attrs, err := d.ctx.XRefTable.PageDict(p, false)
	return pd, attrs, err
}

// checkPageTree refuses a page tree that reaches one object more than once. A page tree is a tree: every page
// and every intermediate node has one /Parent, so a node named twice (in one /Kids array or in two) is not a
// document a writer made, and both pdfcpu and mutool would process the shared page once per mention: a 54 kB
// file naming one page 9,000 times kept a detection rendering and analysing that page for 136 s. The walk is
// pdfcpu's and mutool's reading of the tree reduced to what matters here (a node with /Kids that is not a
// /Type /Page is a node, anything else a leaf) and visits each object once, so its cost is bounded by the
// file's /Kids entries. Cycles (a node its own ancestor) are a node reached twice too.
func (d *document) checkPageTree() error {
	xt := d.ctx.XRefTable
	root, err := xt.Pages()
	if err != nil || root == nil {
		return nil // inspect has already counted the pages through the same root; nothing to walk
	}
	seen := map[int]bool{}
	var walk func(o types.Object, depth int) error
	walk = func(o types.Object, depth int) error {
		if depth > d.lim.MaxDepth {
			return refuse(CodeTooLarge, "the page tree is nested deeper than %d levels", d.lim.MaxDepth)
		}
		if ref, ok := o.(types.IndirectRef); ok {
			nr := ref.ObjectNumber.Value()
			if seen[nr] {
				return refuse(CodePageTree, "the page tree names object %d more than once; every page (and page tree node) must appear in the tree once", nr)
			}
			seen[nr] = true
		}
		node := d.dict(o)
		if node == nil {
			return nil
		}
		kids, isNode := node["Kids"]
		if !isNode || d.name(node["Type"]) == "Page" {
			return nil
		}
		arr, err := xt.DereferenceArray(kids)
		if err != nil {
			return nil // a /Kids that is not an array: no pages below it for anyone
		}
		for _, k := range arr {
			if err := walk(k, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	return walk(*root, 0)
}

// forgetPages drops the pages a walk found, for a context that was replaced or changed.
func (d *document) forgetPages() { d.pageList, d.pageWalkFailed = nil, false }

// walkPages lists the pages in order with the attributes each inherits, reading the tree as pdfcpu's PageDict
// does: a node is a page tree node by its /Type /Pages (or, without a type, by having /Count and /Kids), a leaf
// by /Type /Page; MediaBox, CropBox, Rotate and Resources of a node apply below it unless a lower node sets
// them. It stops with an error on a node that is its own ancestor, a tree deeper than the parsing budget, more
// leaves than the page count, or an entry it cannot read.
func (d *document) walkPages() ([]pageRef, error) {
	xt := d.ctx.XRefTable
	root, err := xt.Pages()
	if err != nil {
		return nil, err
	}
	if root == nil {
		return nil, fmt.Errorf("no page tree")
	}
	list := make([]pageRef, 0, xt.PageCount)
	onPath := map[int]bool{}
	var walk func(ref types.IndirectRef, attrs model.InheritedPageAttrs, depth int) error
	walk = func(ref types.IndirectRef, attrs model.InheritedPageAttrs, depth int) error {
		if depth > d.lim.MaxDepth {
			return fmt.Errorf("page tree deeper than %d", d.lim.MaxDepth)
		}
		node, err := xt.DereferenceDict(ref)
		if err != nil {
			return err
		}
		if node == nil {
			return fmt.Errorf("page tree node %s is not a dictionary", ref)
		}
		if err := d.inherit(node, &attrs); err != nil {
			return err
		}
		typ := ""
		if t := node.Type(); t != nil {
			typ = *t
		} else if _, ok := node.Find("Kids"); ok {
			if _, ok := node.Find("Count"); ok {
				typ = "Pages"
			}
		}
		switch typ {
		case "Page":
			if len(list) >= xt.PageCount {
				return fmt.Errorf("more pages than the page count %d", xt.PageCount)
			}
			list = append(list, pageRef{dict: node, attrs: attrs})
			return nil
		case "Pages":
		default:
			return fmt.Errorf("page tree node %s of type %q", ref, typ)
		}
		nr := ref.ObjectNumber.Value()
		if onPath[nr] {
			return fmt.Errorf("page tree node %s is its own ancestor", ref)
		}
		onPath[nr] = true
		defer delete(onPath, nr)
		kids, err := xt.DereferenceArray(node["Kids"])
		if err != nil {
			return err
		}
		for _, k := range kids {
			if k == nil {
				continue
			}
			kr, ok := k.(types.IndirectRef)
			if !ok {
				return fmt.Errorf("page tree node %s has a direct kid", ref)
			}
			if err := walk(kr, attrs, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(*root, model.InheritedPageAttrs{}, 0); err != nil {
		return nil, err
	}
	return list, nil
}

// inherit sets in attrs what node itself says of the inheritable attributes, as pdfcpu's PageDict reads them
// (without consolidating resources: Resources is the nearest node's dictionary).
func (d *document) inherit(node types.Dict, attrs *model.InheritedPageAttrs) error {
	xt := d.ctx.XRefTable
	box := func(key string) (*types.Rectangle, error) {
		a, err := xt.DereferenceArray(node[key])
		if err != nil {
			return nil, err
		}
		if len(a) != 4 {
			return nil, fmt.Errorf("%s of %d numbers", key, len(a))
		}
		var v [4]float64
		for i := range v {
			if v[i], err = xt.DereferenceNumber(a[i]); err != nil {
				return nil, err
			}
		}
		return types.NewRectangle(v[0], v[1], v[2], v[3]), nil
	}
	var err error
	if _, ok := node.Find("MediaBox"); ok {
		if attrs.MediaBox, err = box("MediaBox"); err != nil {
			return err
		}
	}
	if _, ok := node.Find("CropBox"); ok {
		if attrs.CropBox, err = box("CropBox"); err != nil {
			return err
		}
	}
	if o, ok := node.Find("Rotate"); ok {
		o, err := xt.Dereference(o)
		if err != nil {
			return err
		}
		switch v := o.(type) {
		case types.Integer:
			attrs.Rotate = v.Value()
		case types.Float:
			if xt.ValidationMode == model.ValidationStrict {
				return fmt.Errorf("rotate %v is not an integer", v)
			}
			attrs.Rotate = int(math.Round(v.Value()))
		default:
			return fmt.Errorf("rotate of type %T", o)
		}
	}
	if o, ok := node.Find("Resources"); ok {
		res, err := xt.DereferenceDict(o)
		if err != nil {
			return err
		}
		attrs.Resources = res
	}
	return nil
}
