package imageio

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
)

// EXIF carried from the input to the output.
//
// The input's EXIF is a TIFF structure (byte order, IFD0 with the camera's Make and Model, sub-IFDs for the
// Exif and GPS fields, IFD1 with a thumbnail). It is read from a JPEG's first APP1 "Exif" segment, a PNG eXIf
// chunk or a WebP EXIF chunk (never from a TIFF file, whose IFD0 describes the TIFF image itself), made true of
// the output by normalizeEXIF and written back by every encoder (JPEG APP1, PNG eXIf, WebP EXIF).
//
// normalizeEXIF patches the bytes in place and never re-serialises them: MakerNotes (opaque to us) hold
// offsets counted from the start of the TIFF structure, so moving anything would corrupt them. It changes only:
//   - Orientation (IFD0) to 1: the decoder has turned the pixels upright (PNG and WebP EXIF orientation is not
//     applied to the pixels, see the package doc; 1 then says "as stored", which every viewer agrees on);
//   - ImageWidth/ImageLength (IFD0) and PixelXDimension/PixelYDimension (Exif IFD), when present, to the size of
//     the upright output;
//   - the thumbnail: IFD1 (and any IFD chained after it) holds an unmarked, small copy of the picture, which
//     would ship the original beside the marked image. IFD0's next-IFD offset is set to 0 and the bytes of every
//     JPEG thumbnail, strip or tile those IFDs point at are zeroed; so is any other embedded JPEG stream (the
//     previews some MakerNotes hold), found by its SOI marker.
//
// Anything structurally wrong (an unknown byte order, an offset or count outside the blob, an IFD reached twice
// or sharing bytes with another (a patch of one would change the other), more than maxEXIFEntries entries,
// more than maxEXIFIFDs IFDs or deeper than maxEXIFDepth, a SubIFDs tag, whose image IFDs we do not scrub)
// drops the EXIF: bad metadata never fails an embed, and a blob we could not check is never shipped. The result
// is checked again after patching.

// MaxEXIFBytes is the largest EXIF (TIFF structure) kept: what fits one JPEG APP1 segment behind its
// "Exif\0\0" header (65533 bytes of payload). Larger EXIF is dropped for every output format, so a PNG, JPEG or
// WebP of the same input carry the same EXIF.
const MaxEXIFBytes = 65533 - len(exifHeader)

// exifHeader precedes the TIFF structure in a JPEG APP1 segment (and, against the specifications, in some PNG
// and WebP writers' chunks).
const exifHeader = "Exif\x00\x00"

// Bounds of the work normalizeEXIF does. Cameras write a few dozen entries per IFD and 4 to 6 IFDs, 3 deep at
// most (IFD0, Exif IFD, Interoperability IFD).
const (
	maxEXIFEntries = 512
	maxEXIFIFDs    = 16
	maxEXIFDepth   = 3
)

// TIFF tags normalizeEXIF reads or patches.
const (
	tagImageWidth      = 0x0100
	tagImageLength     = 0x0101
	tagStripOffsets    = 0x0111
	tagOrientation     = 0x0112
	tagStripByteCounts = 0x0117
	tagTileOffsets     = 0x0144
	tagTileByteCounts  = 0x0145
	tagSubIFDs         = 0x014A
	tagJPEGOffset      = 0x0201
	tagJPEGLength      = 0x0202
	tagExifIFD         = 0x8769
	tagGPSIFD          = 0x8825
	tagInteropIFD      = 0xA005
	tagPixelXDimension = 0xA002
	tagPixelYDimension = 0xA003
)

// TIFF field types normalizeEXIF writes.
const (
	typeShort = 3
	typeLong  = 4
	typeIFD   = 13
)

var errBadEXIF = errors.New("malformed EXIF")

// tiffTypeSize is the size in bytes of one value of a TIFF field type; 0 for a type we do not know (its value
// is left alone and not bounds-checked, as TIFF readers skip such fields).
func tiffTypeSize(typ uint16) int64 {
	switch typ {
	case 1, 2, 6, 7: // BYTE, ASCII, SBYTE, UNDEFINED
		return 1
	case 3, 8: // SHORT, SSHORT
		return 2
	case 4, 9, 11, 13: // LONG, SLONG, FLOAT, IFD
		return 4
	case 5, 10, 12: // RATIONAL, SRATIONAL, DOUBLE
		return 8
	}
	return 0
}

// exifEntry is one 12-byte directory entry at pos in the blob.
type exifEntry struct {
	pos   int
	tag   uint16
	typ   uint16
	count int64
}

// exifIFD is one directory: its entries, and where its next-IFD offset is stored.
type exifIFD struct {
	off     int // where the directory starts; it ends at nextPos+4
	entries []exifEntry
	nextPos int
	depth   int
	via     uint16 // the tag that points at it (tagExifIFD, ...); 0 for IFD0 and the IFDs chained after it
	image   bool   // IFD1 or later in IFD0's chain, or below one: describes a thumbnail
}

