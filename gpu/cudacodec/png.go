package cudacodec

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"
	"unsafe"

	"filigrane/codec/accel"
	"filigrane/codec/pardeflate"
	"filigrane/gpu/cuda"
)

// FilterPNG is DeflatePNG's first pass alone, its rows downloaded (the tests check them against image/png's):
// the PNG filter pass of image/png's encoder (per row, the filter type with the least sum of absolute values,
// ties in its order), on the device. alpha is false when every pixel is opaque (the encoder then writes RGB).
func (d *Device) FilterPNG(ctx context.Context, img accel.Image) (rows []byte, alpha bool, err error) {
	defer d.traced("FilterPNG", d.begin("FilterPNG"))
	f, err := d.filter(ctx, img, 0, 0)
	if err != nil {
		return nil, false, err
	}
	defer d.giveArena(f.a)
	if err := d.c.CopyRangeFromDeviceAsync(f.a.host, 0, f.n, f.rows, f.a.stream); err != nil {
		return nil, false, fmt.Errorf("cudacodec: PNG filter: %w", err)
	}
	if err := f.a.stream.Synchronize(ctx); err != nil {
		return nil, false, fmt.Errorf("cudacodec: PNG filter: %w", err)
	}
	rows = make([]byte, f.n)
	copyBytes(rows, f.a.host.Bytes()[:f.n])
	return rows, f.alpha, nil
}

// filtered is the filter pass's result on the device: n bytes of filtered rows at rows, in arena a (which the
// caller gives back), with extra bytes of device memory free after them at scratch.
type filtered struct {
	a       *arena
	rows    cuda.DevicePtr
	n       int
	alpha   bool
	scratch cuda.DevicePtr
}

// filter uploads img and runs the opaque check and the filter pass, in an arena with extraDev more bytes of
// device memory and at least hostSize pinned bytes.
func (d *Device) filter(ctx context.Context, img accel.Image, extraDev, hostSize int) (filtered, error) {
	w, h := img.Width, img.Height
	if img.Format != accel.NRGBA8 || w <= 0 || h <= 0 || img.Stride < 4*w || len(img.Pix) < (h-1)*img.Stride+4*w {
		return filtered{}, fmt.Errorf("cudacodec: PNG filter: not an NRGBA8 image of %dx%d", w, h)
	}
	pixBytes, rowsMax := w*h*4, h*(1+4*w)
	a, err := d.takeArena(roundUp(pixBytes)+roundUp(rowsMax)+align+extraDev, max(pixBytes+4, rowsMax, hostSize))
	if err != nil {
		return filtered{}, err
	}
	f, err := d.filterIn(ctx, a, img, pixBytes, rowsMax)
	if err != nil {
		d.giveArena(a)
		return filtered{}, err
	}
	return f, nil
}

func (d *Device) filterIn(ctx context.Context, a *arena, img accel.Image, pixBytes, rowsMax int) (filtered, error) {
	w, h := img.Width, img.Height
	pix, out, flag := a.dev, a.dev+cuda.DevicePtr(roundUp(pixBytes)), a.dev+cuda.DevicePtr(roundUp(pixBytes)+roundUp(rowsMax))
	hb := a.host.Bytes()
	copyRows(hb, 4*w, img.Pix, img.Stride, 4*w, h)
	binary.LittleEndian.PutUint32(hb[pixBytes:], 0)
	if err := d.c.CopyRangeToDeviceAsync(pix, a.host, 0, pixBytes, a.stream); err != nil {
		return filtered{}, fmt.Errorf("cudacodec: PNG filter: %w", err)
	}
	if err := d.c.CopyRangeToDeviceAsync(flag, a.host, pixBytes, 4, a.stream); err != nil {
		return filtered{}, fmt.Errorf("cudacodec: PNG filter: %w", err)
	}
	if err := d.k.opaqueCheck.Launch(cuda.Dim3{X: blocksOf(w), Y: rowsOf(h), Z: 1}, block256, 0, a.stream, pix,
		int32(w), int32(h), int32(4*w), flag); err != nil {
		return filtered{}, fmt.Errorf("cudacodec: PNG filter: %w", err)
	}
	if err := d.c.CopyRangeFromDeviceAsync(a.host, pixBytes, 4, flag, a.stream); err != nil {
		return filtered{}, fmt.Errorf("cudacodec: PNG filter: %w", err)
	}
	if err := a.stream.Synchronize(ctx); err != nil {
		return filtered{}, fmt.Errorf("cudacodec: PNG filter: %w", err)
	}
	alpha := binary.LittleEndian.Uint32(hb[pixBytes:]) != 0
	bpp := 3
	if alpha {
		bpp = 4
	}
	if err := d.k.pngFilter.Launch(cuda.Dim3{X: uint32(h), Y: 1, Z: 1}, block256, 0, a.stream, pix, int32(w), int32(h),
		int32(4*w), int32(bpp), out); err != nil {
		return filtered{}, fmt.Errorf("cudacodec: PNG filter: %w", err)
	}
	return filtered{a: a, rows: out, n: h * (1 + bpp*w), alpha: alpha, scratch: flag + align}, nil
}

