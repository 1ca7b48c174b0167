package pdf

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/pdfcpu/pdfcpu/pkg/pdfcpu/model"
	"github.com/pdfcpu/pdfcpu/pkg/pdfcpu/types"

	"filigrane/codec"
)

// tileOversample is how many image pixels the overlay tile has per waxel. One keeps the tiles small (a few
// kilobytes each) and cheap to draw: MuPDF renders a marked page about three times faster than with a 2×
// image (measured: 32 against 105 ms per page at 150 dpi), which dominates detection by rendering.
const tileOversample = 1

// overlayMasks returns the overlay tile for id as two planes of 8-bit levels: dark (how much white paper
// darkens) and light (how much black lightens), dark = strength·(1−q)/2 and light = strength − dark, rounded.
// The overlay image composites page·(1 − dark/255) + (255 − page)·light/255 up to a uniform offset
// (overlayImage): on white paper the page darkens by dark levels and is never lightened; on black it lightens
// by light levels; in between both act, so the pattern keeps its swing on any background. The levels are
// integers carried by a soft mask and an indexed lookup, which renderers composite nearly exactly (a constant
// opacity of a few 255ths does not survive MuPDF's fixed-point arithmetic as well).
//
// The chips are first high-passed with the detector's own whitening kernel (each waxel minus the mean of its 8
// neighbours, cyclically over the tile). The detector discards what that kernel removes, so the smooth part of a
// random chip pattern costs visibility and buys nothing; removed, the pattern is fine-grained noise, which the
// eye sees least. Then the values are interpolated bilinearly between waxel centres, as the codec renders its
// mark; q is the filtered value scaled to ±1.
func overlayMasks(c *codec.Codec, id codec.ID, strength float64) (dark, light []byte) {
	q := overlayQ(c, id)
	dark, light = make([]byte, len(q)), make([]byte, len(q))
	for i, v := range q {
		d := darkLevels(strength, v)
		dark[i] = uint8(d)
		light[i] = uint8(int(math.Round(strength)) - d)
	}
	return dark, light
}

// darkLevels is how many of the strength's levels a pixel of filtered value v (−1..1) darkens the paper by.
func darkLevels(strength, v float64) int { return int(math.Round(strength * (1 - v) / 2)) }

// overlayQ is the overlay tile's filtered chips, one value in −1..1 per image pixel (overlayMasks).
func overlayQ(c *codec.Codec, id codec.ID) []float64 {
	const side = codec.TileSide
	chips := c.OverlayTile(id)
	wrap := func(i int) int { return ((i % side) + side) % side }
	t := make([]float64, len(chips))
	for j := 0; j < side; j++ {
		for i := 0; i < side; i++ {
			var n float64
			for dj := -1; dj <= 1; dj++ {
				for di := -1; di <= 1; di++ {
					if di != 0 || dj != 0 {
						n += float64(chips[wrap(j+dj)*side+wrap(i+di)])
					}
				}
			}
			t[j*side+i] = (float64(chips[j*side+i]) - n/8) / highPassPeak
		}
	}
	const n = side * tileOversample
	q := make([]float64, n*n)
	for py := 0; py < n; py++ {
		v := (float64(py)+0.5)/tileOversample - 0.5
		j0 := math.Floor(v)
		fy := v - j0
		r0 := t[wrap(int(j0))*side:]
		r1 := t[wrap(int(j0)+1)*side:]
		for px := 0; px < n; px++ {
			u := (float64(px)+0.5)/tileOversample - 0.5
			i0 := math.Floor(u)
			fx := u - i0
			a, b := wrap(int(i0)), wrap(int(i0)+1)
			top := r0[a] + fx*(r0[b]-r0[a])
			bot := r1[a] + fx*(r1[b]-r1[a])
			q[py*n+px] = max(-1, min(1, top+fy*(bot-top)))
		}
	}
	return q
}

// highPassPeak scales the high-passed chips (standard deviation 1.06, extremes ±2) so that values beyond ±1.5,
// a few percent of the waxels, saturate rather than spend the darkening range on rare peaks.
const highPassPeak = 1.5

// maxPageImagePixels bounds the overlay image of one page size (Options.PageImage; pixels, one per waxel). A
// page whose waxel grid is larger (only very elongated pages reach it: the short side always has at most 512
// waxels, so this allows an aspect ratio of 8:1) is drawn with the tile image instead, which keeps the mark
// but shows faint lines at the tile edges in MuPDF renderings. It bounds the memory a renderer spends on the
// overlay (an image and its soft mask of this size, 8-bit once decoded: 4 MiB) and the output size.
const maxPageImagePixels = 512 * 4096

