package codec

import (
	"context"
	"errors"
	"fmt"
	"image"
	"math"

	"filigrane/codec/accel"
)

// ErrDevice wraps every failure of the device in EmbedOn and DetectOn (as opposed to the codec refusing the
// image): the work can run on the CPU instead.
var ErrDevice = errors.New("codec: device failed")

// EmbedOn is Embed with its per-pixel passes (luma, block statistics, mark energy, the informed-embedding folds,
// and the application of the mark) on a device; every decision stays here, so the result is the CPU path's mark
// (the same pixels but for the rare rounding of a gain computed from sums added in another order). Images with
// more than 8 bits per channel are embedded on the CPU. A device error is returned as it is: the caller decides
// whether to run the CPU path instead.
func (c *Codec) EmbedOn(ctx context.Context, dev accel.Device, img image.Image, id ID, opt EmbedOptions) (image.Image, EmbedReport, error) {
	if img == nil {
		return nil, EmbedReport{}, errors.New("codec: nil image")
	}
	if isDeep(img) {
		return c.Embed(img, id, opt)
	}
	strength, floor, err := opt.resolve()
	if err != nil {
		return nil, EmbedReport{}, err
	}
	b := img.Bounds()
	w, h := b.Dx(), b.Dy()
	if min(w, h) < MinEmbedSide {
		return nil, EmbedReport{}, fmt.Errorf("%w: %dx%d, the short side must be at least %d pixels", ErrTooSmall, w, h,
			MinEmbedSide)
	}
	pr := profileImage
	if opt.profile != nil {
		pr = *opt.profile
	}
	src, ok := img.(*image.NRGBA)
	if !ok {
		src = toNRGBA(img)
	}
	s, err := dev.Load(ctx, accel.Image{Pix: src.Pix[src.PixOffset(b.Min.X, b.Min.Y):], Width: w, Height: h,
		Stride: src.Stride, Format: accel.NRGBA8})
	if err != nil {
		return nil, EmbedReport{}, fmt.Errorf("%w: load: %w", ErrDevice, err)
	}
	defer s.Close()

	ws := waxelSize(w, h)
	m := newMaskGrid(w, h, ws)
	act, bg, err := s.BlockStats(ctx, m.bs, m.w, m.h)
	if err != nil {
		return nil, EmbedReport{}, fmt.Errorf("%w: block statistics: %w", ErrDevice, err)
	}
	m.finish(plane{pix: act, w: m.w, h: m.h}, plane{pix: bg, w: m.w, h: m.h}, strength, pr)
	coded := convEncode(frameBits(id))
	r := newRenderer(m, w, h, ws, c.layout.tilePattern(coded, nil))
	energy := func() (float64, error) {
		if err := s.SetMark(ctx, r.plan()); err != nil {
			return 0, fmt.Errorf("%w: mark plan: %w", ErrDevice, err)
		}
		rows, err := s.MarkEnergy(ctx)
		if err != nil {
			return 0, fmt.Errorf("%w: mark energy: %w", ErrDevice, err)
		}
		var sum float64
		for _, v := range rows {
			sum += v
		}
		e := sum / float64(w*len(rows))
		if e <= 0 {
			return 0, errors.New("codec: image cannot carry a mark (zero masking energy)")
		}
		return e, nil
	}
	limit := floorMSE(floor)
	e, err := energy()
	if err != nil {
		return nil, EmbedReport{}, err
	}
	gain := float32(1)
	if float64(gain)*float64(gain)*e > limit {
		gain = float32(math.Sqrt(limit / e))
	}
	if !opt.Uninformed && w*h <= informedMaxPixels {
		nominal := nominalAffine(w, h)
		levels := len(pyramidDims(w, h, 16))
		fold := func(g float32) ([]float64, error) {
			if err := s.Analyse(ctx, g, levels); err != nil {
				return nil, err
			}
			gm, _ := gridMapFor(pyramidDims(w, h, 16), nominal)
			res, err := s.Grid(ctx, gm.plan(), false)
			if err != nil {
				return nil, err
			}
			return c.layout.bitSums(res.Acc), nil
		}
		host, err := fold(0)
		if err != nil {
			return nil, EmbedReport{}, fmt.Errorf("%w: fold: %w", ErrDevice, err)
		}
		withMark, err := fold(gain)
		if err != nil {
			return nil, EmbedReport{}, fmt.Errorf("%w: fold: %w", ErrDevice, err)
		}
		r.tile = c.layout.tilePattern(coded, solveInformed(host, withMark, coded))
		if e, err = energy(); err != nil {
			return nil, EmbedReport{}, err
		}
		if float64(gain)*float64(gain)*e > limit {
			gain = float32(math.Sqrt(limit / e))
		}
	}
	var applyErr error
	apply := func(g float32) float64 {
		rows, err := s.Apply(ctx, g)
		if err != nil {
			applyErr = err
			return 0 // ends correctGain's loop
		}
		var sse float64
		for _, v := range rows {
			sse += float64(v)
		}
		return sse / float64(3*w*h)
	}
	psnr, g := correctGain(apply, gain, floor)
	if applyErr != nil {
		return nil, EmbedReport{}, fmt.Errorf("%w: apply: %w", ErrDevice, applyErr)
	}
	dst := image.NewNRGBA(src.Rect)
	if err := s.Read(ctx, dst.Pix, dst.Stride); err != nil {
		return nil, EmbedReport{}, fmt.Errorf("%w: read: %w", ErrDevice, err)
	}
	return dst, EmbedReport{PSNR: psnr, Strength: strength * float64(g)}, nil
}

