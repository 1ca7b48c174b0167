package cudacodec

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"time"
	"unsafe"

	"filigrane/codec/accel"
	"filigrane/gpu/cuda"
)

// surface is one loaded image (accel.Surface). Its arena is carved into fixed regions at Load (layout); the
// waxel grid's scratch is a second allocation grown to the largest grid asked for.
type surface struct {
	d      *Device
	a      *arena
	base   cuda.DevicePtr
	w, h   int
	bpp    int
	format accel.Format

	offPix, offOut, offLuma, offAct, offBg, offPlan, offRows, offAcc, offAccD, offSums, offPeaks, offConv int
	levels                                                                                                []level
	planBytes, size                                                                                       int

	hasPlan  bool
	staged   bool            // an upload's transfers may still be reading the pinned buffer (upload)
	gridLast *accel.GridPlan // the plan of the last Grid call (PilotPeaks reads its accumulator)
	gridRegs gridRegions     // where that call's whitened grid is (BlockScores reads it)
}

// The optional detector passes a detectSurface offers (codec.DetectOn looks them up on the accel.Surface).
var (
	_ accel.BlockScorer = detectSurface{}
	_ accel.ConvDecoder = detectSurface{}
)

type level struct {
	off  int
	w, h int
}

func (s *surface) at(off int) cuda.DevicePtr { return s.base + cuda.DevicePtr(off) }

// layout carves the arena: pixels, output copy, luma, the analysis pyramid, block statistics, the mark plan,
// row sums, the tile accumulator, its eight dihedral transforms, the pilot sums, their peaks and the trellis
// decoder's memory.
func (s *surface) layout() {
	w, h := s.w, s.h
	off := 0
	take := func(n int) int {
		o := off
		off += roundUp(max(n, 1))
		return o
	}
	s.offPix = take(w * h * s.bpp)
	if s.format == accel.NRGBA8 {
		s.offOut = take(w * h * 4)
	}
	s.offLuma = take(w * h * 4)
	lw, lh := w, h
	for {
		s.levels = append(s.levels, level{off: take(lw * lh * 4), w: lw, h: lh})
		if min(lw, lh)/2 < 1 {
			break
		}
		lw, lh = lw/2, lh/2
	}
	blocks := ((w + 1) / 2) * ((h + 1) / 2) // blocks are at least 2×2 pixels
	s.offAct = take(blocks * 4)
	s.offBg = take(blocks * 4)
	s.planBytes = roundUp(planStructBytes) + 2*roundUp(tileMax*tileMax*4) + 2*roundUp(blocks*4) + 9*roundUp(w*4) +
		9*roundUp(h*4) + roundUp(h)
	s.offPlan = take(s.planBytes)
	s.offRows = take(h * 8)
	s.offAcc = take(tileMax * tileMax * 8)
	s.offAccD = take(8 * tileMax * tileMax * 8)
	s.offSums = take(8 * tileMax * tileMax * 8)
	s.offPeaks = take(8 * 6 * 8)
	s.offConv = take(convRegion)
	s.size = off
}

// planStructBytes is the size of the kernels' struct MarkPlan: 23 pointers, a float and an int.
const planStructBytes = 23*8 + 4 + 4

var block256 = cuda.Dim3{X: 256, Y: 1, Z: 1}

func blocksOf(n int) uint32 { return uint32((n + 255) / 256) }

// maxGridY is CUDA's bound on a launch's second grid dimension. The kernels launched a block row per image
// or grid row walk their rows with a stride of gridDim.y, so a taller plane (a 256x156250 PNG is within the
// pixel limit) runs in rowsOf(h) block rows instead of failing to launch (and falling back to the CPU).
const maxGridY = 65535

// rowsOf is the second grid dimension of a launch over h rows.
func rowsOf(h int) uint32 { return uint32(min(h, maxGridY)) }

// part is one host↔device copy of a batch.
type part struct {
	dev  cuda.DevicePtr
	host []byte
}