// overlayWriter adds the overlay objects to one document: per page size one form XObject that draws the mark
// over the page, and per page a q/Q wrapper around the original content followed by a call of the form. The
// form draws one image covering the page's whole waxel grid (shared by pages of nearly the same size,
// pageImageStep) while the page images fit the budget (pageImageBudget), else the tile image (shared by every
// page) in a grid: MuPDF draws abutting images with a one-pixel overlap at fractional
// positions, so every tile edge shows as a line about twice as dark as the grain (bench/README.md), and one
// image has no inner edges in any renderer (Options.PageImage says what it costs).
type overlayWriter struct {
	d      *document
	mode   overlayMode
	budget int64 // bytes the page images may add (overlayAuto)
	// pageImageBytes is what the page images made so far added (their encoded streams).
	pageImageBytes int64
	q              []float64     // the tile's filtered chips (overlayQ)
	strength       float64       // Options.Strength
	lv             overlayLevels // the tile's samples: 4-bit levels, or binary ones for tiny documents (binaryLevels)
	tiles          *markImage    // the tile image, made on first use
	pageImages     []markImage   // the page images made so far
	// refused are the sizes of page images the budget had no room for: an image at least as wide and as tall
	// costs at least as much, so it is refused without being encoded (a scan of many sizes would otherwise
	// encode an image for each).
	refused  []refusal
	forms    map[[2]float64]formRef
	prefix   types.IndirectRef
	suffixes map[string]types.IndirectRef
	resCopy  map[[2]int]resCopy // (original indirect resource dict, form) → its copy with the overlay form
	// artifact marks the overlay as an artifact (/Artifact BMC ... EMC) in a tagged document: content outside
	// the structure tree must be one for PDF/A-2a and -3a, and screen readers skip it.
	artifact bool
}

type resCopy struct {
	ref  types.IndirectRef
	name string
}

type formRef struct {
	ref       types.IndirectRef
	tiles     int
	pageImage bool
}

// overlayMode says how the overlay is drawn: page images within the budget else tiles (the default), tiles
// only, or page images whatever their size (Options.PageImage, Options.Tiles).
type overlayMode int

const (
	overlayAuto overlayMode = iota
	overlayTiles
	overlayPageImages
)

// pageImageBudget is the rule of the default overlay: the page images of a document of inBytes and pages
// pages may add the larger of a quarter of its input size and what keeps the output within twice its input
// (the input less pageImageReserve and pageImageReservePerPage for the rest of the mark), the latter capped at
// pageImageCap; the sizes that cover the most pages get theirs first (plan), and the sizes left when the budget
// is spent are drawn with tiles.
//
// Why: a page image costs about 7 KB for common shapes (Letter 7.1 KB, a 16:9 slide 7.8 KB: the tile's
// 4.3 KB of noise at 4 bits a sample, then Flate's matches of its period, maskBytes, and for pages at the
// minimum waxel its constant reach past the page, minWaxelReach) against about 4.4 KB for the tile image of a
// whole document, and real documents have one or two shapes (19 of the benchmark corpus's 21 have one). So a
// one-page Letter or A4 text document of 10 KB gets its page image and stays under 2×, and every document of
// about 10-12 KB or more per shape loses the tile lines (a 300×350-point page's image is 5.8 KB, an A5 page's
// 7.4 KB). A document whose main shape's 4-bit image does not fit (one Letter page under about 10 KB) gets
// binary levels instead (chooseLevels), whose images are 2.1 KB (the tile) to 3.6 KB, under the same budget;
// under about 3.4 KB a one-page document ends above 2× whatever the overlay: the binary tile and the rest of
// the mark add about 3.4 KB (the tile is 128×128 independent chips, which no coding stores in much less than
// a bit each).
// The cap keeps a small document of many
// shapes (a scan of pages of many sizes) from doubling: beyond about nine shapes it gets tiles for the rest,
// unless a quarter of its size allows more. A document whose budget runs out gets the tile image on top of its
// page images, which can take a small one of several shapes a few kilobytes past 2×.
func pageImageBudget(inBytes int64, pages int) int64 {
	room := min(inBytes-pageImageReserve-pageImageReservePerPage*int64(pages), pageImageCap)
	return max(inBytes/4, room)
}

// pageImageReserve and pageImageReservePerPage are what the rest of the mark adds besides the page images
// (measured: 1.8 KB for a one-page document: the structural layer, the overlay form, the page wrappers and
// their cross-reference entries; about 100 bytes per further page), rounded up; pageImageCap bounds the budget
// of small documents (pageImageBudget).
const (
	pageImageReserve        = 3 << 10
	pageImageReservePerPage = 128
	pageImageCap            = 64 << 10
)

func newOverlayWriter(d *document, c *codec.Codec, id codec.ID, strength float64, mode overlayMode, binary bool, budget int64) (*overlayWriter, error) {
	q := overlayQ(c, id)
	lv := fullLevels(q, strength)
	if binary {
		lv = binaryLevels(q, strength)
	}
	prefix, err := d.ctx.XRefTable.StreamDictIndRef([]byte("q\n"))
	if err != nil {
		return nil, err
	}
	return &overlayWriter{d: d, mode: mode, budget: budget, q: q, strength: strength, lv: lv, forms: map[[2]float64]formRef{}, prefix: *prefix,
		suffixes: map[string]types.IndirectRef{}, resCopy: map[[2]int]resCopy{}, artifact: d.tagged()}, nil
}