// plan is the renderer's mark as a device plan (accel.MarkPlan): the per-row geometry comes from the same
// functions row uses.
func (r *renderer) plan() *accel.MarkPlan {
	m := r.mask
	p := &accel.MarkPlan{Width: r.w, Height: r.h, Cap: markCap, TileSide: tileSide,
		Tile: r.tile, Col0: r.xi0, Col1: r.xi1, ColF: r.xf,
		Mask: m.v, MCol0: r.mx0, MCol1: r.mx1, MColF: r.mf,
		Row0: make([]int32, r.h), Row1: make([]int32, r.h), RowF: make([]float32, r.h),
		MRow0: make([]int32, r.h), MRow1: make([]int32, r.h), MRowF: make([]float32, r.h),
	}
	for y := 0; y < r.h; y++ {
		o0, o1, fy := tileRow(y, r.ws)
		p.Row0[y], p.Row1[y], p.RowF[y] = int32(o0), int32(o1), fy
		o0, o1, fy = m.rowGeom(y)
		p.MRow0[y], p.MRow1[y], p.MRowF[y] = int32(o0), int32(o1), fy
	}
	if m.c == nil {
		return p
	}
	p.CoarseTile, p.Coarse, p.CCol0, p.CCol1, p.CColF = r.ctile, m.c, r.cx0, r.cx1, r.cxf
	p.CRow0, p.CRow1, p.CRowF, p.CRowOn = make([]int32, r.h), make([]int32, r.h), make([]float32, r.h), make([]uint8, r.h)
	for y := 0; y < r.h; y++ {
		o0, o1, fy := r.coarseRowGeom(y)
		p.CRow0[y], p.CRow1[y], p.CRowF[y] = int32(o0), int32(o1), fy
		if m.coarseRow(y) {
			p.CRowOn[y] = 1
		}
	}
	return p
}

// plan is the grid map as a device plan (accel.GridPlan).
func (gm gridMap) plan() *accel.GridPlan {
	p := &accel.GridPlan{Level: gm.level, M: gm.la.m, TX: gm.la.tx, TY: gm.la.ty, QX0: gm.qx0, QY0: gm.qy0,
		W: gm.w, H: gm.h, TileSide: tileSide, Start: make([]float64, 2*gm.h)}
	for j := 0; j < gm.h; j++ {
		p.Start[2*j], p.Start[2*j+1] = gm.rowStart(j)
	}
	return p
}

