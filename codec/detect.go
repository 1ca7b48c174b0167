package codec

// Detection limits. Images with a short side below minDetectSide are reported as unmarked without analysis.
// maxDecodeAttempts bounds how many synchronisation hypotheses are decoded per image, which bounds the
// false-positive rate (docs/codec.md).
const (
	minDetectSide   = 64
	detectMaxPixels = 48 << 20 // larger images are box-reduced before analysis (bounded memory)
	// The count: nominal, downscaled, coarse and the fine+coarse sum (or, when the fine layer did not pass the
	// pilot gate, the coarse layer's pilot-weighted fold: one decode either way); each lattice hypothesis at its
	// own scale and the scale scan's once more at the best of the probed scales; twice the coarse layer and its
	// sum at the best lattice geometry (after each of those two passes).
	maxDecodeAttempts = 4 + latticeHypotheses + 1 + 4
	latticeHypotheses = 5
	// pilotGate is the pilot z-score below which a hypothesis is dropped before refinement and decoding. The best
	// of the 8×16384 orientations and offsets of an unmarked image rarely exceeds 5; a mark with a pilot this weak
	// has a raw coded-bit error rate near 30%, beyond the code.
	pilotGate = 5.0
	// minWaxel is the smallest waxel, in pixels, a hypothesis may have: a mark downscaled below that is gone.
	minWaxel = 0.8
	// probeBelow is the pilot z-score below which a lattice hypothesis that did not decode is tried again at
	// slightly different scales (tryScaled): a correct lattice reads 10 or more; a pilot just above the gate is
	// often a slightly wrong scale.
	probeBelow = 8.0
)

// latticeScaleProbes are the relative scale corrections tried on the scale scan's lattice candidate when its pilot
// is weak: ±0.6% in steps of 0.3%, so that an estimate up to 0.75% off is left within 0.15% (under a waxel of
// drift across a 1100-pixel lattice level). The screenshot chain's estimates were up to 0.55% off.
var latticeScaleProbes = [...]float64{-0.003, 0.003, -0.006, 0.006}

// attempt is the outcome of decoding under one synchronisation hypothesis.
type attempt struct {
	coded  []float64 // coded-bit LLRs, kept for diagnostics
	res    decodeResult
	pilotZ float64
	valid  bool
	geom   affine // the waxel map whose fold gave the pilot alignment (before alignment and refinement)
	synced affine // the map after alignment and refinement, which the soft word was demodulated under
}

// detectPlane runs the whole detector on a luma plane.
func (c *Codec) detectPlane(y plane) Detection {
	return c.detectAttempt(y).detection()
}

// detectAttempt returns the best attempt (the first that decodes, else the one with the strongest pilot).
func (c *Codec) detectAttempt(y plane) attempt {
	if min(y.w, y.h) < minDetectSide {
		return attempt{}
	}
	pyr := buildPyramid(y, 16)
	return c.searchAttempts(y.w, y.h, cpuSampler{c: c, pyr: pyr}, func() pyramid { return pyr })
}

// sampler is what an attempt needs from the image: the whitened waxel grid under a geometry, its fold, the
// pilot alignment of a fold, the refinement's block scores of the whitened grid, and the decoding of a soft
// word. The CPU computes them from a pyramid; a device (device.go) on its own copy.
type sampler interface {
	whitened(a affine) waxelGrid
	folded(a affine) ([]float64, bool) // fold(whiten(sampleGrid)); false when the grid is empty
	align(acc []float64) alignment
	// refineScores is blockScores of whitened(a) and its blocks; nil scores when the grid is empty.
	refineScores(a affine, radius int) (refineBlocks, []float64)
	decode(llr []float64) decodeResult // decodeSoft
}

// detectRows is detectAttempt on a luma source that is read only as far as needed: the pyramid is built from
// level 1 up without holding the full-resolution plane, which is materialised only when a hypothesis samples
// level 0 (waxels under 4 pixels) or the lattice search works on it (short side up to latticeMaxSide). On a
// 12 MP image at its own geometry that saves a 4-byte-per-pixel plane; the levels are those of buildPyramid bit
// for bit, so the result is detectAttempt's.
func (c *Codec) detectRows(y rowSource) attempt {
	if min(y.w, y.h) < minDetectSide {
		return attempt{}
	}
	dims := pyramidDims(y.w, y.h, 16)
	if len(dims) == 1 {
		return c.detectAttempt(y.materialize())
	}
	pyr := make(pyramid, len(dims))
	pyr[0] = plane{w: y.w, h: y.h}
	pyr[1] = y.halved().materialize()
	for i := 2; i < len(pyr); i++ {
		pyr[i] = pyr[i-1].half()
	}
	full := func() {
		if pyr[0].pix == nil {
			pyr[0] = y.materialize()
		}
	}
	s := cpuSampler{c: c, pyr: pyr, full: full}
	return c.searchAttempts(y.w, y.h, s, func() pyramid {
		if latticeLevel(pyr) == 0 {
			full()
		}
		return pyr
	})
}