// pageImageOver enlarges a page image by a tenth of a point (at most 0.2 pixels at 150 dpi; the grid stays
// anchored at the top-left corner). MuPDF interpolates an image bilinearly when it magnifies it by at most
// twice and samples it nearest-neighbour above that (observed in its output: the same 2-pixel waxels drawn at
// exactly 2× rendered with two thirds of the pattern's amplitude, and lost the mark of VectorApple.pdf after
// rasterising and JPEG q75). The minimum waxel is exactly 2 pixels at 150 dpi, the detection resolution, so
// without this the overlay of small pages would be drawn at exactly 2×. The tile image never was: MuPDF
// widens each tile to whole pixels, which puts them just above 2×. MuPDF samples when either axis is above 2×,
// so a small page's image is enlarged along its long side only (minWaxelReach).
const pageImageOver = 0.1

// minWaxelReach is how far the page image of a page at the minimum waxel reaches along the page's long side,
// in page lengths; minWaxelMargin is how many waxels of the pattern it carries past the page's edge (the rest
// is a constant level, clipped). Why: at exactly 2 pixels a waxel (150 dpi) MuPDF samples an image
// nearest-neighbour only when it magnifies it by more than 2× along some axis, and it widens a magnified image
// to whole pixels, 2n+1 for n samples, which slips the pattern by one pixel (half a waxel) halfway across it.
// So the image is drawn at exactly 2 pixels a waxel across the page's short side (no slip there) and a tenth
// of a point longer than its waxels along the long side (pageImageOver: sampled, not blurred), and reaches
// three times the page's length along it, so that the slip falls past the page's edge, where nothing is
// drawn. Measured in MuPDF's 150-dpi renderings of white pages (TestSmallPageImageKeepsItsGrid): with twice
// the length the slip still fell inside some pages (at 91% of a 16:9 slide's width, 94% of a 300×350-point
// page's height); with three times, every pixel of 17 small pages, landscape and portrait, is its
// waxel's exact level. The reach past the page costs little: the rows there are a constant level, which
// Flate stores in a few bytes each (maskBytes).
const (
	minWaxelReach  = 3
	minWaxelMargin = 8
)

// markImage is one overlay image covering w×h pixels of the page's waxel grid (overlayImage). A transposed
// image is stored with its rows along the page's columns (maskBytes says why) and drawn rotated.
type markImage struct {
	w, h int
	// realW and realH are the part of the grid, from the top-left corner, that carries the pattern; beyond it
	// the image is a constant level (minWaxelReach). A page is drawn with an image only if its grid lies within.
	realW, realH int
	transposed   bool
	ref          types.IndirectRef
}

// pageImageStep rounds the size of a page image up, in waxels, so that pages of nearly the same size (scans,
// whose sizes vary by a few points from page to page) share one image rather than each adding tens of
// kilobytes: a page is drawn with the smallest image made so far that covers its waxel grid and is at most
// pageImageSlack times its size, the rest of the image lying past the page's edge, clipped.
const (
	pageImageStep  = 64
	pageImageSlack = 2
)

// pageImageFor returns the image covering a w×h-waxel grid (see pageImageStep) whose pattern covers the page's
// pw×ph-waxel grid, or false when a new image would be needed and its encoded size is beyond what is left of
// the budget (overlayAuto). For a page at the minimum waxel the grid reaches minWaxelReach times the page's
// length along its long side.
func (o *overlayWriter) pageImageFor(w, h, pw, ph int) (markImage, bool, error) {
	best := -1
	for i, m := range o.pageImages {
		if m.w >= w && m.h >= h && m.realW >= pw && m.realH >= ph && m.w*m.h <= pageImageSlack*w*h &&
			(best < 0 || m.w*m.h < o.pageImages[best].w*o.pageImages[best].h) {
			best = i
		}
	}
	if best >= 0 {
		return o.pageImages[best], true, nil
	}
	up := func(v int) int { return (v + pageImageStep - 1) / pageImageStep * pageImageStep }
	w, h = up(w), up(h)
	// The pattern covers the page's grid and minWaxelMargin waxels past it, or the whole image when that is
	// as large (a page's grid at full length: rw = w).
	rw, rh := min(w, max(pw+minWaxelMargin, up(pw))), min(h, max(ph+minWaxelMargin, up(ph)))
	var limit int64 = -1
	if o.mode == overlayAuto {
		limit = max(o.budget-o.pageImageBytes, 0) // spent: every new image is refused (a negative limit would mean none)
		for _, r := range o.refused {
			if w >= r.w && h >= r.h && rw >= r.rw && rh >= r.rh {
				return markImage{}, false, nil
			}
		}
	}
	m, cost, err := o.image(w, h, rw, rh, limit)
	if err != nil {
		return markImage{}, false, err
	}
	if cost < 0 {
		o.refused = append(o.refused, refusal{w, h, rw, rh})
		return markImage{}, false, nil
	}
	o.pageImageBytes += cost
	o.pageImages = append(o.pageImages, m)
	return m, true, nil
}

// refusal is the size of a page image the budget had no room for, and of its pattern.
type refusal struct{ w, h, rw, rh int }

// tileImage returns the tile image, made on first use and shared by every page drawn with tiles.
func (o *overlayWriter) tileImage() (markImage, error) {
	if o.tiles == nil {
		const n = codec.TileSide * tileOversample
		m, _, err := o.image(n, n, n, n, -1)
		if err != nil {
			return markImage{}, err
		}
		o.tiles = &m
	}
	return *o.tiles, nil
}