// DeviceDetectMaxPixels is the most pixels of an image DetectOn loads onto a device; larger images are analysed
// on the CPU.
const DeviceDetectMaxPixels = detectMaxPixels

// DetectOn is Detect with the per-pixel passes (luma, pyramid, sampling, whitening, folding, the pilot search) on
// a device, and, when its Surface offers them, the refinement's block scores (accel.BlockScorer: the whitened grid
// is then never downloaded) and the trellis of the soft decoder (accel.ConvDecoder); the refinement fit, the frame
// check and the list decoder stay here. Both optional passes give the CPU's values exactly, so the result is the
// same with or without them. The lattice estimation of rotated or rescaled images needs the host pyramid and is computed here
// when it is reached (unmarked images reach it); its hypotheses are then tried on the device. Images of more than
// 8 bits per channel or above the reduced-analysis size, and image types without a device format, are analysed
// on the CPU. A device error is returned: the caller decides whether to run Detect instead.
func (c *Codec) DetectOn(ctx context.Context, dev accel.Device, img image.Image) (Detection, error) {
	if img == nil || img.Bounds().Empty() {
		return emptyDetection(), nil
	}
	b := img.Bounds()
	w, h := b.Dx(), b.Dy()
	var in accel.Image
	switch m := img.(type) {
	case *image.NRGBA:
		in = accel.Image{Pix: m.Pix[m.PixOffset(b.Min.X, b.Min.Y):], Stride: m.Stride, Format: accel.NRGBA8}
	case *image.RGBA: // lumaRow reads premultiplied values with the same weights
		in = accel.Image{Pix: m.Pix[m.PixOffset(b.Min.X, b.Min.Y):], Stride: m.Stride, Format: accel.NRGBA8}
	case *image.Gray:
		in = accel.Image{Pix: m.Pix[m.PixOffset(b.Min.X, b.Min.Y):], Stride: m.Stride, Format: accel.Gray8}
	case *image.YCbCr:
		in = accel.Image{Pix: m.Y[m.YOffset(b.Min.X, b.Min.Y):], Stride: m.YStride, Format: accel.Gray8}
	default:
		return c.Detect(img), nil
	}
	if w*h > detectMaxPixels {
		return c.Detect(img), nil
	}
	if min(w, h) < minDetectSide {
		return emptyDetection(), nil
	}
	in.Width, in.Height = w, h
	s, err := dev.Load(ctx, in)
	if err != nil {
		return Detection{}, fmt.Errorf("%w: load: %w", ErrDevice, err)
	}
	defer s.Close()
	dims := pyramidDims(w, h, 16)
	if err := s.Analyse(ctx, 0, len(dims)); err != nil {
		return Detection{}, fmt.Errorf("%w: pyramid: %w", ErrDevice, err)
	}
	ds := &deviceSampler{ctx: ctx, c: c, s: s, dims: dims}
	at := c.searchAttempts(w, h, ds, func() pyramid { return buildPyramid(lumaOf(img), 16) })
	if ds.err != nil {
		return Detection{}, ds.err
	}
	return at.detection(), nil
}

// deviceSampler is a sampler on a device Surface. The first device error is kept in err and every later call
// returns an empty grid, so the search ends quickly and DetectOn reports the error.
type deviceSampler struct {
	ctx  context.Context
	c    *Codec
	s    accel.Surface
	dims [][2]int
	err  error
}

func (d *deviceSampler) grid(a affine, cells bool) *accel.GridResult {
	if d.err != nil {
		return nil
	}
	gm, ok := gridMapFor(d.dims, a)
	if !ok {
		return nil
	}
	res, err := d.s.Grid(d.ctx, gm.plan(), cells)
	if err != nil {
		d.err = fmt.Errorf("%w: grid: %w", ErrDevice, err)
		return nil
	}
	return res
}

func (d *deviceSampler) whitened(a affine) waxelGrid {
	gm, ok := gridMapFor(d.dims, a)
	if !ok {
		return waxelGrid{}
	}
	res := d.grid(a, true)
	if res == nil || gm.w < 3 || gm.h < 3 {
		return waxelGrid{}
	}
	return waxelGrid{qx0: gm.qx0, qy0: gm.qy0, w: gm.w, h: gm.h, val: res.Val, ok: res.OK}
}