// cpuSampler samples a pyramid. When full is set, level 0 may be missing (no pixels) until full is called.
type cpuSampler struct {
	c    *Codec
	pyr  pyramid
	full func()
}

func (s cpuSampler) sample(a affine) waxelGrid {
	if s.full != nil {
		if gm, ok := gridMapFor(s.pyr.dims(), a); ok && gm.level == 0 {
			s.full()
		}
	}
	return sampleGrid(s.pyr, a)
}

func (s cpuSampler) whitened(a affine) waxelGrid { return whiten(s.sample(a)) }

func (s cpuSampler) folded(a affine) ([]float64, bool) {
	g := whiten(s.sample(a))
	if g.w == 0 {
		return nil, false
	}
	acc, _ := fold(g)
	return acc, true
}

func (s cpuSampler) align(acc []float64) alignment { return s.c.searchDihedral(acc) }

func (s cpuSampler) refineScores(a affine, radius int) (refineBlocks, []float64) {
	return s.c.layout.refineScoresOf(s.whitened(a), radius)
}

func (s cpuSampler) decode(llr []float64) decodeResult { return decodeSoft(llr) }

// searchAttempts tries the synchronisation hypotheses in order on a w×h image and returns the first attempt
// that decodes, else the one with the strongest pilot. pyramidOf gives the host pyramid for the lattice
// estimation, the last and rarest stage.
func (c *Codec) searchAttempts(w, h int, s sampler, pyramidOf func() pyramid) attempt {
	var best, nominal attempt
	keep := func(at attempt) bool {
		if at.valid && (!best.valid || at.res.ok || at.pilotZ > best.pilotZ) {
			best = at
		}
		return at.res.ok
	}
	try := func(a0 affine) bool { return keep(c.tryGeometry(s, a0)) }
	// The geometry Embed used for an image of this size comes first: it is exact when the image was not
	// resized (re-encoded, brightened, flipped, or cropped below a 1024-pixel short side) and costs no lattice
	// estimation.
	nominal = c.tryGeometry(s, nominalAffine(w, h))
	if keep(nominal) {
		return best
	}
	// Second, an image downscaled (by any factor, without cropping) from an original with a short side of 1024
	// pixels or more: resolution normalisation makes its waxel exactly shortSide/512 pixels now. This matters
	// below a 1024-pixel short side, where it differs from the nominal 2 pixels, and it finds marks too weak for
	// the lattice search (a half-size copy recompressed as JPEG).
	if sh := min(w, h); sh < 1024 && float64(sh)/512 >= minWaxel {
		if try(scaledAffine(float64(sh) / 512)) {
			return best
		}
	}
	// Third, the coarse layer that Embed adds on flat regions (the same tile at coarseFactor times the waxel):
	// after strong JPEG compression it is often all that is left of a mark on flat artwork or skies.
	coarse := c.tryGeometry(s, scaledAffine(coarseFactor*waxelSize(w, h)))
	if keep(coarse) {
		return best
	}
	// Fourth, both layers together: where each is read only in part (JPEG leaves the fine layer in textured
	// regions and the coarse one in flat regions), their coded-bit LLRs add (independent noise, same bits).
	if nominal.valid && coarse.valid {
		sum := make([]float64, len(nominal.coded))
		for i := range sum {
			sum[i] = nominal.coded[i] + coarse.coded[i]
		}
		if keep(attempt{coded: sum, res: s.decode(sum), pilotZ: max(nominal.pilotZ, coarse.pilotZ), valid: true}) {
			return best
		}
	} else if coarse.valid {
		// Or, when the fine layer is gone (JPEG on flat artwork), the coarse layer again with its blocks weighted
		// by how much of it they carry (weighted.go): JPEG leaves it in patches, where a fill sits near a boundary
		// of the DC quantiser. Its pilot z-score is biased by the weighting, so the attempt keeps the unweighted one.
		if acc := c.layout.weightedFold(s.whitened(coarse.synced)); acc != nil {
			sw := c.layout.demod(acc)
			if keep(attempt{coded: sw.llr, res: s.decode(sw.llr), pilotZ: coarse.pilotZ, valid: true, geom: coarse.geom,
				synced: coarse.synced}) {
				return best
			}
		}
	}
	expected := []float64{waxelSize(w, h)}
	if sh := min(w, h); sh < 1024 {
		expected = append(expected, float64(sh)/512)
	}
	// Each lattice candidate at its estimated scale first; if none decodes, the scale scan's candidate, if its
	// pilot stayed below probeBelow, again at the scales of latticeScaleProbes (tryScaled). That costs four folds
	// and so is left to the images the first pass did not read (the unmarked ones pay it), and to the one
	// candidate whose period no prior predicts: a ring candidate's period is exact when the image was only
	// rotated, and the peak pairs' periods agree with the scan's when the mark is there.
	cands, scan := latticeCandidates(pyramidOf(), latticeHypotheses, expected)
	var fine attempt // the lattice attempt with the strongest pilot that did not decode
	lattice := func(a affine, scales []float64) (attempt, bool) {
		at := c.tryScaled(s, a, scales)
		if keep(at) {
			return at, true
		}
		if at.valid && (!fine.valid || at.pilotZ > fine.pilotZ) {
			fine = at
		}
		return at, false
	}
	// The coarse layer at four times the waxel of the strongest lattice attempt that did not decode, alone then
	// summed with it (the rescaled-and-cropped flat artwork of a screenshot, where JPEG left too little of the
	// fine layer but the lattice search found its geometry from it; the coarse period, four tiles, is beyond the
	// lattice's lags). The embedder's coarse grid is its fine grid with waxel coordinates scaled by the factor,
	// same anchor; the pilot search finds the coarse tile's own offset and orientation.
	var followed affine
	coarseFollow := func() bool {
		if !fine.valid || fine.geom == followed {
			return false
		}
		followed = fine.geom
		cm := fine.geom
		for i := range cm.m {
			cm.m[i] *= coarseFactor
		}
		lc := c.tryGeometry(s, cm)
		if keep(lc) {
			return true
		}
		if !lc.valid {
			return false
		}
		sum := make([]float64, len(fine.coded))
		for i := range sum {
			sum[i] = fine.coded[i] + lc.coded[i]
		}
		return keep(attempt{coded: sum, res: s.decode(sum), pilotZ: max(fine.pilotZ, lc.pilotZ), valid: true})
	}
	probe := false
	for i, a := range cands {
		at, ok := lattice(a, []float64{0})
		if ok {
			return best
		}
		probe = probe || (i == scan && at.pilotZ < probeBelow)
	}
	if coarseFollow() {
		return best
	}
	if probe {
		if _, ok := lattice(cands[scan], latticeScaleProbes[:]); ok {
			return best
		}
	}
	coarseFollow()
	return best
}