// image adds the overlay image of a w×h-pixel mark: the tile repeated from the top-left corner over its
// rw×rh corner and a constant level beyond, stored transposed when w > h (maskBytes). It returns the bytes of
// its encoded streams; with a limit of 0 or more, an image whose streams would take more than limit bytes is
// not added, and it returns -1.
func (o *overlayWriter) image(w, h, rw, rh int, limit int64) (markImage, int64, error) {
	m := markImage{w: w, h: h, realW: rw, realH: rh, transposed: w > h}
	img, err := newOverlayImage(o.d, maskBytes(o.lv, w, h, rw, rh, m.transposed), o.lv)
	if err != nil {
		return markImage{}, 0, err
	}
	cost := img.size()
	if limit >= 0 && cost > limit {
		return markImage{}, -1, nil
	}
	if m.ref, err = img.add(o.d); err != nil {
		return markImage{}, 0, err
	}
	return m, cost, nil
}

// sampleBits is the depth of the overlay image's soft mask and of its samples with full levels (fullLevels):
// 0..round(MaxStrength), which 4 bits hold.
const sampleBits = 4

// binaryLevels are the tile's levels at one bit a sample, for documents too small for the 4-bit image
// (chooseLevels): each waxel darkens white paper by the strength rounded or not at all, chosen by error
// diffusion (diffuse) so that the local mean darkening follows the 4-bit levels' and the binary pattern's extra
// error lies at the highest frequencies, where the eye sees least. The peak darkening is the strength, as with
// 4 bits, and the image is half the size: about 2.1 KB of noise for the tile against 4.4 KB (docs/codec.md,
// "Tiny PDF documents", has the measurements, and what the binary grain costs).
func binaryLevels(q []float64, strength float64) overlayLevels {
	total := int(math.Round(strength))
	return overlayLevels{samples: diffuse(q), light: []int{0, total}, total: total, bits: 1, fill: 1}
}

// diffuse quantises the tile's values q (−1..1, whose 4-bit levels darken by strength·(1−q)/2) to binary
// samples, 0 for a waxel that darkens by the whole strength and 1 for one that does not, by Floyd–Steinberg error
// diffusion (serpentine) of the darkening (1−q)/2 over the tile repeated 3×3, keeping the middle copy so that
// the error carried in from its edges is the tile's own (the tile repeats over the page).
func diffuse(q []float64) []byte {
	const n = codec.TileSide * tileOversample
	const m = 3 * n
	target := make([]float64, m*m)
	for y := 0; y < m; y++ {
		for x := 0; x < m; x++ {
			target[y*m+x] = (1 - q[(y%n)*n+x%n]) / 2
		}
	}
	out := make([]byte, n*n)
	for y := 0; y < m; y++ {
		dir, x0, x1 := 1, 0, m
		if y%2 == 1 {
			dir, x0, x1 = -1, m-1, -1
		}
		for x := x0; x != x1; x += dir {
			v := target[y*m+x]
			var qv float64
			if v >= 0.5 {
				qv = 1
			}
			e := v - qv
			if y >= n && y < 2*n && x >= n && x < 2*n && qv == 0 {
				out[(y-n)*n+x-n] = 1
			}
			if xx := x + dir; xx >= 0 && xx < m {
				target[y*m+xx] += e * 7 / 16
			}
			if y+1 < m {
				if xx := x - dir; xx >= 0 && xx < m {
					target[(y+1)*m+xx] += e * 3 / 16
				}
				target[(y+1)*m+x] += e * 5 / 16
				if xx := x + dir; xx >= 0 && xx < m {
					target[(y+1)*m+xx] += e * 1 / 16
				}
			}
		}
	}
	return out
}

// overlayLevels is the overlay tile as image samples: samples holds one sample value per tile pixel, light[s]
// is the light levels that sample value s stands for (overlayImage), total the strength rounded (dark + light
// at every waxel), bits the sample depth and fill the sample of the constant part past the pattern
// (minWaxelReach; clipped, so any value).
type overlayLevels struct {
	samples []byte
	light   []int
	total   int
	bits    int
	fill    byte
}

// fullLevels are the tile's levels as overlayMasks rounds them, one 4-bit sample per pixel (the default).
func fullLevels(q []float64, strength float64) overlayLevels {
	total := int(math.Round(strength))
	lv := overlayLevels{samples: make([]byte, len(q)), total: total, bits: sampleBits, fill: byte(total / 2)}
	for l := 0; l <= total; l++ {
		lv.light = append(lv.light, l)
	}
	for i, v := range q {
		lv.samples[i] = byte(total - darkLevels(strength, v))
	}
	return lv
}

// maskDecodeMax is the Decode maximum of the 4-bit soft mask: sample 15 means alpha 15/255, so sample v is v
// levels of 255, as an 8-bit mask's sample v would be. MuPDF turns the Decode range into whole levels by
// truncation (×255), so the value is written a hair above 15/255 to come out as exactly 15.
const maskDecodeMax = 15.0/255 + 1e-6

// mask is a w×h-pixel image of 4-bit samples in stored order (see maskBytes).
type mask struct {
	w, h int // stored size
	data []byte
}

