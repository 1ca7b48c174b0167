package imageio

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
)

// Structure limits, checked on the whole file before any pixel is decoded. Each bounds a cost that the pixel
// count alone does not: Go's JPEG decoder runs every scan over the whole coefficient buffer, so a small
// progressive file repeating its scans thousands of times costs minutes of CPU; the other formats are walked
// chunk by chunk, and a bounded chain keeps that walk (and a looping IFD chain) cheap.
const (
	// MaxJPEGScans: progressive encoders write 10 scans (libjpeg's default script) to about 20 (tuned
	// scripts); baseline files have one per component at most. 100 leaves ample headroom.
	MaxJPEGScans = 100
	// MaxPNGChunks counts every chunk, IDAT included; libpng writes 8 kB IDAT chunks, so a 192 MB file holds
	// about 24,000 of them.
	MaxPNGChunks = 100_000
	// MaxPNGAncillaryBytes bounds the ancillary chunks (text, profiles, private data) that the decoder reads and
	// discards.
	MaxPNGAncillaryBytes = 16 << 20
	// MaxTIFFIFDs bounds the IFD chain of a TIFF (pages, thumbnails); only the first image is decoded.
	MaxTIFFIFDs = 1024
	// MaxGIFFrames bounds the frames of an animated GIF; only the first is decoded, the others are counted.
	MaxGIFFrames = 10_000
)

// ErrTooComplex: the file's structure exceeds a structure limit (too many JPEG scans, PNG chunks, TIFF IFDs or
// GIF frames). The HTTP layer maps it to 422 image_too_complex.
var ErrTooComplex = errors.New("image structure exceeds the limits")

// checkStructure walks the container of a whole file and refuses it when it exceeds a structure limit.
// Malformed structure is left for the pixel decoder to report, with its own message.
func checkStructure(formatName string, data []byte) error {
	switch formatName {
	case "jpeg":
		info := walkJPEG(data, MaxJPEGScans)
		if info.scans > MaxJPEGScans {
			return fmt.Errorf("imageio: jpeg has more than %d scans: %w", MaxJPEGScans, ErrTooComplex)
		}
	case "png":
		return checkPNGChunks(data)
	case "gif":
		_, err := gifFrames(data) // refuses past MaxGIFFrames
		return err
	case "tiff":
		if n := tiffIFDCount(data, MaxTIFFIFDs); n > MaxTIFFIFDs {
			return fmt.Errorf("imageio: tiff has more than %d IFDs: %w", MaxTIFFIFDs, ErrTooComplex)
		}
	}
	return nil
}

// jpegComponent is one component of a JPEG frame header: its horizontal and vertical sampling factors.
type jpegComponent struct{ h, v int }

// jpegInfo is what the marker walk learned.
type jpegInfo struct {
	sof         bool // a frame header was found
	progressive bool
	comps       []jpegComponent
	scans       int
}

// walkJPEG visits the marker segments of a JPEG the way image/jpeg does (junk before a marker is skipped, fill
// bytes and stuffed zero bytes are not markers, restart markers have no length), which also skips the
// entropy-coded data of each scan, and counts the scans. It stops past maxScans scans, at EOI, or at the end
// of data. It reads no more than the data, so it works on a file's head too.
func walkJPEG(data []byte, maxScans int) jpegInfo {
	var info jpegInfo
	i := 2 // after SOI
	for i < len(data) {
		// Entropy-coded data is most of a file; IndexByte skips it many bytes at a time.
		if k := bytes.IndexByte(data[i:], 0xFF); k >= 0 {
			i += k
		} else {
			i = len(data)
		}
		for i < len(data) && data[i] == 0xFF {
			i++
		}
		if i >= len(data) {
			break
		}
		m := data[i]
		i++
		switch {
		case m == 0x00, m == 0x01, m == 0xD8, m >= 0xD0 && m <= 0xD7:
			continue // a stuffed byte of entropy data, TEM, SOI, or a restart marker: no segment
		case m == 0xD9:
			return info
		}
		if i+2 > len(data) {
			break
		}
		n := int(binary.BigEndian.Uint16(data[i:]))
		if n < 2 {
			break
		}
		seg := data[i+2 : min(i+n, len(data))]
		switch {
		case m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC:
			if !info.sof && len(seg) >= 6 {
				info.sof = true
				info.progressive = m == 0xC2 || m == 0xC6 || m == 0xCA || m == 0xCE
				nc := int(seg[5])
				for k := 0; k < nc && 6+3*k+2 < len(seg); k++ {
					s := seg[6+3*k+1]
					info.comps = append(info.comps, jpegComponent{h: max(1, int(s>>4)), v: max(1, int(s&15))})
				}
			}
		case m == 0xDA:
			info.scans++
			if info.scans > maxScans {
				return info
			}
		}
		i += n
	}
	return info
}

// checkPNGChunks walks the chunks of a PNG up to IEND.
func checkPNGChunks(data []byte) error {
	chunks, ancillary := 0, 0
	for i := 8; i+12 <= len(data); {
		n := int(binary.BigEndian.Uint32(data[i:]))
		if n < 0 || n > len(data)-i-12 {
			return nil // truncated: the pixel decoder reports it
		}
		typ := data[i+4 : i+8]
		chunks++
		if chunks > MaxPNGChunks {
			return fmt.Errorf("imageio: png has more than %d chunks: %w", MaxPNGChunks, ErrTooComplex)
		}
		if typ[0]&0x20 != 0 { // lower-case first letter: ancillary
			ancillary += n
			if ancillary > MaxPNGAncillaryBytes {
				return fmt.Errorf("imageio: png ancillary chunks exceed %d bytes: %w", MaxPNGAncillaryBytes, ErrTooComplex)
			}
		}
		if string(typ) == "IEND" {
			return nil
		}
		i += 12 + n
	}
	return nil
}

// tiffIFDCount follows the IFD chain of a TIFF and returns its length, stopping past limit (a chain that loops
// back counts as endless).
func tiffIFDCount(t []byte, limit int) int {
	if len(t) < 8 {
		return 0
	}
	var bo binary.ByteOrder = binary.LittleEndian
	if t[0] == 'M' {
		bo = binary.BigEndian
	}
	seen := make(map[uint32]bool)
	off := bo.Uint32(t[4:])
	count := 0
	for off >= 8 && int64(off)+2 <= int64(len(t)) {
		if seen[off] {
			return limit + 1
		}
		seen[off] = true
		count++
		if count > limit {
			return count
		}
		n := int64(bo.Uint16(t[off:]))
		next := int64(off) + 2 + 12*n
		if next+4 > int64(len(t)) {
			break
		}
		off = bo.Uint32(t[next:])
	}
	return count
}
