package codec

import (
	"image"

	"filigrane/codec/accel"
)

// DeviceProbe is what a detection on the CPU asked of the passes a device may take over (accel.Surface's Grid,
// accel.BlockScorer, accel.ConvDecoder), with the CPU's answers, in the order asked. It exists to check a device's
// implementation of those passes against the codec on real detections (gpu/cudacodec's host harness and device
// tests); the service never uses it.
type DeviceProbe struct {
	Pilot   *accel.PilotPlan // the codec's pilot, as BlockScores takes it
	Conv    accel.ConvPlan   // the codec's convolutional code, as ConvDecode takes it
	Pyramid []ProbePlane     // the luma pyramid the grids sample (a GridPlan's Level indexes it)
	Grids   []GridProbe
	Blocks  []BlockScoresProbe
	Decodes []DecodeProbe
}

// ProbePlane is one level of the detection's luma pyramid: W×H float32 values, row-major. Pix is the codec's own
// plane: read it, do not change it.
type ProbePlane struct {
	W, H int
	Pix  []float32
}

// GridProbe is one sampled, whitened and folded grid (accel.Surface's Grid): the plan, the whitened grid (Val,
// OK: Plan.W×Plan.H, row-major) and its fold (Plan.TileSide² sums, accel.GridResult's Acc), as the codec
// computed them from the probe's Pyramid.
type GridProbe struct {
	Plan *accel.GridPlan
	Val  []float32
	OK   []bool
	Acc  []float64
}

// BlockScoresProbe is one refinement measurement: the whitened grid that a device's Grid call with Plan leaves
// (Val, OK: Plan.W×Plan.H, row-major), the radius searched, and the codec's block scores of it (the
// accel.BlockScorer layout).
type BlockScoresProbe struct {
	Plan   *accel.GridPlan
	Val    []float32
	OK     []bool
	Radius int
	Scores []float64
}

// DecodeProbe is one soft word's coded-bit LLRs and the codec's info-bit LLRs for it (accel.ConvDecoder).
type DecodeProbe struct {
	LLR, Info []float64
}

// ProbeDetect detects as Detect does on img's luma (at full resolution: img must not be above the reduced-analysis
// size) and records the inputs and outputs of every block-scoring and decoding step on the way. When the search
// scored or decoded nothing (an unmarked image: no hypothesis passed the pilot gate) it records, after the
// search, the nominal geometry's block scores (radius 2) and the decoding of its soft word, as refinement and
// decoding would have computed them, so that a device is checked on a grid and a word without a mark too.
func (c *Codec) ProbeDetect(img image.Image) (Detection, DeviceProbe) {
	pr := DeviceProbe{Pilot: c.pilotPlan, Conv: accel.ConvPlan{K: convK, Generators: convGenerators, Wrap: convWrap}}
	s, ok := c.probeSamplerOf(img, &pr)
	if !ok {
		return emptyDetection(), pr
	}
	det := c.searchAttempts(s.pyr[0].w, s.pyr[0].h, s, func() pyramid { return s.pyr }).detection()
	s.probeNominal(len(pr.Blocks) == 0, len(pr.Decodes) == 0)
	return det, pr
}

// ProbeNominal records, without searching, what ProbeDetect records for an image whose search scored and decoded
// nothing: the nominal geometry's block scores (radius 2) and the decoding of its soft word, as refinement and
// decoding would compute them there. It gives a device check a grid and a word of any image (an unmarked one's
// values have another spread than a mark's) for a fraction of a detection's cost (an unmarked image's search
// tries every geometry).
func (c *Codec) ProbeNominal(img image.Image) DeviceProbe {
	pr := DeviceProbe{Pilot: c.pilotPlan, Conv: accel.ConvPlan{K: convK, Generators: convGenerators, Wrap: convWrap}}
	if s, ok := c.probeSamplerOf(img, &pr); ok {
		s.probeNominal(true, true)
	}
	return pr
}