// maskBytes repeats a tile of levels (codec.TileSide² samples) over a w×h grid from its top-left corner and
// packs it at sampleBits per sample, rows padded to whole bytes. Transposed, the stored image has h columns and w
// rows: its pixel (c, r) is the grid's (r, c). Why both: the page image is noise that Flate compresses only by
// finding the tile's previous period, and it looks back at most 32 KiB; at 4 bits a stored row of at most 512
// waxels (the page's short side, overlayGrid) is at most 256 bytes, so the tile's 128-row period fits the
// window and every row after the first 128 costs almost nothing (Letter: about 6.6 KB, against 32 KB for one
// 8-bit image). Stored along a long side of 768 waxels it would cost 17 KB.
//
// Grid cells at or beyond column rw or row rh get the constant fill instead of the tile (minWaxelReach): the
// rows of such an image past the pattern cost Flate a few bytes each, where pattern rows cost a match of at most
// 258 bytes each, which for an image three times the page's length would be most of its size.
func maskBytes(lv overlayLevels, w, h, rw, rh int, transposed bool) mask {
	const n = codec.TileSide * tileOversample
	sw, sh := w, h
	if transposed {
		sw, sh = h, w
	}
	perByte := 8 / lv.bits
	rowBytes := (sw*lv.bits + 7) / 8
	out := make([]byte, rowBytes*sh)
	for r := 0; r < sh; r++ {
		row := out[r*rowBytes : (r+1)*rowBytes]
		for c := 0; c < sw; c++ {
			x, y := c, r
			if transposed {
				x, y = r, c
			}
			v := lv.fill
			if x < rw && y < rh {
				v = lv.samples[(y%n)*n+x%n]
			}
			row[c/perByte] |= v << (8 - lv.bits*(c%perByte+1))
		}
	}
	return mask{w: sw, h: sh, data: out}
}

// overlayImage is the overlay's image with its soft mask, encoded but not yet in the document.
//
// One image does what a black image under the dark levels and a white one under the light levels would (the
// overlay until 2026-11-27, twice the bytes): with L = dark + light at every waxel (the strength rounded), its
// soft mask is the constant alpha (L+1)/255 and its gray (l+1)/(L+1) for a waxel of l light levels, through an
// indexed colour space whose lookup holds round(255·(l+1)/(L+1)). Compositing gives
// page·(1 − (L+1)/255) + l + 1: white paper darkens by exactly dark levels, as before, and any other
// background shows the same pattern, lighter by 1 − page/255 levels (black by one level). Why the +1 rather
// than alpha L/255 and gray l/L, which is the two images term for term: with those, MuPDF rendered black
// pages with a grain of 0.99 levels against the two images' 1.22 at 150 dpi (as if it truncated the product
// of a gray and a small alpha); with the +1, 1.43, the white page's amplitude
// (TestOverlayKeepsItsSwingOnDarkPages). Measured on white, 50% gray and black Letter pages in MuPDF and
// poppler at 96 and 150 dpi: the grain's standard deviation is the two images' or more everywhere except
// MuPDF on gray at 150 dpi (1.43 against 1.52 levels); on white at 150 dpi in MuPDF the rendering is
// identical. Other strengths and a 20% gray: bench/README.md.
type overlayImage struct {
	mask, img types.StreamDict
}

// newOverlayImage encodes the overlay image of samples m, sample value s standing for lv.light[s] light levels
// (of lv.total).
func newOverlayImage(d *document, m mask, lv overlayLevels) (overlayImage, error) {
	xt := d.ctx.XRefTable
	levels := lv.total
	alpha := make([]byte, (m.w*sampleBits+7)/8*m.h)
	for i := range alpha {
		alpha[i] = byte((levels+1)<<4 | (levels + 1))
	}
	sm, err := xt.NewStreamDictForBuf(alpha)
	if err != nil {
		return overlayImage{}, err
	}
	imageDict(sm.Dict, m.w, m.h, sampleBits)
	sm.Dict["ColorSpace"] = types.Name("DeviceGray")
	sm.Dict["Decode"] = types.NewNumberArray(0, maskDecodeMax)
	if err := sm.Encode(); err != nil {
		return overlayImage{}, fmt.Errorf("encode overlay mask: %w", err)
	}
	img, err := xt.NewStreamDictForBuf(m.data)
	if err != nil {
		return overlayImage{}, err
	}
	imageDict(img.Dict, m.w, m.h, lv.bits)
	lookup := make([]byte, len(lv.light))
	for s, l := range lv.light {
		lookup[s] = byte(math.Round(255 * float64(l+1) / float64(levels+1)))
	}
	img.Dict["ColorSpace"] = types.Array{types.Name("Indexed"), types.Name("DeviceGray"), types.Integer(len(lookup) - 1), types.NewHexLiteral(lookup)}
	if err := img.Encode(); err != nil {
		return overlayImage{}, fmt.Errorf("encode overlay image: %w", err)
	}
	return overlayImage{mask: *sm, img: *img}, nil
}

// size is the bytes of the two encoded streams (their dictionaries add about 300 more).
func (m overlayImage) size() int64 { return int64(len(m.mask.Raw) + len(m.img.Raw)) }