// upload copies the parts to the device through the pinned buffer (or synchronously when they do not fit). It
// does not wait for the transfers through the pinned buffer: what reads the data on the device (a kernel, a
// copy back) is queued after them on the same stream, and the host's next write to the buffer, the next upload,
// waits for them first (staged), while a download's wait covers them. A Grid or ConvDecode call so waits for the
// device once, not twice (a wait on a busy host is tens of microseconds: a wake-up, or a poll of the stream).
func (s *surface) upload(ctx context.Context, parts ...part) error {
	total := 0
	for _, p := range parts {
		total += roundUp(len(p.host))
	}
	hb := s.a.host.Bytes()
	if total > len(hb) {
		if err := s.a.stream.Synchronize(ctx); err != nil {
			return err
		}
		for _, p := range parts {
			if err := s.d.c.CopyToDevice(p.dev, p.host); err != nil {
				return err
			}
		}
		s.staged = false
		return nil
	}
	if s.staged {
		if err := s.a.stream.Synchronize(ctx); err != nil {
			return err
		}
		s.staged = false
	}
	off := 0
	s.staged = true
	for _, p := range parts {
		copyBytes(hb[off:], p.host)
		if err := s.d.c.CopyRangeToDeviceAsync(p.dev, s.a.host, off, len(p.host), s.a.stream); err != nil {
			return err
		}
		off += roundUp(len(p.host))
	}
	return nil
}

// download waits for the stream's work and copies the parts to the host.
func (s *surface) download(ctx context.Context, parts ...part) error {
	total := 0
	for _, p := range parts {
		total += roundUp(len(p.host))
	}
	hb := s.a.host.Bytes()
	if total > len(hb) {
		if err := s.a.stream.Synchronize(ctx); err != nil {
			return err
		}
		s.staged = false
		for _, p := range parts {
			if err := s.d.c.CopyFromDevice(p.host, p.dev); err != nil {
				return err
			}
		}
		return nil
	}
	off := 0
	for _, p := range parts {
		if err := s.d.c.CopyRangeFromDeviceAsync(s.a.host, off, len(p.host), p.dev, s.a.stream); err != nil {
			return err
		}
		off += roundUp(len(p.host))
	}
	if err := s.a.stream.Synchronize(ctx); err != nil {
		return err
	}
	s.staged = false
	off = 0
	for _, p := range parts {
		copyBytes(p.host, hb[off:off+len(p.host)])
		off += roundUp(len(p.host))
	}
	return nil
}

func (s *surface) BlockStats(ctx context.Context, bs, bw, bh int) (act, bg []float32, err error) {
	defer s.d.traced("BlockStats", s.d.begin("BlockStats"))
	if bs < 2 || bw != (s.w+bs-1)/bs || bh != (s.h+bs-1)/bs {
		return nil, nil, fmt.Errorf("cudacodec: block statistics: %dx%d blocks of %d do not tile a %dx%d image", bw,
			bh, bs, s.w, s.h)
	}
	n := bw * bh
	if err := s.d.k.blockStats.Launch(cuda.Dim3{X: blocksOf(n), Y: 1, Z: 1}, block256, 0, s.a.stream,
		s.at(s.offLuma), int32(s.w), int32(s.h), int32(bs), int32(bw), int32(bh), s.at(s.offAct), s.at(s.offBg)); err != nil {
		return nil, nil, fmt.Errorf("cudacodec: block statistics: %w", err)
	}
	act, bg = make([]float32, n), make([]float32, n)
	if err := s.download(ctx, part{s.at(s.offAct), bytesOf(act)}, part{s.at(s.offBg), bytesOf(bg)}); err != nil {
		return nil, nil, fmt.Errorf("cudacodec: block statistics: %w", err)
	}
	return act, bg, nil
}

func (s *surface) SetMark(ctx context.Context, p *accel.MarkPlan) error {
	defer s.d.traced("SetMark", s.d.begin("SetMark"))
	if err := s.checkPlan(p); err != nil {
		return err
	}
	off := s.offPlan + roundUp(planStructBytes)
	var parts []part
	var ptrs [23]cuda.DevicePtr
	add := func(i int, b []byte) {
		if b == nil {
			return
		}
		ptrs[i] = s.at(off)
		parts = append(parts, part{s.at(off), b})
		off += roundUp(len(b))
	}
	add(0, bytesOf(p.Tile))
	add(1, bytesOf(p.Col0))
	add(2, bytesOf(p.Col1))
	add(3, bytesOf(p.ColF))
	add(4, bytesOf(p.Row0))
	add(5, bytesOf(p.Row1))
	add(6, bytesOf(p.RowF))
	add(7, bytesOf(p.Mask))
	add(8, bytesOf(p.MCol0))
	add(9, bytesOf(p.MCol1))
	add(10, bytesOf(p.MColF))
	add(11, bytesOf(p.MRow0))
	add(12, bytesOf(p.MRow1))
	add(13, bytesOf(p.MRowF))
	coarse := p.CoarseTile != nil
	if coarse {
		add(14, bytesOf(p.CoarseTile))
		add(15, bytesOf(p.Coarse))
		add(16, bytesOf(p.CCol0))
		add(17, bytesOf(p.CCol1))
		add(18, bytesOf(p.CColF))
		add(19, bytesOf(p.CRow0))
		add(20, bytesOf(p.CRow1))
		add(21, bytesOf(p.CRowF))
		add(22, bytesOf(p.CRowOn))
	}
	if off > s.offPlan+s.planBytes {
		return fmt.Errorf("cudacodec: mark plan of %d bytes exceeds its %d-byte region", off-s.offPlan, s.planBytes)
	}
	st := make([]byte, 0, planStructBytes)
	for _, ptr := range ptrs {
		st = binary.LittleEndian.AppendUint64(st, uint64(ptr))
	}
	st = binary.LittleEndian.AppendUint32(st, math.Float32bits(p.Cap))
	hasCoarse := uint32(0)
	if coarse {
		hasCoarse = 1
	}
	st = binary.LittleEndian.AppendUint32(st, hasCoarse)
	parts = append(parts, part{s.at(s.offPlan), st})
	if err := s.upload(ctx, parts...); err != nil {
		return fmt.Errorf("cudacodec: mark plan: %w", err)
	}
	s.hasPlan = true
	return nil
}