// tryGeometry folds the image under the waxel map a0, finds flip/rotation and offset from the pilot, refines the
// map on per-tile pilot offsets, then demodulates and decodes once.
func (c *Codec) tryGeometry(s sampler, a0 affine) attempt {
	return c.tryScaled(s, a0, []float64{0})
}

// tryScaled is tryGeometry on the strongest pilot among a0 rescaled about its anchor by each factor 1+f of
// scales. The lattice estimate of a rescaled image can be off by half a percent (JPEG's block grid and the
// resampling's own periodicity bias the autocorrelation peaks), which smears the fold by a few waxels across the
// image; the pilot itself tells which scale is right. Only one decode follows whatever the number of scales.
func (c *Codec) tryScaled(s sampler, a0 affine, scales []float64) attempt {
	var al alignment
	var geom affine
	found := false
	for _, f := range scales {
		a := a0
		for i := range a.m {
			a.m[i] *= 1 + f
		}
		if a.waxel() < minWaxel {
			continue // finer than the pixels can carry; also keeps the sampled grid small
		}
		acc, ok := s.folded(a)
		if !ok {
			continue
		}
		if alp := s.align(acc); !found || alp.z > al.z {
			al, geom, found = alp, a, true
		}
	}
	if !found {
		return attempt{}
	}
	if al.z < pilotGate {
		return attempt{pilotZ: al.z, geom: geom}
	}
	a := al.aligned(geom)
	// A second, finer pass only when the first one moved some block by more than a third of a waxel: the original
	// geometry (re-encoded, cropped, flipped images) needs none, which saves a fold.
	b, scores := s.refineScores(a, 2)
	a, shift := c.refineOn(b, scores, a, 2)
	if shift > 0.33 {
		b, scores = s.refineScores(a, 1)
		a, _ = c.refineOn(b, scores, a, 1)
	}
	acc, ok := s.folded(a)
	if !ok {
		return attempt{}
	}
	sw := c.layout.demod(acc)
	return attempt{coded: sw.llr, res: s.decode(sw.llr), pilotZ: sw.pilotZ, valid: true, geom: geom, synced: a}
}

func emptyDetection() Detection {
	return Detection{Units: []Unit{{Index: 0}}}
}

func (at attempt) detection() Detection {
	if !at.valid {
		return emptyDetection()
	}
	d := Detection{Confidence: at.res.confidence, Soft: append([]float64(nil), at.res.infoLLR[:idBits]...),
		coded: append([]float64(nil), at.coded...)}
	if at.res.ok {
		d.Watermarked = true
		s := at.res.id.String()
		d.WatermarkID = &s
	}
	d.Units = []Unit{{Index: 0, Watermarked: d.Watermarked, Confidence: d.Confidence, WatermarkID: d.WatermarkID}}
	return d
}