// add puts the mask and the image into the document and returns the image's reference.
func (m overlayImage) add(d *document) (types.IndirectRef, error) {
	xt := d.ctx.XRefTable
	maskRef, err := xt.IndRefForNewObject(m.mask)
	if err != nil {
		return types.IndirectRef{}, err
	}
	m.img.Dict["SMask"] = *maskRef
	ref, err := xt.IndRefForNewObject(m.img)
	if err != nil {
		return types.IndirectRef{}, err
	}
	return *ref, nil
}

func imageDict(d types.Dict, w, h, bits int) {
	d["Type"] = types.Name("XObject")
	d["Subtype"] = types.Name("Image")
	d["Width"] = types.Integer(w)
	d["Height"] = types.Integer(h)
	d["BitsPerComponent"] = types.Integer(bits)
}

// pdfNumber is v as a PDF integer when it is one: pdfcpu writes reals with twelve decimals, which a document
// of a few kilobytes notices.
func pdfNumber(v float64) types.Object {
	if v == math.Trunc(v) && math.Abs(v) < 1<<31 {
		return types.Integer(int(v))
	}
	return types.Float(v)
}

func num(v float64) string {
	return strconv.FormatFloat(math.Round(v*10000)/10000, 'f', -1, 64)
}

// minWaxelPt is the smallest waxel drawn, in points: 2 pixels at the 150 dpi detection rendering. The image
// detector expects waxels of shortSide/512 pixels on images with a short side of 1024 pixels or more and of
// 2 pixels below that, so pages with a short side under 491.5 points (A5, slides, cards) get 2-pixel waxels at
// 150 dpi, which also survive rasterisation and JPEG far better than the sub-pixel waxels that 1/512 of their
// short side would give.
const minWaxelPt = 2 * 72.0 / 150

// form returns the form XObject that draws the mark over a w×h page (origin at its lower-left corner).
// The waxel is 1/512 of the short side (at least minWaxelPt) and the grid starts at the top-left corner, where
// renderers start the raster, so that a rendering presents the pattern exactly as the codec would have embedded
// it in the image. The mark is the tile image in a grid or, with pageImage and up to maxPageImagePixels, one
// image of whole waxels covering the page from its top-left corner (what reaches past the page's edge is
// clipped): the same pixels at the same places either way.
func (o *overlayWriter) form(w, h float64) (formRef, error) {
	key := formKey(w, h)
	if f, ok := o.forms[key]; ok {
		return f, nil
	}
	ws, px, py := overlayGrid(w, h)
	t := ws * codec.TileSide
	nx, ny := int(math.Ceil(w/t-1e-9)), int(math.Ceil(h/t-1e-9))
	var b strings.Builder
	fmt.Fprintf(&b, "0 0 %s %s re W n\n", num(w), num(h))
	var m markImage
	var err error
	pageImage := false
	gw, gh, ow, oh := pageImageGrid(ws, px, py)
	if o.mode != overlayTiles && gw*gh <= maxPageImagePixels {
		if m, pageImage, err = o.pageImageFor(gw, gh, px, py); err != nil {
			return formRef{}, err
		}
	}
	if pageImage {
		iw, ih := float64(m.w)/tileOversample*ws+ow, float64(m.h)/tileOversample*ws+oh
		if m.transposed {
			// The stored image's rows are the grid's columns: its unit square turned so that its top-left
			// pixel is the page's, its rows running left to right across the page.
			fmt.Fprintf(&b, "q 0 %s %s 0 %s %s cm /M Do Q\n", num(-ih), num(-iw), num(iw), num(h))
		} else {
			fmt.Fprintf(&b, "q %s 0 0 %s 0 %s cm /M Do Q\n", num(iw), num(ih), num(h-ih))
		}
	} else {
		if m, err = o.tileImage(); err != nil {
			return formRef{}, err
		}
		for j := 0; j < ny; j++ {
			for i := 0; i < nx; i++ {
				fmt.Fprintf(&b, "q %s 0 0 %s %s %s cm /M Do Q\n", num(t), num(t), num(float64(i)*t), num(h-float64(j+1)*t))
			}
		}
	}
	xt := o.d.ctx.XRefTable
	sd, err := xt.NewStreamDictForBuf([]byte(b.String()))
	if err != nil {
		return formRef{}, err
	}
	sd.Dict["Type"] = types.Name("XObject")
	sd.Dict["Subtype"] = types.Name("Form")
	sd.Dict["BBox"] = types.Array{types.Integer(0), types.Integer(0), pdfNumber(w), pdfNumber(h)}
	sd.Dict["Resources"] = types.Dict{"XObject": types.Dict{"M": m.ref}}
	if err := sd.Encode(); err != nil {
		return formRef{}, err
	}
	ref, err := xt.IndRefForNewObject(*sd)
	if err != nil {
		return formRef{}, err
	}
	f := formRef{ref: *ref, tiles: nx * ny, pageImage: pageImage}
	o.forms[key] = f
	return f, nil
}