// oneThread is the thread block of the deflate passes: one thread, a segment's or a block's long serial loop. The
// threads of a warp would diverge at every token (measured on an H200, 16 12 MP images at once: 17 images/s
// with 32 threads a block, 21 with 8, 53 with one).
var oneThread = cuda.Dim3{X: 1, Y: 1, Z: 1}

// deflateLayout is where DeflatePNG keeps its passes' data after the filtered rows: the tokens (SegmentSize
// words a segment), their counts, the blocks' histograms followed by the segments' Adler-32 parts (downloaded
// together), the plans and the compressed stream.
type deflateLayout struct {
	nseg, nblocks                              int
	tokens, counts, hist, adler, plans, output int // offsets from the scratch start
	outCap, size                               int
}

func newDeflateLayout(n int) deflateLayout {
	l := deflateLayout{nseg: pardeflate.Segments(n), nblocks: pardeflate.Blocks(n)}
	off := 0
	next := func(bytes int) int {
		o := off
		off += roundUp(bytes)
		return o
	}
	l.tokens = next(4 * l.nseg * pardeflate.SegmentSize)
	l.counts = next(4 * l.nseg)
	l.hist = next(4*l.nblocks*pardeflate.BlockHistWords + 8*l.nseg)
	l.adler = l.hist + 4*l.nblocks*pardeflate.BlockHistWords
	l.plans = next(4 * l.nblocks * pardeflate.PlanWords)
	// A dynamic block of n bytes takes at most about 9.2 bits a byte (no code is longer than the alphabet
	// needs by more than a bit), plus its header and flush; a stream over the capacity is compressed on the host.
	l.outCap = n + n/4 + l.nblocks*(pardeflate.MaxHeaderBytes+8) + 1024
	l.output = next(l.outCap)
	l.size = off
	return l
}

