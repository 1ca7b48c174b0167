package pdf

import (
	"math"
	"strconv"

	"github.com/pdfcpu/pdfcpu/pkg/pdfcpu/types"
)

// pageView is a page as a renderer presents it: the visible box (visibleBox) turned clockwise by the page's
// /Rotate and scaled by its /UserUnit. The overlay is drawn in this displayed space, so that its waxel grid
// starts at the corner the rendering starts with (its top-left pixel) and its waxels have the size that the
// displayed page's short side gives, whatever the page's origin, rotation and unit. A grid laid in the
// unrotated page instead starts at another corner of the rendering, and unless the page's side is a whole
// number of waxels there the waxels straddle the pixel grid by a fraction (half a waxel on a 180-point square
// page turned by 180°: no pilot is found, TestOffsetRotatedAndCroppedPagesAreDetected).
type pageView struct {
	W, H float64    // displayed size, in points (1/72 inch)
	CM   [6]float64 // maps displayed points (origin at the displayed lower-left corner) to the page's user space
}

// newPageView is the view of a page whose visible box is box (normalised: LL below and left of UR), rotated by
// rotate degrees (any multiple of 90, negative included; others are rounded to the nearest multiple of 90, as
// MuPDF does) with a user unit of unit points (values that are not positive and finite mean 1).
//
// For an unrotated page with a unit of 1 the matrix is the translation to the box's lower-left corner, which is
// what the overlay always drew: marked files of such pages keep their geometry.
func newPageView(box types.Rectangle, rotate int, unit float64) pageView {
	if !(unit > 0) || math.IsInf(unit, 0) {
		unit = 1
	}
	rot := ((rotate%360+360)%360 + 45) / 90 % 4 * 90
	x0, y0, w, h := box.LL.X, box.LL.Y, box.Width(), box.Height()
	// (a b c d e f) maps displayed user-space (X, Y) to (a·X + c·Y + e, b·X + d·Y + f) on the page.
	var m [6]float64
	switch rot {
	case 0:
		m = [6]float64{1, 0, 0, 1, x0, y0}
	case 90: // the page's left edge is displayed on top: X runs up the page, Y runs leftwards
		m = [6]float64{0, 1, -1, 0, x0 + w, y0}
		w, h = h, w
	case 180:
		m = [6]float64{-1, 0, 0, -1, x0 + w, y0 + h}
	case 270: // the page's right edge is displayed on top: X runs down the page, Y runs rightwards
		m = [6]float64{0, -1, 1, 0, x0, y0 + h}
		w, h = h, w
	}
	// Displayed points are user units times unit: scale them down before the rotation.
	for i := range 4 {
		m[i] /= unit
	}
	return pageView{W: w * unit, H: h * unit, CM: m}
}

// pageUserUnit reads a page's /UserUnit (PDF 1.6; not inherited): 1 when absent or invalid.
func pageUserUnit(d *document, pd types.Dict) float64 {
	v, ok := pd["UserUnit"]
	if !ok || v == nil {
		return 1
	}
	obj, err := d.ctx.XRefTable.Dereference(v)
	if err != nil {
		return 1
	}
	var u float64
	switch n := obj.(type) {
	case types.Float:
		u = n.Value()
	case types.Integer:
		u = float64(n.Value())
	default:
		return 1
	}
	if !(u > 0) || math.IsInf(u, 0) {
		return 1
	}
	return u
}

// maxDisplayedArea bounds the largest displayed page area of the document, in square points: the page
// dimensions pdfcpu reports (media box, rotation; one walk of the page tree) scaled by each page's /UserUnit,
// which they leave out. 0 if the dimensions cannot be read. Asking pdfcpu for each page's dictionary instead
// walks the tree once per page: 96 s for 10,000 pages.
func maxDisplayedArea(d *document) float64 {
	dims, err := d.ctx.XRefTable.PageDims()
	if err != nil {
		return 0
	}
	units := pageUnits(d)
	maxUnit := 1.0
	for _, u := range units {
		maxUnit = max(maxUnit, u)
	}
	area := 0.0
	for i, dim := range dims {
		u := maxUnit // if the walk and pdfcpu disagree on the pages, the largest unit bounds every page
		if len(units) == len(dims) {
			u = units[i]
		}
		area = max(area, dim.Width*dim.Height*u*u)
	}
	return area
}

// pageUnits returns the /UserUnit of every page in page order (pageUserUnit), walking the page tree once. A
// tree it cannot walk (a node visited twice, too deep, more leaves than pages) stops the walk early; the caller
// then sees fewer units than pages.
func pageUnits(d *document) []float64 {
	xt := d.ctx.XRefTable
	root, err := xt.Pages()
	if err != nil || root == nil {
		return nil
	}
	var units []float64
	seen := map[int]bool{}
	var walk func(o types.Object, depth int) bool
	walk = func(o types.Object, depth int) bool {
		if ref, ok := o.(types.IndirectRef); ok {
			if seen[ref.ObjectNumber.Value()] {
				return false
			}
			seen[ref.ObjectNumber.Value()] = true
		}
		node := d.dict(o)
		if node == nil || depth > 64 || len(units) >= xt.PageCount {
			return false
		}
		kids, isTree := node["Kids"]
		if !isTree || d.name(node["Type"]) == "Page" {
			units = append(units, pageUserUnit(d, node))
			return true
		}
		arr, err := xt.DereferenceArray(kids)
		if err != nil {
			return false
		}
		for _, k := range arr {
			if !walk(k, depth+1) {
				return false
			}
		}
		return true
	}
	walk(*root, 0)
	return units
}

// cmNum writes a number of the overlay's placement matrix with 10 decimals (num keeps 4, which on a page with
// a /UserUnit of 3 puts the far edge of the grid 0.04 pixels off at 150 dpi and changes the rendering).
// Numbers with 4 decimals or fewer are written as num writes them.
func cmNum(v float64) string {
	return strconv.FormatFloat(math.Round(v*1e10)/1e10, 'f', -1, 64)
}