// checkPlan refuses a plan whose arrays do not fit the image, so no kernel reads outside them.
func (s *surface) checkPlan(p *accel.MarkPlan) error {
	bad := func(what string) error { return fmt.Errorf("cudacodec: mark plan: %s", what) }
	if p.Width != s.w || p.Height != s.h {
		return bad(fmt.Sprintf("for %dx%d on a %dx%d image", p.Width, p.Height, s.w, s.h))
	}
	if p.TileSide <= 0 || p.TileSide > tileMax || len(p.Tile) != p.TileSide*p.TileSide {
		return bad("tile size")
	}
	tn, mn := int32(len(p.Tile)), int32(len(p.Mask))
	cols := func(a, b []int32, f []float32, limit int32) bool {
		if len(a) != s.w || len(b) != s.w || len(f) != s.w {
			return false
		}
		for i := range a {
			if a[i] < 0 || b[i] < 0 || a[i] >= limit || b[i] >= limit {
				return false
			}
		}
		return true
	}
	rows := func(a, b []int32, f []float32, rowLen, n int32) bool {
		if len(a) != s.h || len(b) != s.h || len(f) != s.h {
			return false
		}
		for i := range a {
			if a[i] < 0 || b[i] < 0 || a[i]+rowLen > n || b[i]+rowLen > n {
				return false
			}
		}
		return true
	}
	ts := int32(p.TileSide)
	if len(p.Mask) > ((s.w+1)/2)*((s.h+1)/2) || len(p.Mask) == 0 {
		return bad("mask size")
	}
	maskW := int32(0)
	for _, c := range p.MCol1 {
		maskW = max(maskW, c+1)
	}
	if !cols(p.Col0, p.Col1, p.ColF, ts) || !rows(p.Row0, p.Row1, p.RowF, ts, tn) ||
		!cols(p.MCol0, p.MCol1, p.MColF, max(maskW, 1)) || !rows(p.MRow0, p.MRow1, p.MRowF, maskW, mn) {
		return bad("column or row tables out of range")
	}
	if p.CoarseTile != nil {
		if len(p.CoarseTile) != len(p.Tile) || len(p.Coarse) != len(p.Mask) || len(p.CRowOn) != s.h ||
			!cols(p.CCol0, p.CCol1, p.CColF, ts) || !rows(p.CRow0, p.CRow1, p.CRowF, ts, tn) {
			return bad("coarse layer tables out of range")
		}
	}
	return nil
}

func (s *surface) MarkEnergy(ctx context.Context) ([]float64, error) {
	defer s.d.traced("MarkEnergy", s.d.begin("MarkEnergy"))
	if !s.hasPlan {
		return nil, fmt.Errorf("cudacodec: mark energy before SetMark")
	}
	n := (s.h + 3) / 4
	if err := s.d.k.markEnergy.Launch(cuda.Dim3{X: uint32(n), Y: 1, Z: 1}, block256, 0, s.a.stream,
		s.at(s.offPlan), int32(s.w), s.at(s.offRows)); err != nil {
		return nil, fmt.Errorf("cudacodec: mark energy: %w", err)
	}
	rows := make([]float64, n)
	if err := s.download(ctx, part{s.at(s.offRows), bytesOf(rows)}); err != nil {
		return nil, fmt.Errorf("cudacodec: mark energy: %w", err)
	}
	return rows, nil
}

