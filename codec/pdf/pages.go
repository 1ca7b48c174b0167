package pdf

import (
	"fmt"
	"math"
	"reflect"

	"github.com/pdfcpu/pdfcpu/pkg/pdfcpu/model"
	"github.com/pdfcpu/pdfcpu/pkg/pdfcpu/types"
)

// pageRef is one page as the page tree gives it: its dictionary (the table's own map, so changes to it are
// changes to the document) and the attributes it inherits (media box, crop box, rotation, resources).
type pageRef struct {
	obj   int // the page dictionary's object number
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

// checkPageTree refuses a page tree that reaches one page tree node more than once, and records whether it names
// a page (a leaf) more than once. A node named twice (in one /Kids array or in two) or a node that is its own
// ancestor multiplies the pages below it, 2^k pages from k nodes, and is not a document a writer made. A page
// named twice is: `mutool clean -gggg` merges identical pages (blank ones) into one object named at each place.
// Such a page is a page of the document at each mention, and is processed once (pageCopies): rendered once by a
// detection, given its overlay once by an embedding. That needs the tree read in one pass, so a tree with a
// repeated page that walkPages cannot read is refused. The check is pdfcpu's and mutool's reading of the tree
// reduced to what matters here (a node with /Kids that is not a /Type /Page is a node, anything else a leaf) and
// looks into each node once, so its cost is bounded by the file's /Kids entries.
func (d *document) checkPageTree() error {
	xt := d.ctx.XRefTable
	root, err := xt.Pages()
	if err != nil || root == nil {
		return nil // inspect has already counted the pages through the same root; nothing to walk
	}
	seen := map[int]bool{}
	repeated := -1 // a page object named more than once
	var walk func(o types.Object, depth int) error
	walk = func(o types.Object, depth int) error {
		if depth > d.lim.MaxDepth {
			return refuse(CodeTooLarge, "the page tree is nested deeper than %d levels", d.lim.MaxDepth)
		}
		node := d.dict(o)
		kids, isNode := node["Kids"]
		isNode = isNode && d.name(node["Type"]) != "Page"
		if ref, ok := o.(types.IndirectRef); ok {
			nr := ref.ObjectNumber.Value()
			if seen[nr] {
				if !isNode {
					repeated = nr
					return nil
				}
				return refuse(CodePageTree, "the page tree names its node %d more than once (or inside itself); every page tree node must appear in the tree once", nr)
			}
			seen[nr] = true
		}
		if !isNode {
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
	if err := walk(*root, 0); err != nil {
		return err
	}
	d.repeatedPages = repeated >= 0
	if d.repeatedPages {
		if _, _, err := d.page(1); err != nil || d.pageList == nil {
			return refuse(CodePageTree, "the page tree names page object %d more than once and cannot be read in one pass", repeated)
		}
	}
	return nil
}

// pageCopies tells which pages show the same page object the same way: copyOf[i] is the first page (from 0) that
// shows the object page i+1 shows, with the same inherited box, rotation and resources, and i itself for a page
// whose object no earlier page shows that way. differ is a page (from 1) whose object the earlier page differ[1]
// shows with other inherited attributes (zeros when none): one overlay could not fit both. A document without
// repeated pages answers the identity.
func (d *document) pageCopies() (copyOf []int, differ [2]int, err error) {
	copyOf = make([]int, d.info.Pages)
	for i := range copyOf {
		copyOf[i] = i
	}
	if !d.repeatedPages {
		return copyOf, differ, nil
	}
	if _, _, err := d.page(1); err != nil || d.pageList == nil || len(d.pageList) != len(copyOf) {
		return nil, differ, refuse(CodePageTree, "the page tree names a page more than once and cannot be read in one pass")
	}
	first := map[int][]int{} // page object -> the pages (from 0) that first show it in each way
	for i, r := range d.pageList {
		if r.obj <= 0 {
			continue
		}
		found := false
		for _, j := range first[r.obj] {
			if sameInherited(&d.pageList[j].attrs, &r.attrs) {
				copyOf[i], found = j, true
				break
			}
		}
		if !found {
			if len(first[r.obj]) > 0 && differ[0] == 0 {
				differ = [2]int{i + 1, first[r.obj][0] + 1}
			}
			first[r.obj] = append(first[r.obj], i)
		}
	}
	return copyOf, differ, nil
}

// sameInherited reports whether two mentions of one page object inherit the same media box, crop box, rotation
// and resource dictionary (the same dictionary, not an equal one).
func sameInherited(a, b *model.InheritedPageAttrs) bool {
	sameRect := func(x, y *types.Rectangle) bool {
		return x == nil && y == nil || x != nil && y != nil && *x == *y
	}
	return sameRect(a.MediaBox, b.MediaBox) && sameRect(a.CropBox, b.CropBox) && a.Rotate == b.Rotate &&
		reflect.ValueOf(a.Resources).UnsafePointer() == reflect.ValueOf(b.Resources).UnsafePointer()
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
			list = append(list, pageRef{obj: ref.ObjectNumber.Value(), dict: node, attrs: attrs})
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
