// Package cudacodec runs the watermark codec's per-pixel passes on an NVIDIA GPU: it implements the
// codec/accel contract (Device, Surface) with CUDA kernels compiled at run time by NVRTC and launched through
// the driver bindings of gpu/cuda, with no cgo and no toolkit at build time.
//
// It owns the kernels (kernels.go; deflatekernels.go for PNG; detectkernels.go for the detector's optional
// passes, accel.BlockScorer and accel.ConvDecoder), their compilation and loading into one CUDA context, and each loaded image's
// device memory, pinned staging buffer and stream. Images on different Surfaces run on different streams, so
// several jobs share a device. It must not decide anything the codec decides (the codec drives every pass and
// keeps the results' meaning) nor own the context's lifetime (package gpu's Fleet opens and destroys it).
package cudacodec

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"filigrane/codec/accel"
	"filigrane/gpu/cuda"
)

// Device is the codec's kernels loaded in one CUDA context. It is safe for concurrent use: each Load gets its
// own memory and stream (pooled, so steady work allocates nothing).
type Device struct {
	c   *cuda.Context
	mod *cuda.Module
	// detectMod holds the detector's optional passes; nil when they did not compile or load (Load then returns
	// Surfaces without accel.BlockScorer and accel.ConvDecoder).
	detectMod *cuda.Module
	k         kernels
	compiler  string

	// trace, when set (tests and benchmarks), receives each Surface call's duration, work done and waited for;
	// traceStart, when set, is told of each call as it starts (TestPhaseTimes reads CPU clocks there);
	// traceKernels makes Grid and the detector's passes wait for each of their kernels and trace it
	// ("Grid.sample", ..., "PilotPeaks.kernel"; surface.launchTimed), which adds waits.
	trace        func(call string, d time.Duration)
	traceStart   func(call string)
	traceKernels bool

	// pixels lends page-locked buffers for images to be decoded into (HostPixels), which Load sends without
	// staging them.
	pixels *pixelPool

	mu     sync.Mutex
	pool   []*arena // idle arenas, reused by later Loads
	pilots map[*accel.PilotPlan]cuda.DevicePtr
	closed bool
}

type kernels struct {
	lumaNRGBA, lumaGray, copyRows, blockStats, markEnergy, markLuma, apply, half, sample, residual, boxRows,
	boxCols, normalise, fold, pilotDihedral, pilotSums, pilotPeaks, opaqueCheck, pngFilter, zeroWords, deflateTokens,
	deflateEncode, blockScores, convDecode, convOutput cuda.Function
}

// maxPooled bounds the idle arenas a Device keeps: three per job that runs at once on a device (the image,
// the PNG filter pass and the read-back check each load one), for 16 jobs at once. An arena that does not fit
// the pool is freed, and a job that finds none allocates one: both are driver calls that wait for the whole
// device (cuMemFree, cuMemFreeHost) or take milliseconds (cuMemHostAlloc). With 16 kept, 16 concurrent jobs
// spent over half of their driver time allocating and freeing arenas (gpubench NodeThroughput12MP, execution
// trace on an H200). At 12 MP an arena is about 120 MiB of device memory and 50 MiB of pinned host memory.
const maxPooled = 48