func (s *surface) Analyse(ctx context.Context, gain float32, levels int) error {
	defer s.d.traced("Analyse", s.d.begin("Analyse"))
	if levels < 1 || levels > len(s.levels) {
		return fmt.Errorf("cudacodec: analyse: %d pyramid levels for a %dx%d image", levels, s.w, s.h)
	}
	l0 := s.levels[0]
	var err error
	if gain == 0 {
		err = s.d.k.copyRows.Launch(cuda.Dim3{X: blocksOf(s.w * 4), Y: rowsOf(s.h), Z: 1}, block256, 0, s.a.stream,
			s.at(s.offLuma), s.at(l0.off), int32(s.w*4), int32(s.h), int32(s.w*4))
	} else {
		if !s.hasPlan {
			return fmt.Errorf("cudacodec: analyse with a mark before SetMark")
		}
		err = s.d.k.markLuma.Launch(cuda.Dim3{X: blocksOf(s.w), Y: rowsOf(s.h), Z: 1}, block256, 0, s.a.stream,
			s.at(s.offPlan), s.at(s.offLuma), s.at(l0.off), int32(s.w), int32(s.h), gain)
	}
	for i := 1; i < levels && err == nil; i++ {
		src, dst := s.levels[i-1], s.levels[i]
		err = s.d.k.half.Launch(cuda.Dim3{X: blocksOf(dst.w), Y: rowsOf(dst.h), Z: 1}, block256, 0, s.a.stream,
			s.at(src.off), int32(src.w), s.at(dst.off), int32(dst.w), int32(dst.h))
	}
	if err != nil {
		return fmt.Errorf("cudacodec: analyse: %w", err)
	}
	return nil
}

// gridScratch returns the grid scratch regions for a W×H grid, growing the allocation when needed: sampled
// values and flags, residuals and their flags, squares, counts, the box filter's rows and prefix sums, the
// filtered squares and counts, the whitened values and flags, the row starts, and BlockScores' output (for
// the blocks of a side-waxel tile that a W×H grid can touch, at the largest radius).
type gridRegions struct {
	val, ok, res, rok, sq, cnt, tmp, prefix, msq, mcnt, wval, wok, start, scores cuda.DevicePtr
}

func (s *surface) gridScratch(w, h, side int) (gridRegions, error) {
	n := w * h
	blocks := (w/side + 2) * (h/side + 2)
	sizes := []int{4 * n, n, 4 * n, n, 4 * n, 4 * n, 4 * n, 8 * (n + h), 4 * n, 4 * n, 4 * n, n, 16 * h,
		8 * blocks * scoreStride(maxScoreRadius)}
	total := 0
	for _, z := range sizes {
		total += roundUp(z)
	}
	if total > s.a.gridCap {
		if s.a.grid != 0 {
			s.d.c.Free(s.a.grid)
			s.a.grid, s.a.gridCap = 0, 0
		}
		// Grown with headroom: the grids of one image differ in size from attempt to attempt, and each
		// cuMemFree waits for the whole device, every other job's stream included.
		total += total / 2
		p, err := s.d.c.Alloc(total)
		if err != nil {
			return gridRegions{}, err
		}
		s.a.grid, s.a.gridCap = p, total
	}
	var ptrs [14]cuda.DevicePtr
	off := 0
	for i, z := range sizes {
		ptrs[i] = s.a.grid + cuda.DevicePtr(off)
		off += roundUp(z)
	}
	return gridRegions{ptrs[0], ptrs[1], ptrs[2], ptrs[3], ptrs[4], ptrs[5], ptrs[6], ptrs[7], ptrs[8], ptrs[9],
		ptrs[10], ptrs[11], ptrs[12], ptrs[13]}, nil
}

// maxGridWaxels bounds a grid as the codec does (16M waxels).
const maxGridWaxels = 1 << 24