// pageImageGrid is the grid of the page image of a page of px×py waxels of ws points, in waxels, and how much
// longer than its waxels it is drawn each way, in points. At the minimum waxel the image reaches minWaxelReach
// times the page's length along its long side, drawn a tenth of a point longer than its waxels along it and at
// exactly its waxels across; a page too elongated for that within maxPageImagePixels (a 491.5-point strip over
// about 1310 points long) keeps an image of its own length, a tenth of a point larger both ways, and its slip
// halfway along.
func pageImageGrid(ws float64, px, py int) (gw, gh int, ow, oh float64) {
	gw, gh = px, py
	ow, oh = pageImageOver, pageImageOver
	if ws <= minWaxelPt && minWaxelReach*px*py <= maxPageImagePixels {
		if px > py {
			gw, oh = minWaxelReach*px, 0
		} else {
			gh, ow = minWaxelReach*py, 0
		}
	}
	return gw, gh, ow, oh
}

// formKey identifies a page size among the forms (to a thousandth of a point).
func formKey(w, h float64) [2]float64 {
	return [2]float64{math.Round(w*1000) / 1000, math.Round(h*1000) / 1000}
}

// overlayGrid is the overlay's geometry on a displayed w×h-point page: the waxel in points and the waxel grid
// covering the page, in image pixels.
func overlayGrid(w, h float64) (ws float64, px, py int) {
	ws = max(min(w, h)/codec.OverlayWaxelsPerShortSide, minWaxelPt)
	return ws, int(math.Ceil(w/ws-1e-9)) * tileOversample, int(math.Ceil(h/ws-1e-9)) * tileOversample
}

// plan makes the forms of the document's page sizes before any page is drawn, the sizes of the most pages first
// (pages counted per page-image size, so that the near sizes of a scan count together; ties in page order).
// Under the budget (overlayAuto) the sizes that cover the most pages then get the page images: a cover or an
// inserted plate of another size, met first, does not spend the budget the body's pages need. Pages that
// cannot be read are left to page, which refuses them.
func (o *overlayWriter) plan(pages int) error {
	if o.mode != overlayAuto {
		return nil
	}
	type size struct {
		w, h  float64
		group [2]int
	}
	var sizes []size
	seen := map[[2]float64]bool{}
	groupPages := map[[2]int]int{}
	up := func(v int) int { return (v + pageImageStep - 1) / pageImageStep * pageImageStep }
	for p := 1; p <= pages; p++ {
		_, _, view, err := o.view(p)
		if err != nil {
			continue
		}
		_, px, py := overlayGrid(view.W, view.H)
		g := [2]int{up(px), up(py)}
		groupPages[g]++
		if k := formKey(view.W, view.H); !seen[k] {
			seen[k] = true
			sizes = append(sizes, size{view.W, view.H, g})
		}
	}
	sort.SliceStable(sizes, func(i, j int) bool { return groupPages[sizes[i].group] > groupPages[sizes[j].group] })
	if len(sizes) > 0 && o.lv.bits != 1 {
		if err := o.chooseLevels(sizes[0].w, sizes[0].h); err != nil {
			return err
		}
	}
	for _, sz := range sizes {
		if _, err := o.form(sz.w, sz.h); err != nil {
			return err
		}
	}
	return nil
}

// chooseLevels switches the document to binary levels (binaryLevels) when it is too small for the 4-bit
// overlay of its main page size (w×h): when the budget has no room for that size's 4-bit page image, or, for a
// page too elongated for a page image, for the 4-bit tile image. A 4-bit image it makes on the way is kept for
// the forms.
func (o *overlayWriter) chooseLevels(w, h float64) error {
	ws, px, py := overlayGrid(w, h)
	gw, gh, _, _ := pageImageGrid(ws, px, py)
	fits := false
	if gw*gh <= maxPageImagePixels {
		_, ok, err := o.pageImageFor(gw, gh, px, py)
		if err != nil {
			return err
		}
		fits = ok
	} else {
		const n = codec.TileSide * tileOversample
		m, cost, err := o.image(n, n, n, n, max(o.budget, 0))
		if err != nil {
			return err
		}
		if fits = cost >= 0; fits {
			o.tiles = &m
		}
	}
	if !fits {
		o.lv = binaryLevels(o.q, o.strength)
		o.refused = nil
	}
	return nil
}

// view reads page p and how it is displayed, refusing a page that cannot carry the overlay.
func (o *overlayWriter) view(p int) (types.Dict, *model.InheritedPageAttrs, pageView, error) {
	pd, attrs, err := o.d.page(p)
	if err != nil || pd == nil {
		return nil, nil, pageView{}, &Error{Code: CodeBroken, Reason: fmt.Sprintf("page %d cannot be read", p), Err: err}
	}
	box := visibleBox(attrs.MediaBox, attrs.CropBox)
	if box == nil {
		return nil, nil, pageView{}, refuse(CodeBroken, "page %d has no valid media box", p)
	}
	if max(box.Width(), box.Height()) > o.d.lim.MaxPageSide {
		return nil, nil, pageView{}, refuse(CodeTooLarge, "page %d is %.0f×%.0f units, above the limit of %.0f", p, box.Width(), box.Height(), o.d.lim.MaxPageSide)
	}
	// The overlay is drawn as the page is displayed (rotated, in points): see pageView.
	view := newPageView(*box, attrs.Rotate, pageUserUnit(o.d, pd))
	if min(view.W, view.H) < 36 {
		return nil, nil, pageView{}, refuse(CodeTooLarge, "page %d is %.1f×%.1f points, too small to carry a mark", p, view.W, view.H)
	}
	return pd, attrs, view, nil
}