// New compiles the kernels with nv for c's device and loads them into c. It fails when NVRTC is missing or
// cannot target the device; the caller then keeps the codec on the CPU.
func New(ctx context.Context, c *cuda.Context, nv *cuda.NVRTC) (*Device, error) {
	if nv == nil {
		return nil, errors.New("cudacodec: no NVRTC: the codec kernels are compiled at run time")
	}
	major, minor, err := c.ComputeCapability()
	if err != nil {
		return nil, fmt.Errorf("cudacodec: %w", err)
	}
	arch := major*10 + minor
	if archs, ok := nv.SupportedArchs(); ok {
		best := 0
		for _, a := range archs {
			if a <= arch {
				best = a
			}
		}
		if best == 0 {
			return nil, fmt.Errorf("cudacodec: NVRTC cannot target compute capability %d.%d", major, minor)
		}
		arch = best
	}
	ptx, log, err := nv.Compile(ctx, kernelSource+deflateSource, "codec.cu", fmt.Sprintf("--gpu-architecture=compute_%d", arch),
		"--fmad=false")
	if err != nil {
		return nil, fmt.Errorf("cudacodec: compile kernels: %w (log: %s)", err, log)
	}
	mod, err := c.LoadModule(ptx)
	if err != nil {
		return nil, fmt.Errorf("cudacodec: load kernels: %w", err)
	}
	d := &Device{c: c, mod: mod, pilots: map[*accel.PilotPlan]cuda.DevicePtr{}, pixels: newPixelPool(cudaPinned(c))}
	nmaj, nmin, _ := nv.Version()
	d.compiler = fmt.Sprintf("nvrtc %d.%d (compute_%d)", nmaj, nmin, arch)
	for _, f := range []struct {
		fn   *cuda.Function
		name string
	}{
		{&d.k.lumaNRGBA, "luma_nrgba"}, {&d.k.lumaGray, "luma_gray"}, {&d.k.copyRows, "copy_rows"},
		{&d.k.blockStats, "block_stats"}, {&d.k.markEnergy, "mark_energy"}, {&d.k.markLuma, "mark_luma"},
		{&d.k.apply, "apply_nrgba"}, {&d.k.half, "half_plane"}, {&d.k.sample, "sample_grid"},
		{&d.k.residual, "whiten_residual"}, {&d.k.boxRows, "box_rows"}, {&d.k.boxCols, "box_cols"},
		{&d.k.normalise, "whiten_normalise"}, {&d.k.fold, "fold_tile"}, {&d.k.pilotDihedral, "pilot_dihedral"},
		{&d.k.pilotSums, "pilot_sums"}, {&d.k.pilotPeaks, "pilot_peaks"}, {&d.k.opaqueCheck, "opaque_check"},
		{&d.k.pngFilter, "png_filter"}, {&d.k.zeroWords, "zero_words"},
		{&d.k.deflateTokens, "deflate_tokens"}, {&d.k.deflateEncode, "deflate_encode"},
	} {
		if *f.fn, err = mod.Function(f.name); err != nil {
			mod.Unload()
			return nil, fmt.Errorf("cudacodec: %w", err)
		}
	}
	if err := d.loadDetectPasses(ctx, nv, arch); err != nil {
		d.compiler += "; detector passes on the host: " + err.Error()
	}
	return d, nil
}

// loadDetectPasses compiles and loads the detector's optional passes (detectkernels.go) as a module of their own:
// they are checked on the host only (TestDetectKernelsOnTheHost) until a device session runs them, so a compiler
// that refuses them, or a driver that cannot load them, costs those passes (the codec computes them on the host,
// as before them) and not the device.
func (d *Device) loadDetectPasses(ctx context.Context, nv *cuda.NVRTC, arch int) error {
	ptx, log, err := nv.Compile(ctx, detectSource, "detect.cu", fmt.Sprintf("--gpu-architecture=compute_%d", arch), "--fmad=false")
	if err != nil {
		return fmt.Errorf("compile: %w (log: %s)", err, log)
	}
	mod, err := d.c.LoadModule(ptx)
	if err != nil {
		return fmt.Errorf("load: %w", err)
	}
	for _, f := range []struct {
		fn   *cuda.Function
		name string
	}{{&d.k.blockScores, "block_scores"}, {&d.k.convDecode, "conv_decode"}, {&d.k.convOutput, "conv_output"}} {
		if *f.fn, err = mod.Function(f.name); err != nil {
			mod.Unload()
			return err
		}
	}
	d.detectMod = mod
	return nil
}

// Compiler says how the kernels were built, for logs and `gpu info`.
func (d *Device) Compiler() string { return d.compiler }

// Close frees the pooled memory and unloads the kernels. Surfaces still open must be closed first; pixel buffers
// still lent (HostPixels) are freed when they are given back.
func (d *Device) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil
	}
	d.closed = true
	errs := []error{d.pixels.close()}
	for _, a := range d.pool {
		errs = append(errs, a.free(d.c))
	}
	d.pool = nil
	for _, p := range d.pilots {
		errs = append(errs, d.c.Free(p))
	}
	if d.detectMod != nil {
		errs = append(errs, d.detectMod.Unload())
	}
	errs = append(errs, d.mod.Unload())
	return errors.Join(errs...)
}

// arena is one job's device memory (one allocation, carved by the Surface), pinned staging buffer and stream.
type arena struct {
	dev     cuda.DevicePtr
	devSize int
	grid    cuda.DevicePtr // the waxel grid's scratch, grown on demand
	gridCap int            // waxels
	host    *cuda.HostBuffer
	stream  *cuda.Stream
}

func (a *arena) free(c *cuda.Context) error {
	var errs []error
	if a.dev != 0 {
		errs = append(errs, c.Free(a.dev))
	}
	if a.grid != 0 {
		errs = append(errs, c.Free(a.grid))
	}
	if a.host != nil {
		errs = append(errs, a.host.Free())
	}
	if a.stream != nil {
		errs = append(errs, a.stream.Destroy())
	}
	return errors.Join(errs...)
}