func (d *deviceSampler) folded(a affine) ([]float64, bool) {
	res := d.grid(a, false)
	if res == nil {
		return nil, false
	}
	return res.Acc, true
}

func (d *deviceSampler) align(acc []float64) alignment {
	norm, ok := d.c.pilotNorm(acc)
	if !ok || d.err != nil {
		return alignment{}
	}
	peaks, err := d.s.PilotPeaks(d.ctx, d.c.pilotPlan, norm)
	if err != nil {
		d.err = fmt.Errorf("%w: pilot search: %w", ErrDevice, err)
		return alignment{}
	}
	return alignmentOf(peaks)
}

// refineScores takes the block scores from the device when it offers them (accel.BlockScorer: the whitened grid
// stays there), else from the downloaded whitened grid.
func (d *deviceSampler) refineScores(a affine, radius int) (refineBlocks, []float64) {
	bs, ok := d.s.(accel.BlockScorer)
	if !ok {
		return d.c.layout.refineScoresOf(d.whitened(a), radius)
	}
	gm, ok := gridMapFor(d.dims, a)
	if !ok || gm.w < 3 || gm.h < 3 || d.grid(a, false) == nil {
		return refineBlocks{}, nil // what whitened gives: no refinement
	}
	scores, err := bs.BlockScores(d.ctx, d.c.pilotPlan, radius)
	b := newRefineBlocks(gm.qx0, gm.qy0, gm.w, gm.h)
	if side := 2*radius + 1; err == nil && len(scores) != b.nx*b.ny*(2+side*side) {
		err = fmt.Errorf("%d values for %d blocks of radius %d", len(scores), b.nx*b.ny, radius)
	}
	if err != nil {
		d.err = fmt.Errorf("%w: refinement scores: %w", ErrDevice, err)
		return refineBlocks{}, nil
	}
	return b, scores
}

// decode runs the trellis on the device when it offers one (accel.ConvDecoder) and the word is one the device
// decodes as the host does (finite LLRs, far from overflowing a metric); the frame check and the rare list
// decoding stay here.
func (d *deviceSampler) decode(llr []float64) decodeResult {
	dec, ok := d.s.(accel.ConvDecoder)
	if !ok || d.err != nil || !deviceDecodable(llr) {
		return decodeSoft(llr)
	}
	info, err := dec.ConvDecode(d.ctx, accel.ConvPlan{K: convK, Generators: convGenerators, Wrap: convWrap}, llr)
	if err == nil && len(info) != len(llr)/3 {
		err = fmt.Errorf("%d info LLRs for %d coded bits", len(info), len(llr))
	}
	if err != nil {
		d.err = fmt.Errorf("%w: decode: %w", ErrDevice, err)
		return decodeSoft(llr) // a result for the search to end on; DetectOn reports the error
	}
	return decodeInfo(llr, info)
}

// deviceDecodable: the device's trellis equals convDecode's for words of whole info bits whose LLRs are finite
// and small enough that no path metric (a sum of at most 3·(n+2·convWrap) halves) overflows; a NaN or an
// infinity orders maxima differently on the two (see accel.ConvDecoder).
func deviceDecodable(llr []float64) bool {
	if len(llr) == 0 || len(llr)%3 != 0 {
		return false
	}
	for _, v := range llr {
		if !(math.Abs(v) < 1e300) {
			return false
		}
	}
	return true
}

// newPilotPlan lists the pilot's chips and the dihedral index tables, once per codec.
func (l *layout) newPilotPlan() *accel.PilotPlan {
	p := &accel.PilotPlan{TileSide: tileSide}
	for u, v := range l.pilot {
		if v != 0 {
			p.Pilot = append(p.Pilot, int32(u))
			p.Sign = append(p.Sign, v)
		}
	}
	for d := range dihedral {
		p.Index[d] = dihedralIndex(d)
	}
	return p
}
