package imageio

import (
	"bufio"
	"compress/zlib"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
)

// PNGRowsFit reports whether EncodePNGRows can write a file with this ICC profile: not when the profile is a
// GRAY one, which EncodePNG may write as a grayscale PNG (and the rows are RGB).
func PNGRowsFit(icc []byte) bool { return iccColorSpace(icc) != "GRAY" }

// EncodePNGRows writes an 8-bit PNG of width×height pixels, RGB (alpha false) or RGBA, from rows that are
// already filtered (per row a filter-type byte and the row's bytes: what accel.PNGFilter gives). With the rows
// image/png's encoder would filter for the same image, the file is byte for byte the one EncodePNG writes:
// the same header, iCCP chunk, zlib level and 32 KiB IDAT chunks. Callers check PNGRowsFit first.
func EncodePNGRows(w io.Writer, width, height int, alpha bool, rows []byte, icc []byte) error {
	bpp := 3
	if alpha {
		bpp = 4
	}
	if width <= 0 || height <= 0 || len(rows) != height*(1+bpp*width) {
		return fmt.Errorf("imageio: encoding PNG rows: %d bytes for %dx%d pixels of %d bytes", len(rows), width,
			height, bpp)
	}
	if !PNGRowsFit(icc) {
		return errors.New("imageio: encoding PNG rows: a GRAY profile needs EncodePNG")
	}
	if iccColorSpace(icc) != "RGB " {
		icc = nil // EncodePNG drops a profile whose colour space does not match RGB
	}
	cw := &chunkWriter{w: w}
	if _, err := w.Write([]byte("\x89PNG\r\n\x1a\n")); err != nil {
		return fmt.Errorf("imageio: encoding PNG: %w", err)
	}
	ihdr := make([]byte, 13)
	binary.BigEndian.PutUint32(ihdr[0:], uint32(width))
	binary.BigEndian.PutUint32(ihdr[4:], uint32(height))
	ihdr[8], ihdr[9] = 8, 2
	if alpha {
		ihdr[9] = 6
	}
	cw.chunk(ihdr, "IHDR")
	if len(icc) > 0 {
		chunk, err := iccpChunk(icc)
		if err != nil {
			return err
		}
		if _, err := w.Write(chunk); err != nil {
			return fmt.Errorf("imageio: encoding PNG: %w", err)
		}
	}
	bw := bufio.NewWriterSize(idatWriter{cw}, 1<<15)
	zw, err := zlib.NewWriterLevel(bw, zlib.BestSpeed)
	if err != nil {
		return err
	}
	if _, err := zw.Write(rows); err != nil {
		return fmt.Errorf("imageio: encoding PNG: %w", err)
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("imageio: encoding PNG: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("imageio: encoding PNG: %w", err)
	}
	cw.chunk(nil, "IEND")
	if cw.err != nil {
		return fmt.Errorf("imageio: encoding PNG: %w", cw.err)
	}
	return nil
}

// chunkWriter writes PNG chunks (length, type, data, CRC) and keeps the first error.
type chunkWriter struct {
	w   io.Writer
	err error
}

func (c *chunkWriter) chunk(b []byte, name string) {
	if c.err != nil {
		return
	}
	head := binary.BigEndian.AppendUint32(make([]byte, 0, 8), uint32(len(b)))
	head = append(head, name...)
	crc := crc32.NewIEEE()
	crc.Write(head[4:])
	crc.Write(b)
	if _, c.err = c.w.Write(head); c.err != nil {
		return
	}
	if _, c.err = c.w.Write(b); c.err != nil {
		return
	}
	_, c.err = c.w.Write(binary.BigEndian.AppendUint32(nil, crc.Sum32()))
}

// idatWriter writes each Write as one IDAT chunk.
type idatWriter struct{ c *chunkWriter }

func (i idatWriter) Write(b []byte) (int, error) {
	i.c.chunk(b, "IDAT")
	if i.c.err != nil {
		return 0, i.c.err
	}
	return len(b), nil
}