// takeArena returns a pooled arena with at least devSize device bytes and hostSize pinned bytes, or a new one.
func (d *Device) takeArena(devSize, hostSize int) (*arena, error) {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil, errors.New("cudacodec: device closed")
	}
	best := -1
	for i, a := range d.pool {
		if a.devSize >= devSize && a.host.Bytes() != nil && len(a.host.Bytes()) >= hostSize &&
			(best < 0 || a.devSize < d.pool[best].devSize) {
			best = i
		}
	}
	if best >= 0 {
		a := d.pool[best]
		d.pool = append(d.pool[:best], d.pool[best+1:]...)
		d.mu.Unlock()
		return a, nil
	}
	d.mu.Unlock()
	a := &arena{devSize: devSize}
	var err error
	if a.dev, err = d.c.Alloc(devSize); err != nil {
		return nil, fmt.Errorf("cudacodec: %w", err)
	}
	if a.host, err = d.c.AllocHost(hostSize); err != nil {
		a.free(d.c)
		return nil, fmt.Errorf("cudacodec: %w", err)
	}
	if a.stream, err = d.c.NewStream(); err != nil {
		a.free(d.c)
		return nil, fmt.Errorf("cudacodec: %w", err)
	}
	return a, nil
}

func (d *Device) giveArena(a *arena) error {
	d.mu.Lock()
	if !d.closed && len(d.pool) < maxPooled {
		d.pool = append(d.pool, a)
		d.mu.Unlock()
		return nil
	}
	d.mu.Unlock()
	return a.free(d.c)
}

// pilotTables returns the pilot plan's tables on the device, checked and uploaded once per plan: the pilot's
// indices (each inside the tile) and signs, the eight index tables, and the pilot as a dense tile (densePilot,
// for BlockScores).
func (d *Device) pilotTables(p *accel.PilotPlan) (cuda.DevicePtr, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if ptr, ok := d.pilots[p]; ok {
		return ptr, nil
	}
	n := p.TileSide * p.TileSide
	for _, u := range p.Pilot {
		if u < 0 || int(u) >= n {
			return 0, fmt.Errorf("cudacodec: pilot index %d outside the tile", u)
		}
	}
	buf := make([]byte, 0, 8*len(p.Pilot)+4*8*n+4*n)
	buf = appendInt32s(buf, p.Pilot)
	buf = appendFloat32s(buf, p.Sign)
	for _, idx := range p.Index {
		if len(idx) != n {
			return 0, fmt.Errorf("cudacodec: pilot plan index of %d entries, want %d", len(idx), n)
		}
		buf = appendInt32s(buf, idx)
	}
	buf = appendFloat32s(buf, densePilot(p))
	ptr, err := d.c.Alloc(len(buf))
	if err != nil {
		return 0, fmt.Errorf("cudacodec: %w", err)
	}
	if err := d.c.CopyToDevice(ptr, buf); err != nil {
		d.c.Free(ptr)
		return 0, fmt.Errorf("cudacodec: %w", err)
	}
	d.pilots[p] = ptr
	return ptr, nil
}

// densePilot is the pilot plan's chips as a tile, 0 where there is none (block_scores reads it so).
func densePilot(p *accel.PilotPlan) []float32 {
	d := make([]float32, p.TileSide*p.TileSide)
	for i, u := range p.Pilot {
		d[u] = p.Sign[i]
	}
	return d
}

func appendInt32s(b []byte, v []int32) []byte {
	for _, x := range v {
		b = binary.LittleEndian.AppendUint32(b, uint32(x))
	}
	return b
}

func appendFloat32s(b []byte, v []float32) []byte {
	for _, x := range v {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
	}
	return b
}

// bytesOf views a slice of fixed-size numbers as bytes (little-endian hosts only, as CUDA hosts are).
func bytesOf[T int32 | float32 | float64 | int64 | uint8](v []T) []byte {
	if len(v) == 0 {
		return nil
	}
	var z T
	return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), len(v)*int(unsafe.Sizeof(z)))
}

const align = 256

func roundUp(n int) int { return (n + align - 1) / align * align }