func (s *surface) Grid(ctx context.Context, g *accel.GridPlan, cells bool) (*accel.GridResult, error) {
	defer s.d.traced("Grid", s.d.begin("Grid"))
	if g.Level < 0 || g.Level >= len(s.levels) || g.W <= 0 || g.H <= 0 || g.W*g.H > maxGridWaxels ||
		len(g.Start) != 2*g.H || g.TileSide <= 0 || g.TileSide > tileMax {
		return nil, fmt.Errorf("cudacodec: grid: bad plan (level %d, %dx%d)", g.Level, g.W, g.H)
	}
	r, err := s.gridScratch(g.W, g.H, g.TileSide)
	if err != nil {
		return nil, fmt.Errorf("cudacodec: grid: %w", err)
	}
	phase := time.Now()
	if err := s.upload(ctx, part{r.start, bytesOf(g.Start)}); err != nil {
		return nil, fmt.Errorf("cudacodec: grid: %w", err)
	}
	s.d.traced("Grid.start", phase)
	lv := s.levels[g.Level]
	st := s.a.stream
	k := s.d.k
	n := g.W * g.H
	shape := gridGeometry(g.W, g.H, g.TileSide)
	launches := []func() error{
		func() error {
			return k.sample.Launch(shape[0].grid, shape[0].block, 0, st, s.at(lv.off), int32(lv.w), int32(lv.h), r.start,
				g.M[0], g.M[2], int32(g.W), int32(g.H), r.val, r.ok)
		},
		func() error {
			return k.residual.Launch(shape[1].grid, shape[1].block, 0, st, r.val, r.ok, int32(g.W), int32(g.H), r.res, r.rok,
				r.sq, r.cnt)
		},
		func() error {
			return k.boxRows.Launch(shape[2].grid, shape[2].block, 0, st, r.sq, r.tmp, r.prefix, int32(g.W), int32(g.H),
				int32(whitenRadius))
		},
		func() error {
			return k.boxCols.Launch(shape[3].grid, shape[3].block, 0, st, r.tmp, r.msq, int32(g.W), int32(g.H),
				int32(whitenRadius))
		},
		func() error {
			return k.boxRows.Launch(shape[4].grid, shape[4].block, 0, st, r.cnt, r.tmp, r.prefix, int32(g.W), int32(g.H),
				int32(whitenRadius))
		},
		func() error {
			return k.boxCols.Launch(shape[5].grid, shape[5].block, 0, st, r.tmp, r.mcnt, int32(g.W), int32(g.H),
				int32(whitenRadius))
		},
		func() error {
			return k.normalise.Launch(shape[6].grid, shape[6].block, 0, st, r.res, r.rok, r.msq, r.mcnt, int32(n), r.wval,
				r.wok)
		},
		func() error {
			return k.fold.Launch(shape[7].grid, shape[7].block, 0, st, r.wval, r.wok, int32(g.W), int32(g.H), int32(g.QX0),
				int32(g.QY0), int32(g.TileSide), s.at(s.offAcc))
		},
	}
	for i, l := range launches {
		// Tests: each kernel waited for and timed, to show which of a grid's passes take its time.
		if err := s.launchTimed(ctx, "Grid."+gridKernels[i], l); err != nil {
			return nil, fmt.Errorf("cudacodec: grid: %w", err)
		}
	}
	phase = time.Now()
	res := &accel.GridResult{Acc: make([]float64, g.TileSide*g.TileSide)}
	parts := []part{{s.at(s.offAcc), bytesOf(res.Acc)}}
	var ok []uint8
	if cells {
		res.Val = make([]float32, n)
		ok = make([]uint8, n)
		parts = append(parts, part{r.wval, bytesOf(res.Val)}, part{r.wok, ok})
	}
	if err := s.download(ctx, parts...); err != nil {
		return nil, fmt.Errorf("cudacodec: grid: %w", err)
	}
	if cells {
		res.OK = unsafe.Slice((*bool)(unsafe.Pointer(&ok[0])), n) // the kernel writes 0 or 1 only
	}
	s.d.traced("Grid.download", phase)
	s.gridLast, s.gridRegs = g, r
	return res, nil
}

// launchTimed runs launch, and in tests that trace kernels (Device.traceKernels) waits for the stream before and
// after it and traces the kernels' time as name (the waits add to the call's time).
func (s *surface) launchTimed(ctx context.Context, name string, launch func() error) error {
	if s.d.trace == nil || !s.d.traceKernels {
		return launch()
	}
	if err := s.a.stream.Synchronize(ctx); err != nil {
		return err
	}
	start := time.Now()
	if err := launch(); err != nil {
		return err
	}
	if err := s.a.stream.Synchronize(ctx); err != nil {
		return err
	}
	s.d.traced(name, start)
	return nil
}

// gridKernels names Grid's launches, in order, for the trace.
var gridKernels = [...]string{"sample", "residual", "boxRowsSq", "boxColsSq", "boxRowsCount", "boxColsCount",
	"normalise", "fold"}

// whitenRadius is the codec's whitening window radius (a 9×9 window).
const whitenRadius = 4

// The grid kernels' shapes, as kernelSource defines them: GRID_THREADS, BOXC_COLS and BOXC_MAXR.
const (
	gridThreads      = 128
	boxColsPerBlock  = 16
	boxColsMaxRadius = 8
)

// box_cols stages rows for a radius of at most BOXC_MAXR, and its threads from 32 on load them while warp 0 sums:
// a larger whitenRadius, or a block of one warp, fails to compile here.
const (
	_ = uint(boxColsMaxRadius - whitenRadius)
	_ = uint(gridThreads - 33)
)

