package imageio

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"image"
	"io"

	"golang.org/x/image/tiff"
)

// Cost is what the first bytes of a file tell about the memory of decoding it, so that a caller can reserve
// that memory (or refuse the file) before reading the rest.
type Cost struct {
	Format string // as in Picture.Format
	// Width and Height are from the header, before orientation.
	Width, Height int
	// Decode is an upper estimate of the bytes DecodeBytes allocates at its peak (the decoder's own buffers,
	// the canonical NRGBA copy and the oriented copy), not counting the encoded file itself.
	Decode int64
	// Analysis is the same for DecodeForAnalysis, which keeps the decoder's own pixel layout.
	Analysis int64
	// Deep is true when DecodeBytes will return NRGBA64 (or may: a TIFF's depth is not estimated).
	Deep bool
}

// EstimateCost reads the header at the start of a file (head may be the first few kB or the whole file) and
// estimates the memory decoding it takes. A JPEG's frame header may lie past a short head (behind large
// metadata); the estimate then assumes the costliest layout (three full-resolution components, progressive).
func EstimateCost(head []byte) (Cost, error) {
	f, err := sniff(head)
	if err != nil {
		return Cost{}, err
	}
	cfg, err := f.config(head)
	if err != nil {
		return Cost{}, classify(f.name, "reading header", err)
	}
	if cfg.Width <= 0 || cfg.Height <= 0 {
		return Cost{}, fmt.Errorf("imageio: %s header gives %dx%d pixels: %w", f.name, cfg.Width, cfg.Height, ErrCorrupt)
	}
	w, h := int64(cfg.Width), int64(cfg.Height)
	px := w * h
	out, canonical := decoderBytes(f.name, head, w, h)
	c := Cost{Format: f.name, Width: cfg.Width, Height: cfg.Height, Analysis: out, Deep: canonical == 8}
	// toCanonical copies unless the decoder already produced NRGBA; the orientation step copies again.
	c.Decode = out + canonical*px
	if m, _ := readMeta(f.name, head); m.orientation > 1 {
		c.Decode += canonical * px
	}
	return c, nil
}

// EstimateCostAt is EstimateCost for a file read through r (size bytes), for when the header may lie past the
// first bytes: a TIFF's IFD, which writers often put after the pixels, is read where it is with a few small
// reads. Other formats are estimated from their first headBytes.
func EstimateCostAt(r io.ReaderAt, size, headBytes int64) (Cost, error) {
	head := make([]byte, min(size, headBytes))
	if _, err := r.ReadAt(head, 0); err != nil && !errors.Is(err, io.EOF) {
		return Cost{}, fmt.Errorf("imageio: reading the header: %w", err)
	}
	c, err := EstimateCost(head)
	if err == nil || int64(len(head)) >= size || !errors.Is(err, ErrCorrupt) {
		return c, err
	}
	f, serr := sniff(head)
	if serr != nil || f.name != "tiff" {
		return c, err
	}
	cfg, err := tiff.DecodeConfig(io.NewSectionReader(r, 0, size))
	if err != nil {
		return Cost{}, classify(f.name, "reading header", err)
	}
	if cfg.Width <= 0 || cfg.Height <= 0 {
		return Cost{}, fmt.Errorf("imageio: tiff header gives %dx%d pixels: %w", cfg.Width, cfg.Height, ErrCorrupt)
	}
	px := int64(cfg.Width) * int64(cfg.Height)
	out, canonical := tiffDecoderBytes(r, size, int64(cfg.Width), int64(cfg.Height)), int64(8)
	// The orientation tag lives in the IFD too; assume the oriented copy.
	return Cost{Format: "tiff", Width: cfg.Width, Height: cfg.Height, Analysis: out,
		Decode: out + 2*canonical*px, Deep: canonical == 8}, nil
}