// Load copies img to the device and computes its luma. Packed pixels in a buffer of HostPixels are sent from
// there; others are copied into the arena's pinned staging buffer first.
func (d *Device) Load(ctx context.Context, img accel.Image) (accel.Surface, error) {
	defer d.traced("Load", d.begin("Load"))
	w, h := img.Width, img.Height
	if w <= 0 || h <= 0 {
		return nil, fmt.Errorf("cudacodec: load: empty %dx%d image", w, h)
	}
	bpp := 4
	if img.Format == accel.Gray8 {
		bpp = 1
	} else if img.Format != accel.NRGBA8 {
		return nil, fmt.Errorf("cudacodec: load: unknown format %d", img.Format)
	}
	if img.Stride < w*bpp || len(img.Pix) < (h-1)*img.Stride+w*bpp {
		return nil, fmt.Errorf("cudacodec: load: %d bytes with stride %d do not hold a %dx%d image", len(img.Pix),
			img.Stride, w, h)
	}
	s := &surface{d: d, w: w, h: h, bpp: bpp, format: img.Format}
	s.layout()
	rowBytes := w * bpp
	// Pixels decoded into a buffer of HostPixels, packed, go to the device from there; others are staged.
	var direct pinnedBuffer
	directOff := 0
	if img.Stride == rowBytes {
		direct, directOff, _ = d.pixels.lentAt(img.Pix[:h*rowBytes])
	}
	// Staging holds the image, the largest plan, the nominal grid's download (5 bytes a waxel, at most one per 4
	// pixels) or the pilot sums, whichever is largest. The image is left out only for a luma plane sent from
	// where it lies: an NRGBA8 surface's Read (an embed's output) comes back through staging at the image's size.
	host := max(s.planBytes, 8*8*tileMax*tileMax, w*h*5/4+1<<20)
	if direct == nil || img.Format == accel.NRGBA8 {
		host = max(host, w*h*bpp)
	}
	a, err := d.takeArena(s.size, host)
	if err != nil {
		return nil, err
	}
	s.a = a
	s.base = a.dev
	// The pixels go up packed (stride w·bpp on the device) a band of rows at a time, each band's transfer queued
	// with its rows' luma (and an NRGBA image's output copy) after it on the stream. Staged through the pinned
	// buffer, each band is queued as soon as it is copied there, so the device converts while later bands are
	// copied and only the last band's work is left when the staging ends. From a lent buffer the image is one
	// transfer: on one stream a transfer and the kernels after it run in turn, so bands would only add calls.
	block := cuda.Dim3{X: 256, Y: 1, Z: 1}
	queue := func(src *cuda.HostBuffer, srcOff, off, n int) error {
		if err := d.c.CopyRangeToDeviceAsync(s.at(s.offPix+off), src, srcOff, n, a.stream); err != nil {
			return fmt.Errorf("upload: %w", err)
		}
		y0, rows := off/rowBytes, n/rowBytes
		pix, luma := s.at(s.offPix+off), s.at(s.offLuma+4*w*y0)
		grid := cuda.Dim3{X: uint32((w + 255) / 256), Y: rowsOf(rows), Z: 1}
		var err error
		if img.Format == accel.NRGBA8 {
			err = d.k.lumaNRGBA.Launch(grid, block, 0, a.stream, pix, int32(w), int32(rows), int32(w*4), luma)
			if err == nil {
				err = d.k.copyRows.Launch(cuda.Dim3{X: uint32((w*4 + 255) / 256), Y: rowsOf(rows), Z: 1}, block, 0,
					a.stream, pix, s.at(s.offOut+off), int32(w*4), int32(rows), int32(w*4))
			}
		} else {
			err = d.k.lumaGray.Launch(grid, block, 0, a.stream, pix, int32(w), int32(rows), int32(w), luma)
		}
		if err != nil {
			return fmt.Errorf("luma: %w", err)
		}
		return nil
	}
	staging := time.Now()
	if hb, ok := direct.(*cuda.HostBuffer); ok {
		err = queue(hb, directOff, 0, h*rowBytes)
	} else {
		err = stageUpload(a.host.Bytes(), img.Pix, img.Stride, rowBytes, h, func(off, n int) error {
			return queue(a.host, off, off, n)
		})
	}
	d.traced("Load.staged", staging) // the rows copied into the pinned buffer, the last band's work queued
	if err == nil {
		err = a.stream.Synchronize(ctx)
	}
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("cudacodec: load: %w", err)
	}
	if d.detectMod != nil {
		return detectSurface{s}, nil
	}
	return s, nil
}

// HostPixels lends n bytes of page-locked memory for an image's pixels (accel.HostMemory), or nil when none can
// be pinned.
func (d *Device) HostPixels(n int) ([]byte, func()) { return d.pixels.lend(n) }

// begin starts a traced call: it tells traceStart and returns the start time for traced.
func (d *Device) begin(call string) time.Time {
	if d.traceStart != nil {
		d.traceStart(call)
	}
	return time.Now()
}

