package cudacodec

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"

	"filigrane/codec/accel"
	"filigrane/gpu/cuda"
)

// FilterPNG implements accel.PNGFilter: the PNG filter pass of image/png's encoder (per row, the filter type
// with the least sum of absolute values, ties in its order), on the device. alpha is false when every pixel is
// opaque (the encoder then writes RGB).
func (d *Device) FilterPNG(ctx context.Context, img accel.Image) (rows []byte, alpha bool, err error) {
	defer d.traced("FilterPNG", time.Now())
	w, h := img.Width, img.Height
	if img.Format != accel.NRGBA8 || w <= 0 || h <= 0 || img.Stride < 4*w || len(img.Pix) < (h-1)*img.Stride+4*w {
		return nil, false, fmt.Errorf("cudacodec: PNG filter: not an NRGBA8 image of %dx%d", w, h)
	}
	pixBytes, rowsMax := w*h*4, h*(1+4*w)
	a, err := d.takeArena(roundUp(pixBytes)+roundUp(rowsMax)+align, max(pixBytes, rowsMax))
	if err != nil {
		return nil, false, err
	}
	defer d.giveArena(a)
	pix, out, flag := a.dev, a.dev+cuda.DevicePtr(roundUp(pixBytes)), a.dev+cuda.DevicePtr(roundUp(pixBytes)+roundUp(rowsMax))
	hb := a.host.Bytes()
	copyRows(hb, 4*w, img.Pix, img.Stride, 4*w, h)
	binary.LittleEndian.PutUint32(hb[pixBytes:], 0)
	if err := d.c.CopyRangeToDeviceAsync(pix, a.host, 0, pixBytes, a.stream); err != nil {
		return nil, false, fmt.Errorf("cudacodec: PNG filter: %w", err)
	}
	if err := d.c.CopyRangeToDeviceAsync(flag, a.host, pixBytes, 4, a.stream); err != nil {
		return nil, false, fmt.Errorf("cudacodec: PNG filter: %w", err)
	}
	if err := d.k.opaqueCheck.Launch(cuda.Dim3{X: blocksOf(w), Y: uint32(h), Z: 1}, block256, 0, a.stream, pix,
		int32(w), int32(h), int32(4*w), flag); err != nil {
		return nil, false, fmt.Errorf("cudacodec: PNG filter: %w", err)
	}
	if err := d.c.CopyRangeFromDeviceAsync(a.host, pixBytes, 4, flag, a.stream); err != nil {
		return nil, false, fmt.Errorf("cudacodec: PNG filter: %w", err)
	}
	if err := a.stream.Synchronize(ctx); err != nil {
		return nil, false, fmt.Errorf("cudacodec: PNG filter: %w", err)
	}
	alpha = binary.LittleEndian.Uint32(hb[pixBytes:]) != 0
	bpp := 3
	if alpha {
		bpp = 4
	}
	n := h * (1 + bpp*w)
	if err := d.k.pngFilter.Launch(cuda.Dim3{X: uint32(h), Y: 1, Z: 1}, block256, 0, a.stream, pix, int32(w), int32(h),
		int32(4*w), int32(bpp), out); err != nil {
		return nil, false, fmt.Errorf("cudacodec: PNG filter: %w", err)
	}
	if err := d.c.CopyRangeFromDeviceAsync(a.host, 0, n, out, a.stream); err != nil {
		return nil, false, fmt.Errorf("cudacodec: PNG filter: %w", err)
	}
	if err := a.stream.Synchronize(ctx); err != nil {
		return nil, false, fmt.Errorf("cudacodec: PNG filter: %w", err)
	}
	rows = make([]byte, n)
	copyBytes(rows, hb[:n])
	return rows, alpha, nil
}