// probeSamplerOf is a recording sampler of img's luma pyramid, or false for an image too small to detect in.
func (c *Codec) probeSamplerOf(img image.Image, pr *DeviceProbe) (probeSampler, bool) {
	if img == nil || img.Bounds().Empty() {
		return probeSampler{}, false
	}
	y := lumaOf(img)
	if min(y.w, y.h) < minDetectSide {
		return probeSampler{}, false
	}
	pyr := buildPyramid(y, 16)
	for _, p := range pyr {
		pr.Pyramid = append(pr.Pyramid, ProbePlane{W: p.w, H: p.h, Pix: p.pix})
	}
	return probeSampler{cpuSampler: cpuSampler{c: c, pyr: pyr}, pr: pr}, true
}

// probeNominal records the nominal geometry's block scores (when scores) and soft word's decoding (when decode).
func (s probeSampler) probeNominal(scores, decode bool) {
	nominal := nominalAffine(s.pyr[0].w, s.pyr[0].h)
	if scores {
		s.refineScores(nominal, 2)
	}
	if !decode {
		return
	}
	if acc, ok := s.folded(nominal); ok {
		s.decode(s.c.layout.demod(acc).llr)
	}
}

// probeSampler is the CPU's sampler, recording its block scores and decodes.
type probeSampler struct {
	cpuSampler
	pr *DeviceProbe
}

func (s probeSampler) folded(a affine) ([]float64, bool) {
	g := s.whitened(a)
	if g.w == 0 {
		return nil, false
	}
	acc, _ := fold(g)
	s.recordGrid(a, g, acc)
	return acc, true
}

func (s probeSampler) refineScores(a affine, radius int) (refineBlocks, []float64) {
	g := s.whitened(a)
	b, scores := s.c.layout.refineScoresOf(g, radius)
	if gm, ok := gridMapFor(s.pyr.dims(), a); ok && scores != nil {
		s.pr.Blocks = append(s.pr.Blocks, BlockScoresProbe{Plan: gm.plan(), Val: g.val, OK: g.ok, Radius: radius,
			Scores: scores})
	}
	if g.w != 0 {
		acc, _ := fold(g) // a device's Grid call folds every grid it whitens
		s.recordGrid(a, g, acc)
	}
	return b, scores
}

// recordGrid records the whitened grid g of geometry a and its fold acc.
func (s probeSampler) recordGrid(a affine, g waxelGrid, acc []float64) {
	if gm, ok := gridMapFor(s.pyr.dims(), a); ok {
		s.pr.Grids = append(s.pr.Grids, GridProbe{Plan: gm.plan(), Val: g.val, OK: g.ok, Acc: acc})
	}
}

func (s probeSampler) decode(llr []float64) decodeResult {
	r := decodeSoft(llr)
	s.pr.Decodes = append(s.pr.Decodes, DecodeProbe{LLR: append([]float64(nil), llr...), Info: r.infoLLR})
	return r
}

// ConvDecodeReference is the codec's trellis decoder (the circular max-log BCJR that accel.ConvDecoder defines):
// the info-bit LLRs of a soft word of coded-bit LLRs, for checking a device's decoder on words of one's choice.
func ConvDecodeReference(llr []float64) []float64 { return convDecode(llr) }

// PilotPeaksReference is the codec's reduction of pilot correlation sums on a tile of the given side to each
// transform's peak of sums/norm (accel.PilotPeak), for checking a device's PilotPeaks on sums it computed.
func PilotPeaksReference(sums [8][]float64, side int, norm float64) [8]accel.PilotPeak {
	return pilotPeaks(sums, side, norm)
}

// BlockScoresReference is the codec's block scores (the accel.BlockScorer layout) of a whitened grid of the plan's
// extent at any radius, for checking a device's scorer on radii a detection did not ask for.
func (c *Codec) BlockScoresReference(p *accel.GridPlan, val []float32, ok []bool, radius int) []float64 {
	return c.layout.blockScores(waxelGrid{qx0: p.QX0, qy0: p.QY0, w: p.W, h: p.H, val: val, ok: ok}, radius)
}