// uploadBand is the bytes of the bands Load stages and queues. Before, Load staged a whole image and then
// transferred it: a 12 MP NRGBA image's 48 MB took the staging copy's time plus the transfer's; in bands the
// transfers overlap the copies of later bands. A band is at least this large, so that the driver calls, about
// ten microseconds each, stay few.
const uploadBand = 1 << 20

// uploadBands is about how many bands a large image is staged in: each band also costs the driver calls of its
// transfer and its rows' conversion kernels (tens of microseconds of a staging goroutine's time), so 48 bands of
// a 12 MP NRGBA image cost more than their overlap gained (Load 1.8 -> 2.7 ms on an H200) and bands grow above
// uploadBand to keep about this many.
const uploadBands = 16

// stageUpload packs rows rows of rowBytes bytes from pix (row y at y·stride) into the staging buffer hb (row y at
// y·rowBytes), a band of about uploadBand bytes (at least one row) at a time, and calls send with each band's
// offset and length in hb once it is staged (Load queues its transfer there). Up to hostCopyWorkers goroutines
// each take the next band, copy it and send it, so bands are sent in about their order but not exactly, and
// send may be called concurrently. (Before, each band was copied by a few goroutines started for it and sent
// by the caller: a 12 MP image's 12 bands paid 12 rounds of goroutine starts and waits, and Load's staging ran
// at a quarter of a plain parallel copy's rate on an H200 host: TestUploadRates.) It returns send's first
// error; no band is taken after it.
func stageUpload(hb, pix []byte, stride, rowBytes, rows int, send func(off, n int) error) error {
	per := max(1, max(uploadBand, rows*rowBytes/uploadBands)/max(rowBytes, 1))
	bands := (rows + per - 1) / per
	band := func(b int) error {
		y0, y1 := b*per, min(rows, (b+1)*per)
		off := y0 * rowBytes
		copyBand(hb[off:], rowBytes, pix[y0*stride:], stride, rowBytes, 0, y1-y0)
		return send(off, (y1-y0)*rowBytes)
	}
	workers := min(hostCopyWorkers, runtime.GOMAXPROCS(0), bands)
	if workers <= 1 {
		for b := range bands {
			if err := band(b); err != nil {
				return err
			}
		}
		return nil
	}
	var (
		next    atomic.Int64
		failed  atomic.Bool
		errOnce sync.Once
		first   error
		wg      sync.WaitGroup
	)
	for range workers {
		wg.Go(func() {
			for !failed.Load() {
				b := int(next.Add(1) - 1)
				if b >= bands {
					return
				}
				if err := band(b); err != nil {
					errOnce.Do(func() { first = err })
					failed.Store(true)
					return
				}
			}
		})
	}
	wg.Wait()
	return first
}

func (d *Device) traced(call string, start time.Time) {
	if d.trace != nil {
		d.trace(call, time.Since(start))
	}
}

// tileMax is the largest tile side a plan may use (the codec's is 128).
const tileMax = 128

// Open loads the driver and NVRTC (paths "" search the usual places), opens a context on device index and
// loads the kernels into it: for tools and benchmarks that hold a device outside a node (a node's gpu.Fleet
// opens its devices itself). closeAll unloads the kernels and destroys the context.
func Open(ctx context.Context, driverPath, nvrtcPath string, index int) (d *Device, closeAll func() error, err error) {
	drv, err := cuda.Load(driverPath)
	if err != nil {
		return nil, nil, fmt.Errorf("cudacodec: %w", err)
	}
	if err := drv.Init(); err != nil {
		return nil, nil, fmt.Errorf("cudacodec: %w", err)
	}
	dev, err := drv.Device(index)
	if err != nil {
		return nil, nil, fmt.Errorf("cudacodec: device %d: %w", index, err)
	}
	nv, err := cuda.LoadNVRTC(nvrtcPath)
	if err != nil {
		return nil, nil, fmt.Errorf("cudacodec: %w", err)
	}
	c, err := drv.NewContext(dev)
	if err != nil {
		return nil, nil, fmt.Errorf("cudacodec: device %d: %w", index, err)
	}
	if d, err = New(ctx, c, nv); err != nil {
		c.Destroy()
		return nil, nil, err
	}
	return d, func() error { return errors.Join(d.Close(), c.Destroy()) }, nil
}

// PooledBytes is the device and pinned host memory held by idle arenas and pixel buffers: after one job of a
// size, the memory such a job uses.
func (d *Device) PooledBytes() (device, pinned int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, a := range d.pool {
		device += a.devSize + a.gridCap
		pinned += len(a.host.Bytes())
	}
	return device, pinned + d.pixels.pooled()
}
