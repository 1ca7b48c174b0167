package imageio

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"fmt"
	"io"
	"sort"
)

// meta is what Decode keeps besides the pixels.
type meta struct {
	icc         []byte
	exif        []byte // the EXIF TIFF structure as found in the file (a slice of it), not yet normalised
	xmp         []byte // the XMP packet as found in the file, not yet normalised
	orientation int    // EXIF/TIFF orientation 1-8
	frames      int
}

// iccSpace returns the data colour space of the profile ("RGB ", "GRAY", "CMYK", ...) from its header.
func (m meta) iccSpace() string { return iccColorSpace(m.icc) }

func iccColorSpace(icc []byte) string {
	if len(icc) < 20 {
		return ""
	}
	return string(icc[16:20])
}

// readMeta extracts the profile, EXIF, XMP, orientation and frame count. Malformed metadata is ignored rather
// than refused, as viewers do, except where it makes the file unusable (animated WebP, an ICC profile that
// inflates without bound).
func readMeta(formatName string, data []byte) (meta, error) {
	m := meta{orientation: 1, frames: 1}
	var err error
	switch formatName {
	case "jpeg":
		m = jpegMeta(data)
	case "png":
		m.icc, m.exif, m.xmp, err = pngMeta(data)
	case "gif":
		m.frames, err = gifFrames(data)
	case "webp":
		m.icc, m.exif, m.xmp, err = webpMeta(data)
	case "tiff":
		m.orientation, m.icc = tiffMeta(data, true)
	}
	if m.orientation < 1 || m.orientation > 8 {
		m.orientation = 1
	}
	return m, err
}

// jpegMeta walks the marker segments before the first scan: the first APP1 "Exif" for the EXIF and its
// orientation, the first APP1 XMP packet (not the segments of extended XMP), and APP2
// "ICC_PROFILE" chunks (a profile over 64 kB is split across several, numbered from 1) for the profile.
func jpegMeta(data []byte) meta {
	m := meta{orientation: 1, frames: 1}
	type chunk struct {
		seq  int
		data []byte
	}
	var chunks []chunk
	total := -1
	exifSeen := false
	i := 2 // after SOI
	for i+4 <= len(data) {
		if data[i] != 0xFF {
			break
		}
		marker := data[i+1]
		if marker == 0xFF { // fill byte
			i++
			continue
		}
		if marker == 0xD8 || marker == 0x01 || (marker >= 0xD0 && marker <= 0xD7) {
			i += 2
			continue
		}
		if marker == 0xDA || marker == 0xD9 { // start of scan or end of image: no more metadata
			break
		}
		n := int(binary.BigEndian.Uint16(data[i+2:]))
		if n < 2 || i+2+n > len(data) {
			break
		}
		seg := data[i+4 : i+2+n]
		switch {
		case marker == 0xE1 && !exifSeen && bytes.HasPrefix(seg, []byte("Exif\x00\x00")):
			exifSeen = true
			m.exif = seg[len(exifHeader):]
			m.orientation, _ = tiffMeta(m.exif, false)
		case marker == 0xE1 && m.xmp == nil && bytes.HasPrefix(seg, []byte(xmpJPEGHeader)):
			m.xmp = seg[len(xmpJPEGHeader):]
		case marker == 0xE2 && bytes.HasPrefix(seg, []byte("ICC_PROFILE\x00")) && len(seg) >= 14:
			seq, count := int(seg[12]), int(seg[13])
			if total == -1 {
				total = count
			}
			if count == total && seq >= 1 && seq <= count {
				chunks = append(chunks, chunk{seq, seg[14:]})
			}
		}
		i += 2 + n
	}
	if total > 0 && len(chunks) == total {
		sort.Slice(chunks, func(a, b int) bool { return chunks[a].seq < chunks[b].seq })
		var icc []byte
		for k, c := range chunks {
			if c.seq != k+1 { // a duplicate or missing chunk: the profile cannot be trusted
				return m
			}
			icc = append(icc, c.data...)
		}
		m.icc = icc
	}
	return m
}

// tiffMeta reads IFD0 of a TIFF structure (a TIFF file, or the payload of a JPEG Exif segment) and returns the
// Orientation tag (0x0112) and, when wantICC, the InterColorProfile tag (34675).
func tiffMeta(t []byte, wantICC bool) (orientation int, icc []byte) {
	orientation = 1
	if len(t) < 8 {
		return
	}
	var bo binary.ByteOrder
	switch string(t[:2]) {
	case "II":
		bo = binary.LittleEndian
	case "MM":
		bo = binary.BigEndian
	default:
		return
	}
	off := int64(bo.Uint32(t[4:]))
	if off < 8 || off+2 > int64(len(t)) {
		return
	}
	n := int64(bo.Uint16(t[off:]))
	for k := int64(0); k < n; k++ {
		e := off + 2 + 12*k
		if e+12 > int64(len(t)) {
			break
		}
		tag, typ, count := bo.Uint16(t[e:]), bo.Uint16(t[e+2:]), int64(bo.Uint32(t[e+4:]))
		switch {
		case tag == 0x0112 && typ == 3 && count >= 1: // SHORT
			orientation = int(bo.Uint16(t[e+8:]))
		case tag == 34675 && wantICC && (typ == 7 || typ == 1) && count > 4: // UNDEFINED or BYTE, stored at offset
			p := int64(bo.Uint32(t[e+8:]))
			if p >= 0 && p+count <= int64(len(t)) && count <= maxICCBytes {
				icc = append([]byte(nil), t[p:p+count]...)
			}
		}
	}
	return
}