// launchShape is a kernel launch's grid and block dimensions.
type launchShape struct{ grid, block cuda.Dim3 }

// gridGeometry is the launch shape of each of Grid's kernels (gridKernels' order) for a w×h grid of side-waxel
// tiles. sample_grid and box_rows run a block a grid row (a thread of it keeps the row's running sum, the others
// load and compute around it), box_cols a block a group of boxColsPerBlock columns, fold_tile a thread a tile
// waxel in blocks of 128 (a 128-waxel tile's 16 K threads on 128 blocks, not 64: more of a device's
// multiprocessors), the others a thread a waxel. TestDetectKernelsOnTheHost runs the kernels with these shapes.
func gridGeometry(w, h, side int) [len(gridKernels)]launchShape {
	return gridGeometryRows(w, h, side, maxGridY)
}

// gridGeometryRows is gridGeometry with at most maxY block rows in a launch's second dimension (the host test
// takes fewer, so that its grids walk their rows with the stride a grid taller than maxGridY does).
func gridGeometryRows(w, h, side, maxY int) [len(gridKernels)]launchShape {
	threads := cuda.Dim3{X: gridThreads, Y: 1, Z: 1}
	perRow := launchShape{cuda.Dim3{X: uint32(h), Y: 1, Z: 1}, threads}
	perCols := launchShape{cuda.Dim3{X: uint32((w + boxColsPerBlock - 1) / boxColsPerBlock), Y: 1, Z: 1}, threads}
	return [...]launchShape{
		perRow,
		{cuda.Dim3{X: blocksOf(w), Y: uint32(min(h, maxY)), Z: 1}, block256},
		perRow, perCols, perRow, perCols,
		{cuda.Dim3{X: blocksOf(w * h), Y: 1, Z: 1}, block256},
		{cuda.Dim3{X: uint32((side*side + gridThreads - 1) / gridThreads), Y: 1, Z: 1}, threads},
	}
}

// PilotPeaks is accel.Surface's: pilot_dihedral and pilot_sums correlate the accumulator with the pilot at every
// shift of every transform, and pilot_peaks reduces each transform's correlation to its peak, so 384 bytes come
// back instead of the 1 MiB of sums (and the host's 131,072 divisions and comparisons, ~0.5 ms, are not made).
func (s *surface) PilotPeaks(ctx context.Context, p *accel.PilotPlan, norm float64) ([8]accel.PilotPeak, error) {
	defer s.d.traced("PilotPeaks", s.d.begin("PilotPeaks"))
	var out [8]accel.PilotPeak
	if s.gridLast == nil || s.gridLast.TileSide != p.TileSide || len(p.Pilot) != len(p.Sign) {
		return out, fmt.Errorf("cudacodec: pilot peaks need a Grid of the same tile first")
	}
	if !(norm > 0) || math.IsInf(norm, 0) {
		return out, fmt.Errorf("cudacodec: pilot peaks: norm %v", norm)
	}
	n := p.TileSide * p.TileSide
	tables, err := s.d.pilotTables(p)
	if err != nil {
		return out, err
	}
	np := len(p.Pilot)
	signs := tables + cuda.DevicePtr(4*np)
	index := tables + cuda.DevicePtr(8*np)
	shape := cuda.Dim3{X: blocksOf(n), Y: 8, Z: 1}
	err = s.launchTimed(ctx, "PilotPeaks.kernel", func() error {
		err := s.d.k.pilotDihedral.Launch(shape, block256, 0, s.a.stream, s.at(s.offAcc), index, int32(n), s.at(s.offAccD))
		if err == nil {
			err = s.d.k.pilotSums.Launch(shape, block256, 0, s.a.stream, s.at(s.offAccD), tables, signs, int32(np),
				int32(p.TileSide), s.at(s.offSums))
		}
		if err == nil {
			err = s.d.k.pilotPeaks.Launch(cuda.Dim3{X: 8, Y: 1, Z: 1}, cuda.Dim3{X: peakThreads, Y: 1, Z: 1}, 0,
				s.a.stream, s.at(s.offSums), int32(p.TileSide), norm, s.at(s.offPeaks))
		}
		return err
	})
	if err != nil {
		return out, fmt.Errorf("cudacodec: pilot peaks: %w", err)
	}
	var v [8 * 6]float64
	if err := s.download(ctx, part{s.at(s.offPeaks), bytesOf(v[:])}); err != nil {
		return out, fmt.Errorf("cudacodec: pilot peaks: %w", err)
	}
	for d := range out {
		o := v[6*d:]
		k := int(o[0])
		if k < 0 || k >= n || float64(k) != o[0] {
			return out, fmt.Errorf("cudacodec: pilot peaks: index %v of transform %d", o[0], d)
		}
		out[d] = accel.PilotPeak{Index: k, Z: o[1], Left: o[2], Right: o[3], Up: o[4], Down: o[5]}
	}
	return out, nil
}

