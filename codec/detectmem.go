package codec

import (
	"image"
	"math"
)

// MaxDetectAspect bounds the long side of the region Detect analyses to this many times the short side.
//
// Why: the lattice search pads the luma plane of the finest pyramid level with a short side of at most
// latticeMaxSide to powers of two and transforms it, so a 156250×256 image (40 MP, a 38 kB PNG) costs a
// 262144×256 FFT and 2.3 GB. The mark's geometry depends only on the short side and is anchored at the
// top-left corner, and a 4:1 region holds at least four whole tiles, so analysing the top-left 4:1 region of a
// longer image finds the same mark at a bounded cost.
const MaxDetectAspect = 4

// DetectRegion returns the part of an image with bounds b that callers should pass to Detect: b itself, or its
// top-left region whose long side is MaxDetectAspect times its short side.
func DetectRegion(b image.Rectangle) image.Rectangle {
	w, h := b.Dx(), b.Dy()
	s := min(w, h)
	if s <= 0 {
		return b
	}
	if w > MaxDetectAspect*s {
		w = MaxDetectAspect * s
	}
	if h > MaxDetectAspect*s {
		h = MaxDetectAspect * s
	}
	return image.Rectangle{Min: b.Min, Max: b.Min.Add(image.Pt(w, h))}
}

// DetectMemory is an upper estimate of the bytes Detect allocates at its peak for a w×h image (a region from
// DetectRegion). It follows the detector's buffers: the float32 luma plane (reduced above detectMaxPixels) and
// its pyramid, the whitening planes and the padded float64/complex128 autocorrelation buffers of the lattice
// level, and the waxel grids. Measured (peak RSS of decode and detect of a PNG together, /usr/bin/time -v):
// 7000×5000, 350 MB for an estimate of 337 MB plus the decode's; 4400×1100, 430 MB for 391 MB; 156250×256
// uncropped, 2.3 GB for 2.2 GB, and 219 MB once cropped by DetectRegion (estimate 11 MB plus the decode's).
func DetectMemory(w, h int) int64 {
	if w <= 0 || h <= 0 {
		return 0
	}
	if px := w * h; px > detectMaxPixels {
		f := int(math.Ceil(math.Sqrt(float64(px) / detectMaxPixels)))
		w, h = w/f, h/f
	}
	plane := 4 * int64(w) * int64(h)
	lw, lh := w, h
	for min(lw, lh) > latticeMaxSide && min(lw, lh)/2 >= 16 {
		lw, lh = lw/2, lh/2
	}
	padded := int64(nextPow2(lw)) * int64(nextPow2(lh))
	level := int64(lw) * int64(lh)
	// luma + pyramid (4/3), grids and whitening (1), lattice: 16 bytes per padded sample, 5 float32 planes.
	return plane*7/3 + 16*padded + 20*level
}

// EmbedMemory is an upper estimate of the bytes Embed allocates at its peak for a w×h image, besides the input
// image: the float32 luma, masks and pattern planes, and the marked copy (NRGBA, or NRGBA64 when deep).
// Measured: 4000×3000 NRGBA, embed and PNG encoding together 245 MB beyond the input (20 bytes per pixel).
func EmbedMemory(w, h int, deep bool) int64 {
	px := int64(max(w, 0)) * int64(max(h, 0))
	if deep {
		return 28 * px
	}
	return 24 * px
}