// exifWalk reads the IFD tree of a TIFF structure and checks it.
type exifWalk struct {
	b       []byte
	bo      binary.ByteOrder
	ifds    []exifIFD
	visited map[int64]bool
}

// parseEXIF walks IFD0, its Exif, GPS and Interoperability sub-IFDs and IFD0's chain of next IFDs.
func parseEXIF(b []byte) (*exifWalk, error) {
	if len(b) < 8 {
		return nil, errBadEXIF
	}
	w := &exifWalk{b: b, visited: map[int64]bool{}}
	switch string(b[:4]) {
	case "II*\x00":
		w.bo = binary.LittleEndian
	case "MM\x00*":
		w.bo = binary.BigEndian
	default:
		return nil, errBadEXIF
	}
	next := int64(w.bo.Uint32(b[4:]))
	if next == 0 {
		return nil, errBadEXIF // no IFD0
	}
	for image := false; next != 0; image = true {
		d, err := w.ifd(next, 0, 0, image)
		if err != nil {
			return nil, err
		}
		next = int64(w.bo.Uint32(b[d.nextPos:]))
	}
	return w, nil
}

// ifd reads the directory at off, which tag via points at, and the sub-IFDs it points at.
func (w *exifWalk) ifd(off int64, depth int, via uint16, image bool) (exifIFD, error) {
	if depth > maxEXIFDepth || len(w.ifds) >= maxEXIFIFDs || w.visited[off] {
		return exifIFD{}, errBadEXIF
	}
	w.visited[off] = true
	size := int64(len(w.b))
	if off < 8 || off+2 > size {
		return exifIFD{}, errBadEXIF
	}
	n := int64(w.bo.Uint16(w.b[off:]))
	if n > maxEXIFEntries || off+2+12*n+4 > size {
		return exifIFD{}, errBadEXIF
	}
	d := exifIFD{off: int(off), nextPos: int(off + 2 + 12*n), depth: depth, via: via, image: image}
	for _, o := range w.ifds { // directories that share bytes would be patched through each other
		if d.off < o.nextPos+4 && o.off < d.nextPos+4 {
			return exifIFD{}, errBadEXIF
		}
	}
	var subs []exifEntry
	for k := int64(0); k < n; k++ {
		pos := off + 2 + 12*k
		e := exifEntry{pos: int(pos), tag: w.bo.Uint16(w.b[pos:]), typ: w.bo.Uint16(w.b[pos+2:]),
			count: int64(w.bo.Uint32(w.b[pos+4:]))}
		if s := tiffTypeSize(e.typ) * e.count; s > 4 {
			if p := int64(w.bo.Uint32(w.b[pos+8:])); p+s > size {
				return exifIFD{}, errBadEXIF
			}
		}
		switch e.tag {
		case tagExifIFD, tagGPSIFD, tagInteropIFD:
			if (e.typ != typeLong && e.typ != typeIFD) || e.count != 1 {
				return exifIFD{}, errBadEXIF
			}
			subs = append(subs, e)
		case tagSubIFDs:
			return exifIFD{}, errBadEXIF
		}
		d.entries = append(d.entries, e)
	}
	w.ifds = append(w.ifds, d)
	for _, s := range subs {
		if _, err := w.ifd(int64(w.bo.Uint32(w.b[s.pos+8:])), depth+1, s.tag, image); err != nil {
			return exifIFD{}, err
		}
	}
	return d, nil
}

// value returns the i-th value of an integer (BYTE, SHORT or LONG) entry, and false for other types or an
// index past its count.
func (w *exifWalk) value(e exifEntry, i int64) (int64, bool) {
	sz := tiffTypeSize(e.typ)
	if i >= e.count || (e.typ != 1 && e.typ != typeShort && e.typ != typeLong) {
		return 0, false
	}
	p := int64(e.pos + 8)
	if sz*e.count > 4 {
		p = int64(w.bo.Uint32(w.b[p:]))
	}
	p += i * sz
	switch e.typ {
	case 1:
		return int64(w.b[p]), true
	case typeShort:
		return int64(w.bo.Uint16(w.b[p:])), true
	}
	return int64(w.bo.Uint32(w.b[p:])), true
}

// find returns the first entry of d with tag.
func (d exifIFD) find(tag uint16) (exifEntry, bool) {
	for _, e := range d.entries {
		if e.tag == tag {
			return e, true
		}
	}
	return exifEntry{}, false
}