// DeflatePNG implements accel.PNGDeflater: FilterPNG's pass, then the rows deflated on the device in
// pardeflate's format. The host builds the blocks' codes and headers from the device's histograms
// (pardeflate.Plans) between the two passes; the rows themselves never come back.
func (d *Device) DeflatePNG(ctx context.Context, img accel.Image) (z []byte, alpha bool, err error) {
	defer d.traced("DeflatePNG", d.begin("DeflatePNG"))
	rowsMax := img.Height * (1 + 4*img.Width)
	lay := newDeflateLayout(rowsMax)
	phase := time.Now()
	f, err := d.filter(ctx, img, lay.size, max(lay.outCap, 4*lay.nblocks*pardeflate.PlanWords,
		4*lay.nblocks*pardeflate.BlockHistWords+8*lay.nseg))
	if err != nil {
		return nil, false, err
	}
	d.traced("DeflatePNG.filter", phase)
	phase = time.Now()
	defer d.giveArena(f.a)
	lay = newDeflateLayout(f.n) // the rows' real size (RGB when opaque): the same offsets or smaller
	a, at := f.a, func(off int) cuda.DevicePtr { return f.scratch + cuda.DevicePtr(off) }
	fail := func(step string, err error) ([]byte, bool, error) {
		return nil, false, fmt.Errorf("cudacodec: PNG deflate: %s: %w", step, err)
	}
	histWords := lay.nblocks * pardeflate.BlockHistWords
	if err := d.k.zeroWords.Launch(cuda.Dim3{X: blocksOf(histWords), Y: 1, Z: 1}, block256, 0, a.stream, at(lay.hist),
		int64(histWords)); err != nil {
		return fail("clear", err)
	}
	if err := d.k.deflateTokens.Launch(cuda.Dim3{X: uint32(lay.nseg), Y: 1, Z: 1}, oneThread, 0, a.stream, f.rows,
		int64(f.n), int32(lay.nseg), at(lay.tokens), at(lay.counts), at(lay.hist), at(lay.adler)); err != nil {
		return fail("tokens", err)
	}
	partsBytes := 4*histWords + 8*lay.nseg
	if err := d.c.CopyRangeFromDeviceAsync(a.host, 0, partsBytes, at(lay.hist), a.stream); err != nil {
		return fail("histograms", err)
	}
	if err := a.stream.Synchronize(ctx); err != nil {
		return fail("tokens", err)
	}
	d.traced("DeflatePNG.tokens", phase)
	phase = time.Now()
	hb := a.host.Bytes()
	words := unsafe.Slice((*uint32)(unsafe.Pointer(&hb[0])), partsBytes/4)
	hists := append([]uint32(nil), words[:histWords]...)
	parts := append([]uint32(nil), words[histWords:]...)
	plans, size, err := pardeflate.Plans(hists, f.n)
	if err != nil {
		return fail("plans", err)
	}
	if size > lay.outCap {
		// Incompressible beyond the capacity: the same stream, compressed here from the rows.
		if err := d.c.CopyRangeFromDeviceAsync(a.host, 0, f.n, f.rows, a.stream); err != nil {
			return fail("rows", err)
		}
		if err := a.stream.Synchronize(ctx); err != nil {
			return fail("rows", err)
		}
		return pardeflate.Compress(hb[:f.n]), f.alpha, nil
	}
	pw := make([]uint32, 0, lay.nblocks*pardeflate.PlanWords)
	for i := range plans {
		pw = plans[i].Words(pw)
	}
	copy(hb, bytesOf(int32sOf(pw)))
	d.traced("DeflatePNG.plans", phase)
	phase = time.Now()
	if err := d.c.CopyRangeToDeviceAsync(at(lay.plans), a.host, 0, 4*len(pw), a.stream); err != nil {
		return fail("plans", err)
	}
	if err := d.k.deflateEncode.Launch(cuda.Dim3{X: uint32(lay.nblocks), Y: 1, Z: 1}, oneThread,
		0, a.stream, f.rows, int64(f.n), at(lay.tokens), at(lay.counts), at(lay.plans), int32(lay.nblocks),
		int32(lay.nseg), at(lay.output)); err != nil {
		return fail("encode", err)
	}
	if err := d.c.CopyRangeFromDeviceAsync(a.host, 0, size, at(lay.output), a.stream); err != nil {
		return fail("download", err)
	}
	if err := a.stream.Synchronize(ctx); err != nil {
		return fail("encode", err)
	}
	d.traced("DeflatePNG.encode", phase)
	z = make([]byte, len(pardeflate.ZlibHeader)+size+4)
	copy(z, pardeflate.ZlibHeader)
	copyBytes(z[len(pardeflate.ZlibHeader):], hb[:size])
	binary.BigEndian.PutUint32(z[len(z)-4:], pardeflate.CombineAdler(parts, f.n))
	return z, f.alpha, nil
}

// int32sOf views words as int32s, for bytesOf.
func int32sOf(w []uint32) []int32 {
	if len(w) == 0 {
		return nil
	}
	return unsafe.Slice((*int32)(unsafe.Pointer(&w[0])), len(w))
}