// peakThreads is pilot_peaks' block size (PEAK_THREADS).
const peakThreads = 256

// maxScoreRadius is the largest radius BlockScores takes: block_scores keeps (2r+1)²+1 sums (SCORE_MAX_SUMS).
const maxScoreRadius = 3

// scoreThreads is block_scores' block size: all compute a chunk's terms, those below SCORE_ADDERS (64) add them
// up (one a sum) while the others stage the next chunk.
const scoreThreads = 256

// scoreStride is the values per block of BlockScores at radius r.
func scoreStride(r int) int { return 2 + (2*r+1)*(2*r+1) }

// detectSurface is a surface of a Device whose detector passes loaded: it offers them as accel.BlockScorer and
// accel.ConvDecoder (a surface alone offers neither, so the codec computes both on the host).
type detectSurface struct{ *surface }

// BlockScores is accel.BlockScorer: the refinement's block scores of the whitened grid the last Grid call left in
// the grid scratch, one thread block a tile block.
func (s detectSurface) BlockScores(ctx context.Context, p *accel.PilotPlan, radius int) ([]float64, error) {
	defer s.d.traced("BlockScores", s.d.begin("BlockScores"))
	g := s.gridLast
	if g == nil || g.TileSide != p.TileSide || len(p.Pilot) != len(p.Sign) {
		return nil, fmt.Errorf("cudacodec: block scores need a Grid of the same tile first")
	}
	if radius < 0 || radius > maxScoreRadius {
		return nil, fmt.Errorf("cudacodec: block scores: radius %d outside 0..%d", radius, maxScoreRadius)
	}
	n := p.TileSide * p.TileSide
	tables, err := s.d.pilotTables(p)
	if err != nil {
		return nil, err
	}
	dense := tables + cuda.DevicePtr(8*len(p.Pilot)+4*8*n)
	side := g.TileSide
	bx0, by0 := floorDiv(g.QX0, side), floorDiv(g.QY0, side)
	nbx, nby := floorDiv(g.QX0+g.W-1, side)+1-bx0, floorDiv(g.QY0+g.H-1, side)+1-by0
	if err := s.launchTimed(ctx, "BlockScores.kernel", func() error {
		return s.d.k.blockScores.Launch(cuda.Dim3{X: uint32(nbx * nby), Y: 1, Z: 1}, cuda.Dim3{X: scoreThreads, Y: 1, Z: 1},
			0, s.a.stream, s.gridRegs.wval, s.gridRegs.wok, int32(g.W), int32(g.H), int32(g.QX0), int32(g.QY0),
			int32(bx0), int32(by0), int32(nbx), dense, int32(side), int32(radius), s.gridRegs.scores)
	}); err != nil {
		return nil, fmt.Errorf("cudacodec: block scores: %w", err)
	}
	out := make([]float64, nbx*nby*scoreStride(radius))
	if err := s.download(ctx, part{s.gridRegs.scores, bytesOf(out)}); err != nil {
		return nil, fmt.Errorf("cudacodec: block scores: %w", err)
	}
	return out, nil
}