// scrubImageData zeroes the bytes of the thumbnail, strips or tiles that d points at (clipped to the blob).
func (w *exifWalk) scrubImageData(d exifIFD) {
	zero := func(off, n int64) {
		lo, hi := max(0, min(off, int64(len(w.b)))), max(0, min(off+n, int64(len(w.b))))
		clear(w.b[lo:hi])
	}
	if o, ok := d.find(tagJPEGOffset); ok {
		if l, ok := d.find(tagJPEGLength); ok {
			off, ok1 := w.value(o, 0)
			n, ok2 := w.value(l, 0)
			if ok1 && ok2 {
				zero(off, n)
			}
		}
	}
	for _, pair := range [][2]uint16{{tagStripOffsets, tagStripByteCounts}, {tagTileOffsets, tagTileByteCounts}} {
		o, ok1 := d.find(pair[0])
		l, ok2 := d.find(pair[1])
		if !ok1 || !ok2 {
			continue
		}
		for i := int64(0); i < min(o.count, l.count, int64(len(w.b))); i++ {
			off, ok1 := w.value(o, i)
			n, ok2 := w.value(l, i)
			if ok1 && ok2 {
				zero(off, n)
			}
		}
	}
}

// setInt rewrites entry e as one SHORT (when v fits and short is true) or one LONG with value v, stored inline.
// The entry's old out-of-line value, if any, is left as unreferenced bytes.
func (w *exifWalk) setInt(e exifEntry, v int, short bool) {
	p := w.b[e.pos:]
	w.bo.PutUint32(p[4:], 1)
	clear(p[8:12])
	if short && v <= 0xFFFF {
		w.bo.PutUint16(p[2:], typeShort)
		w.bo.PutUint16(p[8:], uint16(v))
		return
	}
	w.bo.PutUint16(p[2:], typeLong)
	w.bo.PutUint32(p[8:], uint32(v))
}

// normalizeEXIF returns a patched copy of exif (a TIFF structure) that is true of an upright width×height output
// and carries no thumbnail, or nil when exif is empty, too large or malformed (see the comment at the top of
// this file).
func normalizeEXIF(exif []byte, width, height int) []byte {
	if len(exif) < 8 || len(exif) > MaxEXIFBytes {
		return nil
	}
	b := bytes.Clone(exif)
	w, err := parseEXIF(b)
	if err != nil {
		return nil
	}
	// The thumbnail first: zeroing bytes may only ever remove information, and everything is parsed again after.
	for _, d := range w.ifds {
		if d.image {
			w.scrubImageData(d)
		}
	}
	w.bo.PutUint32(b[w.ifds[0].nextPos:], 0)
	scrubEmbeddedJPEG(b)

	if w, err = parseEXIF(b); err != nil {
		return nil
	}
	for _, d := range w.ifds { // IFD0 (alone in its chain now) and its sub-IFDs
		for _, e := range d.entries {
			switch {
			case d.depth == 0 && e.tag == tagOrientation:
				w.setInt(e, 1, true)
			case d.depth == 0 && e.tag == tagImageWidth, d.via == tagExifIFD && e.tag == tagPixelXDimension:
				w.setInt(e, width, e.typ == typeShort)
			case d.depth == 0 && e.tag == tagImageLength, d.via == tagExifIFD && e.tag == tagPixelYDimension:
				w.setInt(e, height, e.typ == typeShort)
			}
		}
	}
	// Check the result as a reader will see it.
	if w, err = parseEXIF(b); err != nil || len(w.ifds) == 0 {
		return nil
	}
	for _, e := range w.ifds[0].entries {
		if v, ok := w.value(e, 0); e.tag == tagOrientation && (!ok || v != 1 || e.count != 1) {
			return nil
		}
	}
	if o, _ := tiffMeta(b, false); o != 1 {
		return nil
	}
	return b
}

// scrubEmbeddedJPEG zeroes every JPEG stream inside b, from its SOI marker (FF D8 FF) to its EOI (FF D9), or to
// the end of b when it has none. Thumbnails that no IFD points at (MakerNote previews) are found this way.
func scrubEmbeddedJPEG(b []byte) {
	for i := 0; i+3 <= len(b); {
		j := bytes.Index(b[i:], []byte{0xFF, 0xD8, 0xFF})
		if j < 0 {
			return
		}
		start := i + j
		end := len(b)
		if k := bytes.Index(b[start+3:], []byte{0xFF, 0xD9}); k >= 0 {
			end = start + 3 + k + 2
		}
		clear(b[start:end])
		i = end
	}
}

// checkEXIF returns an error for EXIF an encoder must not write: larger than MaxEXIFBytes or not a TIFF
// structure. Picture.EXIF always passes.
func checkEXIF(exif []byte) error {
	if len(exif) == 0 {
		return nil
	}
	if len(exif) > MaxEXIFBytes {
		return fmt.Errorf("imageio: EXIF of %d bytes exceeds %d", len(exif), MaxEXIFBytes)
	}
	if len(exif) < 8 || (string(exif[:4]) != "II*\x00" && string(exif[:4]) != "MM\x00*") {
		return errors.New("imageio: EXIF is not a TIFF structure")
	}
	return nil
}

// trimEXIFHeader removes the "Exif\0\0" header that some PNG and WebP writers put before the TIFF structure.
func trimEXIFHeader(b []byte) []byte {
	return bytes.TrimPrefix(b, []byte(exifHeader))
}