// decoderBytes estimates the bytes the format's decoder allocates for a w×h image, and the bytes per pixel of
// the canonical layout (4 for NRGBA, 8 for NRGBA64).
func decoderBytes(formatName string, head []byte, w, h int64) (int64, int64) {
	px := w * h
	switch formatName {
	case "jpeg":
		info := walkJPEG(head, MaxJPEGScans)
		if !info.sof || len(info.comps) == 0 {
			return 15 * px, 4 // 3 components and their progressive coefficients (4 bytes each)
		}
		hmax, vmax := 1, 1
		for _, c := range info.comps {
			hmax, vmax = max(hmax, c.h), max(vmax, c.v)
		}
		mcuX, mcuY := (w+8*int64(hmax)-1)/(8*int64(hmax)), (h+8*int64(vmax)-1)/(8*int64(vmax))
		var samples int64
		for _, c := range info.comps {
			samples += mcuX * 8 * int64(c.h) * mcuY * 8 * int64(c.v)
		}
		n := samples
		if len(info.comps) == 4 {
			n += 4 * px // CMYK output besides the component planes
		}
		if info.progressive {
			n += 4 * samples // one int32 coefficient per sample, kept across scans
		}
		return n, 4
	case "png":
		if len(head) < 29 {
			return 8 * px, 8
		}
		depth, colorType, interlaced := head[24], head[25], head[28] != 0
		var bpp, canonical int64 = 4, 4
		switch {
		case colorType == 3: // palette
			bpp = 1
		case colorType == 0 && depth == 16:
			bpp, canonical = 2, 8
		case colorType == 0:
			bpp = 1
		case depth == 16:
			bpp, canonical = 8, 8
		}
		if interlaced {
			bpp *= 2 // each pass is decoded into its own image, then copied into the whole
		}
		return bpp * px, canonical
	case "gif":
		return px, 4
	case "bmp":
		return 4 * px, 4
	case "pnm":
		hd, err := parsePNMHeader(head)
		if err != nil {
			return 8 * px, 8
		}
		var bpp int64 = 1
		if hd.channels > 1 {
			bpp = 4
		}
		if hd.maxval > 255 {
			return 2 * bpp * px, 8
		}
		return bpp * px, 4
	case "webp":
		return 8 * px, 4 // lossless: the decoder's ARGB words and the NRGBA result
	}
	return tiffDecoderBytes(bytes.NewReader(head), int64(len(head)), w, h), 8
}

// tiffDecoderBytes bounds what x/image/tiff allocates for a w×h TIFF whose first IFD r holds (size bytes): the
// image, at most 8 bytes a pixel (RGBA64), and the buffer of one strip or tile, which it decompresses whole
// before converting it. That buffer may reach 8 bytes a pixel of the block whatever depth the header declares
// (its read limit), and it grows by doubling (bytes.Buffer; safeReadAt's appends for a raw strip), so its
// allocations add up to under 4 times that. A TIFF in one strip (common; the default of many writers) thus
// needs up to 40 bytes a pixel, not 10: estimated at 10, a 1.5 MB deflated 14000×14000 16-bit TIFF passed the
// decode budget at 2 GB and raised the node's resident memory to 5.8 GB, so a few at once could exhaust it.
func tiffDecoderBytes(r io.ReaderAt, size, w, h int64) int64 {
	return 8*w*h + 4*tiffBlockBytes(r, size, w, h)
}

// tiffBlockBytes is the largest strip or tile x/image/tiff decompresses at once, at 8 bytes a pixel: a tile
// of TileWidth×TileLength (the decoder refuses tiles above 1024×1024), else a strip of the image's width and
// RowsPerStrip rows (at most the height; the whole image when the tag is absent or the IFD cannot be read).
func tiffBlockBytes(r io.ReaderAt, size, w, h int64) int64 {
	rows, tileW, tileH := tiffBlockTags(r, size)
	if tileW > 0 && tileH > 0 {
		return min(tileW, 1024) * min(tileH, 1024) * 8
	}
	if rows <= 0 || rows > h {
		rows = h
	}
	return w * rows * 8
}

// tiffBlockTags reads RowsPerStrip, TileWidth and TileLength from the first IFD; 0 for a tag it does not find.
func tiffBlockTags(r io.ReaderAt, size int64) (rows, tileW, tileH int64) {
	var hdr [8]byte
	if size < 8 {
		return 0, 0, 0
	}
	if _, err := r.ReadAt(hdr[:], 0); err != nil {
		return 0, 0, 0
	}
	var bo binary.ByteOrder = binary.LittleEndian
	if hdr[0] == 'M' {
		bo = binary.BigEndian
	}
	off := int64(bo.Uint32(hdr[4:]))
	var cnt [2]byte
	if off < 8 || off+2 > size {
		return 0, 0, 0
	}
	if _, err := r.ReadAt(cnt[:], off); err != nil {
		return 0, 0, 0
	}
	n := int64(bo.Uint16(cnt[:]))
	if off+2+12*n > size {
		return 0, 0, 0
	}
	entries := make([]byte, 12*n) // at most 786 kB (65535 entries)
	if _, err := r.ReadAt(entries, off+2); err != nil && !errors.Is(err, io.EOF) {
		return 0, 0, 0
	}
	for i := int64(0); i < n; i++ {
		e := entries[12*i : 12*i+12]
		var v int64
		switch bo.Uint16(e[2:]) { // the type of a single value kept in the entry
		case 3: // SHORT
			v = int64(bo.Uint16(e[8:]))
		case 4: // LONG
			v = int64(bo.Uint32(e[8:]))
		default:
			continue
		}
		if bo.Uint32(e[4:]) != 1 {
			continue
		}
		switch bo.Uint16(e[0:]) {
		case 278:
			rows = v
		case 322:
			tileW = v
		case 323:
			tileH = v
		}
	}
	return rows, tileW, tileH
}