// floorDiv is a/b rounded toward minus infinity (b > 0).
func floorDiv(a, b int) int {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

// convRegion is each surface's memory for ConvDecode: the coded LLRs, the info LLRs, the forward and the backward
// metrics (8 bytes a state a trellis step each: 0.66 MiB each for the codec's 256 states and 320 steps).
const convRegion = 2 << 20

// maxConvK bounds ConvDecode's constraint length: conv_decode runs a thread a state in one thread block.
const maxConvK = 11

// ConvDecode is accel.ConvDecoder: conv_decode's two recursions on a thread block of 2^(K-1) threads each, then
// conv_output.
func (s detectSurface) ConvDecode(ctx context.Context, p accel.ConvPlan, llr []float64) ([]float64, error) {
	defer s.d.traced("ConvDecode", s.d.begin("ConvDecode"))
	n := len(llr) / 3
	if p.K < 2 || p.K > maxConvK || p.Wrap < 0 || n == 0 || len(llr) != 3*n {
		return nil, fmt.Errorf("cudacodec: decode: K %d, wrap %d, %d LLRs", p.K, p.Wrap, len(llr))
	}
	states := 1 << (p.K - 1)
	offInfo := roundUp(8 * len(llr))
	rows := 8 * states * (n + 2*p.Wrap + 1) // the forward or the backward metrics
	offAlpha := offInfo + roundUp(8*n)
	offBeta := offAlpha + roundUp(rows)
	if offBeta+rows > convRegion {
		return nil, fmt.Errorf("cudacodec: decode: %d info bits with %d states and wrap %d exceed the decoder's memory",
			n, states, p.Wrap)
	}
	base := s.at(s.offConv)
	if err := s.upload(ctx, part{base, bytesOf(llr)}); err != nil {
		return nil, fmt.Errorf("cudacodec: decode: %w", err)
	}
	alpha, beta := base+cuda.DevicePtr(offAlpha), base+cuda.DevicePtr(offBeta)
	block := cuda.Dim3{X: uint32(states), Y: 1, Z: 1}
	g := p.Generators
	if err := s.launchTimed(ctx, "ConvDecode.kernel", func() error {
		// The two recursions at once (two blocks), then the output, a block an info bit.
		err := s.d.k.convDecode.Launch(cuda.Dim3{X: 2, Y: 1, Z: 1}, block, 0, s.a.stream, base, int32(n), int32(p.Wrap),
			int32(p.K), g[0], g[1], g[2], math.Inf(-1), alpha, beta)
		if err != nil {
			return err
		}
		return s.d.k.convOutput.Launch(cuda.Dim3{X: uint32(n), Y: 1, Z: 1}, block, 0, s.a.stream, base, int32(n),
			int32(p.Wrap), int32(p.K), g[0], g[1], g[2], math.Inf(-1), alpha, beta, base+cuda.DevicePtr(offInfo))
	}); err != nil {
		return nil, fmt.Errorf("cudacodec: decode: %w", err)
	}
	info := make([]float64, n)
	if err := s.download(ctx, part{base + cuda.DevicePtr(offInfo), bytesOf(info)}); err != nil {
		return nil, fmt.Errorf("cudacodec: decode: %w", err)
	}
	return info, nil
}

func (s *surface) Apply(ctx context.Context, gain float32) ([]int64, error) {
	defer s.d.traced("Apply", s.d.begin("Apply"))
	if s.format != accel.NRGBA8 || !s.hasPlan {
		return nil, fmt.Errorf("cudacodec: apply needs an NRGBA8 image and a mark plan")
	}
	if err := s.d.k.apply.Launch(cuda.Dim3{X: uint32(s.h), Y: 1, Z: 1}, block256, 0, s.a.stream, s.at(s.offPlan),
		s.at(s.offPix), s.at(s.offOut), int32(s.w), int32(s.w*4), gain, s.at(s.offRows)); err != nil {
		return nil, fmt.Errorf("cudacodec: apply: %w", err)
	}
	rows := make([]int64, s.h)
	if err := s.download(ctx, part{s.at(s.offRows), bytesOf(rows)}); err != nil {
		return nil, fmt.Errorf("cudacodec: apply: %w", err)
	}
	return rows, nil
}

func (s *surface) Read(ctx context.Context, dst []byte, stride int) error {
	defer s.d.traced("Read", s.d.begin("Read"))
	if s.format != accel.NRGBA8 {
		return fmt.Errorf("cudacodec: read needs an NRGBA8 image")
	}
	rowBytes := s.w * 4
	if stride < rowBytes || len(dst) < (s.h-1)*stride+rowBytes {
		return fmt.Errorf("cudacodec: read: %d bytes with stride %d cannot hold a %dx%d image", len(dst), stride, s.w, s.h)
	}
	if stride == rowBytes {
		if err := s.download(ctx, part{s.at(s.offOut), dst[:s.h*rowBytes]}); err != nil {
			return fmt.Errorf("cudacodec: read: %w", err)
		}
		return nil
	}
	buf := make([]byte, s.h*rowBytes)
	if err := s.download(ctx, part{s.at(s.offOut), buf}); err != nil {
		return fmt.Errorf("cudacodec: read: %w", err)
	}
	copyRows(dst, stride, buf, rowBytes, rowBytes, s.h)
	return nil
}

// Close waits for the surface's work and gives its memory back to the device's pool.
func (s *surface) Close() error {
	if s.a == nil {
		return nil
	}
	a := s.a
	s.a = nil
	if err := a.stream.Synchronize(context.Background()); err != nil {
		return fmt.Errorf("cudacodec: close: %w (memory freed)", errorsJoin(err, a.free(s.d.c)))
	}
	return s.d.giveArena(a)
}

func errorsJoin(a, b error) error {
	if b == nil {
		return a
	}
	return fmt.Errorf("%w; %w", a, b)
}