// pngMeta returns the decompressed profile of the iCCP chunk and the body of the eXIf chunk, if any (both must
// precede the image data; an eXIf after it is not read, as browsers do not read it either), and the packet of
// the first XMP iTXt chunk, before or after the image data (writers put it either side, and its readers look
// at both).
func pngMeta(data []byte) (icc, exif, xmp []byte, err error) {
	pastData := false
	i := 8
	for i+12 <= len(data) {
		n := int(binary.BigEndian.Uint32(data[i:]))
		typ := string(data[i+4 : i+8])
		if n < 0 || n > len(data)-i-12 {
			return icc, exif, xmp, nil // truncated: the pixel decoder will report it
		}
		body := data[i+8 : i+8+n]
		switch typ {
		case "iCCP":
			if icc != nil || pastData {
				break
			}
			if icc, err = inflateICCP(body); err != nil {
				return nil, nil, nil, err
			}
		case "eXIf":
			if exif == nil && !pastData {
				exif = trimEXIFHeader(body)
			}
		case "iTXt":
			if xmp == nil {
				xmp = pngXMP(body)
			}
		case "IDAT":
			pastData = true
		case "IEND":
			return icc, exif, xmp, nil
		}
		i += 12 + n
	}
	return icc, exif, xmp, nil
}

// inflateICCP returns the profile of an iCCP chunk's body; nil when it is malformed, and an error when it
// inflates beyond maxICCBytes.
func inflateICCP(body []byte) ([]byte, error) {
	name := bytes.IndexByte(body, 0)
	if name < 1 || name+2 > len(body) || body[name+1] != 0 {
		return nil, nil
	}
	zr, err := zlib.NewReader(bytes.NewReader(body[name+2:]))
	if err != nil {
		return nil, nil
	}
	icc, err := io.ReadAll(io.LimitReader(zr, maxICCBytes+1))
	if err != nil {
		return nil, nil
	}
	if len(icc) > maxICCBytes {
		return nil, fmt.Errorf("imageio: png ICC profile inflates beyond %d bytes: %w", maxICCBytes, ErrCorrupt)
	}
	return icc, nil
}

// webpMeta returns the ICCP, EXIF and "XMP " chunks of an extended WebP, and refuses animations, which the decoder
// cannot read.
func webpMeta(data []byte) (icc, exif, xmp []byte, err error) {
	i := 12
	for i+8 <= len(data) {
		id := string(data[i : i+4])
		n := int(binary.LittleEndian.Uint32(data[i+4:]))
		if n < 0 || n > len(data)-i-8 {
			break
		}
		body := data[i+8 : i+8+n]
		switch id {
		case "VP8X":
			if len(body) >= 1 && body[0]&0x02 != 0 {
				return nil, nil, nil, fmt.Errorf("imageio: animated WebP is not supported: %w", ErrUnsupportedFormat)
			}
		case "ICCP":
			if n <= maxICCBytes {
				icc = append([]byte(nil), body...)
			}
		case "EXIF":
			if exif == nil {
				exif = trimEXIFHeader(body)
			}
		case "XMP ":
			if xmp == nil {
				xmp = body
			}
		case "ANIM", "ANMF":
			return nil, nil, nil, fmt.Errorf("imageio: animated WebP is not supported: %w", ErrUnsupportedFormat)
		}
		i += 8 + n + n&1 // chunks are padded to an even size
	}
	return icc, exif, xmp, nil
}

// gifFrames counts the image descriptors of a GIF without decoding them.
func gifFrames(data []byte) (int, error) {
	if len(data) < 13 {
		return 1, nil
	}
	i := 13
	if data[10]&0x80 != 0 { // global colour table
		i += 3 << (int(data[10]&7) + 1)
	}
	frames := 0
	skipSubBlocks := func(i int) int {
		for i < len(data) {
			n := int(data[i])
			i++
			if n == 0 {
				return i
			}
			i += n
		}
		return len(data)
	}
	for i < len(data) {
		switch data[i] {
		case 0x21: // extension: label, then sub-blocks
			i = skipSubBlocks(i + 2)
		case 0x2C: // image descriptor
			frames++
			if frames > MaxGIFFrames {
				return frames, fmt.Errorf("imageio: gif has more than %d frames: %w", MaxGIFFrames, ErrTooComplex)
			}
			if i+10 > len(data) {
				return frames, nil
			}
			flags := data[i+9]
			i += 10
			if flags&0x80 != 0 { // local colour table
				i += 3 << (int(flags&7) + 1)
			}
			i = skipSubBlocks(i + 1) // LZW minimum code size, then data sub-blocks
		default: // trailer (0x3B) or garbage: stop counting
			if frames == 0 {
				frames = 1
			}
			return frames, nil
		}
	}
	if frames == 0 {
		frames = 1
	}
	return frames, nil
}