// DecodeForAnalysis decodes one image file for analysis that reads luma only and does not care about
// orientation (detection finds flips and rotations itself): the image keeps the decoder's own pixel layout
// (*image.YCbCr for most JPEGs, *image.Gray, *image.RGBA, ...), which for a large JPEG takes a third of the
// memory of NRGBA. The structure limits and lim apply as in DecodeBytes. ctx is checked while the decoder
// reads, so a cancelled request stops decoding within a few kB.
func DecodeForAnalysis(ctx context.Context, data []byte, lim Limits) (image.Image, string, error) {
	return DecodeForAnalysisInto(ctx, data, lim, nil)
}

// DecodeForAnalysisInto is DecodeForAnalysis with the pixels, where this package's own decoder decodes the file
// (the common PNGs: not interlaced, 8 bits a sample; see pngdec.go), in memory from alloc: what a GPU device
// passes to have the decoder write into its pinned staging buffers. alloc is called at most once per call and
// only after every check on the header has passed; whatever it returned is the caller's again when the call
// returns (see PixelAllocator): in the image's Pix if the image uses it, else unused. nil alloc is
// DecodeForAnalysis.
func DecodeForAnalysisInto(ctx context.Context, data []byte, lim Limits, alloc PixelAllocator) (image.Image, string, error) {
	f, _, err := checkAll(data, lim)
	if err != nil {
		return nil, "", err
	}
	img, err := f.decodeAs(ctx, data, jpegNative, alloc)
	if err != nil {
		return nil, f.name, err
	}
	if b := img.Bounds(); int64(b.Dx())*int64(b.Dy()) > lim.withDefaults().MaxPixels {
		return nil, f.name, fmt.Errorf("imageio: %s decoded to %v: %w", f.name, b, ErrTooManyPixels)
	}
	return img, f.name, nil
}

// checkAll runs every check DecodeBytes makes before decoding pixels: size, format, header dimensions, pixel
// limit and structure limits.
func checkAll(data []byte, lim Limits) (format, image.Config, error) {
	lim = lim.withDefaults()
	if int64(len(data)) > lim.MaxBytes {
		return format{}, image.Config{}, fmt.Errorf("imageio: file is larger than %d bytes: %w", lim.MaxBytes, ErrTooLarge)
	}
	f, err := sniff(data)
	if err != nil {
		return format{}, image.Config{}, err
	}
	cfg, err := f.config(data)
	if err != nil {
		return format{}, image.Config{}, classify(f.name, "reading header", err)
	}
	if cfg.Width <= 0 || cfg.Height <= 0 {
		return format{}, image.Config{}, fmt.Errorf("imageio: %s header gives %dx%d pixels: %w", f.name, cfg.Width, cfg.Height, ErrCorrupt)
	}
	if px := int64(cfg.Width) * int64(cfg.Height); px > lim.MaxPixels {
		return format{}, image.Config{}, fmt.Errorf("imageio: %s is %dx%d = %d pixels, more than the limit of %d: %w",
			f.name, cfg.Width, cfg.Height, px, lim.MaxPixels, ErrTooManyPixels)
	}
	if err := checkStructure(f.name, data); err != nil {
		return format{}, image.Config{}, err
	}
	return f, cfg, nil
}

// decodeCtx decodes data with f, checking ctx on every read the decoder makes.
func (f format) decodeCtx(ctx context.Context, data []byte) (image.Image, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("imageio: %s decoding: %w", f.name, err)
	}
	var img image.Image
	var err error
	if f.decodeReader != nil {
		img, err = f.decodeReader(&ctxReader{ctx: ctx, r: bytes.NewReader(data)})
	} else {
		img, err = f.decode(data)
	}
	if cerr := ctx.Err(); cerr != nil {
		return nil, fmt.Errorf("imageio: %s decoding: %w", f.name, cerr)
	}
	if err != nil {
		return nil, classify(f.name, "decoding", err)
	}
	return img, nil
}

// ctxReader fails reads once ctx is done. It deliberately implements only Read (no ReadByte), so that decoders
// read through their own buffers in blocks and the check runs every few kB rather than every byte.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c *ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