// page adds the overlay to page p and returns what it drew.
func (o *overlayWriter) page(p int) (PageUnit, error) {
	xt := o.d.ctx.XRefTable
	pd, attrs, view, err := o.view(p)
	if err != nil {
		return PageUnit{}, err
	}
	w, h := view.W, view.H
	f, err := o.form(w, h)
	if err != nil {
		return PageUnit{}, err
	}
	name, err := o.resources(pd, attrs.Resources, f.ref)
	if err != nil {
		return PageUnit{}, err
	}
	suffix, err := o.suffix(view.CM, name)
	if err != nil {
		return PageUnit{}, err
	}
	contents := types.Array{o.prefix}
	if c, ok := pd["Contents"]; ok && c != nil {
		obj, err := xt.Dereference(c)
		if err != nil {
			return PageUnit{}, &Error{Code: CodeBroken, Reason: fmt.Sprintf("page %d has unreadable content", p), Err: err}
		}
		switch v := obj.(type) {
		case types.Array:
			contents = append(contents, v...)
		case types.StreamDict:
			contents = append(contents, c)
		case nil:
		default:
			return PageUnit{}, refuse(CodeBroken, "page %d has content of type %T", p, obj)
		}
	}
	contents = append(contents, suffix)
	pd["Contents"] = contents
	return PageUnit{Index: p - 1, Width: w, Height: h, Tiles: f.tiles, PageImage: f.pageImage}, nil
}

// visibleBox is the crop box clipped to the media box, which is what viewers and renderers show.
func visibleBox(media, crop *types.Rectangle) *types.Rectangle {
	if media == nil {
		return nil
	}
	r := *media
	if r.LL.X > r.UR.X {
		r.LL.X, r.UR.X = r.UR.X, r.LL.X
	}
	if r.LL.Y > r.UR.Y {
		r.LL.Y, r.UR.Y = r.UR.Y, r.LL.Y
	}
	if crop != nil {
		c := *crop
		if c.LL.X > c.UR.X {
			c.LL.X, c.UR.X = c.UR.X, c.LL.X
		}
		if c.LL.Y > c.UR.Y {
			c.LL.Y, c.UR.Y = c.UR.Y, c.LL.Y
		}
		r.LL.X, r.LL.Y = max(r.LL.X, c.LL.X), max(r.LL.Y, c.LL.Y)
		r.UR.X, r.UR.Y = min(r.UR.X, c.UR.X), min(r.UR.Y, c.UR.Y)
	}
	if !(r.Width() > 0 && r.Height() > 0) || math.IsInf(r.Width(), 0) || math.IsInf(r.Height(), 0) {
		return nil
	}
	return &r
}

// suffix is the content stream that ends the page: it restores the graphics state of the page's start and draws
// the overlay form through cm (pageView.CM), as an artifact in a tagged document.
func (o *overlayWriter) suffix(cm [6]float64, name string) (types.IndirectRef, error) {
	s := fmt.Sprintf("\nQ\nq %s %s %s %s %s %s cm /%s Do Q\n", cmNum(cm[0]), cmNum(cm[1]), cmNum(cm[2]), cmNum(cm[3]), cmNum(cm[4]), cmNum(cm[5]), name)
	if o.artifact {
		s = "\nQ\n/Artifact BMC" + s[2:] + "EMC\n"
	}
	if r, ok := o.suffixes[s]; ok {
		return r, nil
	}
	r, err := o.d.ctx.XRefTable.StreamDictIndRef([]byte(s))
	if err != nil {
		return types.IndirectRef{}, err
	}
	o.suffixes[s] = *r
	return *r, nil
}

// resources gives the page its own resource dictionary: a shallow copy of the one it used (its own or inherited),
// with the overlay form added to the XObjects under a name not taken. Pages that shared an indirect resource
// dictionary share the copy. It returns the name.
func (o *overlayWriter) resources(pd, inherited types.Dict, form types.IndirectRef) (string, error) {
	xt := o.d.ctx.XRefTable
	orig, own := pd["Resources"]
	var src types.Dict
	cacheKey := [2]int{-1, form.ObjectNumber.Value()}
	if own {
		if ref, ok := orig.(types.IndirectRef); ok {
			cacheKey[0] = ref.ObjectNumber.Value()
			if c, ok := o.resCopy[cacheKey]; ok {
				pd["Resources"] = c.ref
				return c.name, nil
			}
		}
		src = o.d.dict(orig)
	} else {
		src = inherited
	}
	res := types.Dict{}
	for k, v := range src {
		res[k] = v
	}
	xobj := types.Dict{}
	for k, v := range o.d.dict(res["XObject"]) {
		xobj[k] = v
	}
	name := "Fg"
	for i := 1; xobj[name] != nil; i++ {
		name = "Fg" + strconv.Itoa(i)
	}
	xobj[name] = form
	res["XObject"] = xobj
	if cacheKey[0] >= 0 {
		ref, err := xt.IndRefForNewObject(res)
		if err != nil {
			return "", err
		}
		o.resCopy[cacheKey] = resCopy{ref: *ref, name: name}
		pd["Resources"] = *ref
		return name, nil
	}
	pd["Resources"] = res
	return name, nil
}
