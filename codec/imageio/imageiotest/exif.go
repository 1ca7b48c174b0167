package imageiotest

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// IFD is one directory of a TIFF structure that TIFF builds. Entries are written in the order given (TIFF wants
// them sorted by tag; readers do not rely on it and a test may want them otherwise).
type IFD struct {
	Entries []Entry
	Next    *IFD // the next IFD in the chain (IFD0's next is IFD1, the thumbnail's)
}

// Entry is one field. Exactly one of the value fields is set; Type and Count follow from it.
type Entry struct {
	Tag       uint16
	ASCII     string      // ASCII, NUL-terminated by TIFF
	Bytes     []byte      // BYTE
	Undefined []byte      // UNDEFINED
	Shorts    []uint16    // SHORT
	Longs     []uint32    // LONG
	Rationals [][2]uint32 // RATIONAL (numerator, denominator)
	Sub       *IFD        // LONG: the offset of this IFD (Exif, GPS, Interoperability pointers)
	Blob      []byte      // LONG: the offset of these bytes, written after the IFD's values (a thumbnail)
}

func (e Entry) typeCount() (typ uint16, count uint32, size int) {
	switch {
	case e.ASCII != "":
		return 2, uint32(len(e.ASCII) + 1), len(e.ASCII) + 1
	case e.Bytes != nil:
		return 1, uint32(len(e.Bytes)), len(e.Bytes)
	case e.Undefined != nil:
		return 7, uint32(len(e.Undefined)), len(e.Undefined)
	case e.Shorts != nil:
		return 3, uint32(len(e.Shorts)), 2 * len(e.Shorts)
	case e.Longs != nil:
		return 4, uint32(len(e.Longs)), 4 * len(e.Longs)
	case e.Rationals != nil:
		return 5, uint32(len(e.Rationals)), 8 * len(e.Rationals)
	}
	return 4, 1, 4 // Sub, Blob
}

// TIFF lays out ifd0 and everything it reaches as a TIFF structure (the payload of a JPEG APP1 Exif segment
// after its "Exif\0\0" header): each IFD is followed by its out-of-line values, its blobs, its sub-IFDs and
// then its next IFD. An IFD reached again (a loop, on purpose) is written once, and pointed at again.
func TIFF(bigEndian bool, ifd0 *IFD) []byte {
	var bo binary.ByteOrder = binary.LittleEndian
	head := []byte("II*\x00\x08\x00\x00\x00")
	if bigEndian {
		bo = binary.BigEndian
		head = []byte("MM\x00*\x00\x00\x00\x08")
	}
	// Pass 1: offsets.
	ifdOff := map[*IFD]int{}
	blobOff := map[*Entry]int{}
	valOff := map[*Entry]int{}
	end := 8
	var place func(d *IFD)
	place = func(d *IFD) {
		if _, done := ifdOff[d]; done {
			return
		}
		ifdOff[d] = end
		end += 2 + 12*len(d.Entries) + 4
		for i := range d.Entries {
			e := &d.Entries[i]
			if _, _, size := e.typeCount(); size > 4 {
				valOff[e] = end
				end += size + size&1
			}
			if e.Blob != nil {
				blobOff[e] = end
				end += len(e.Blob) + len(e.Blob)&1
			}
		}
		for i := range d.Entries {
			if s := d.Entries[i].Sub; s != nil {
				place(s)
			}
		}
		if d.Next != nil {
			place(d.Next)
		}
	}
	place(ifd0)
	// Pass 2: bytes.
	out := make([]byte, end)
	copy(out, head)
	written := map[*IFD]bool{}
	var write func(d *IFD)
	write = func(d *IFD) {
		if written[d] {
			return
		}
		written[d] = true
		p := ifdOff[d]
		bo.PutUint16(out[p:], uint16(len(d.Entries)))
		for i := range d.Entries {
			e := &d.Entries[i]
			q := p + 2 + 12*i
			typ, count, size := e.typeCount()
			bo.PutUint16(out[q:], e.Tag)
			bo.PutUint16(out[q+2:], typ)
			bo.PutUint32(out[q+4:], count)
			val := out[q+8 : q+12]
			if size > 4 {
				bo.PutUint32(val, uint32(valOff[e]))
				val = out[valOff[e] : valOff[e]+size]
			}
			switch {
			case e.ASCII != "":
				copy(val, e.ASCII)
			case e.Bytes != nil:
				copy(val, e.Bytes)
			case e.Undefined != nil:
				copy(val, e.Undefined)
			case e.Shorts != nil:
				for k, v := range e.Shorts {
					bo.PutUint16(val[2*k:], v)
				}
			case e.Longs != nil:
				for k, v := range e.Longs {
					bo.PutUint32(val[4*k:], v)
				}
			case e.Rationals != nil:
				for k, v := range e.Rationals {
					bo.PutUint32(val[8*k:], v[0])
					bo.PutUint32(val[8*k+4:], v[1])
				}
			case e.Sub != nil:
				bo.PutUint32(val, uint32(ifdOff[e.Sub]))
				write(e.Sub)
			case e.Blob != nil:
				bo.PutUint32(val, uint32(blobOff[e]))
				copy(out[blobOff[e]:], e.Blob)
			}
		}
		if d.Next != nil {
			bo.PutUint32(out[p+2+12*len(d.Entries):], uint32(ifdOff[d.Next]))
			write(d.Next)
		}
	}
	write(ifd0)
	return out
}

// Camera describes the EXIF a camera writes, as CameraEXIF builds it.
type Camera struct {
	BigEndian        bool
	Orientation      uint16
	Make, Model      string
	DateTimeOriginal string       // "YYYY:MM:DD HH:MM:SS"
	GPSLatitude      [3][2]uint32 // degrees, minutes, seconds as rationals; north
	PixelX, PixelY   uint32       // PixelXDimension (LONG) and PixelYDimension (SHORT); 0: absent
	MakerNote        []byte       // UNDEFINED bytes in the Exif IFD; nil: absent
	Thumbnail        []byte       // IFD1's JPEG thumbnail; nil: no IFD1
}

// CameraEXIF returns the TIFF structure of c: IFD0 (Make, Model, Orientation, Exif and GPS pointers), the Exif
// IFD (DateTimeOriginal, pixel dimensions, MakerNote), the GPS IFD (version, latitude) and, with a thumbnail,
// IFD1 (JPEG compression, JPEGInterchangeFormat and its length).
func CameraEXIF(c Camera) []byte {
	ascii := func(d *IFD, tag uint16, s string) {
		if s != "" {
			d.Entries = append(d.Entries, Entry{Tag: tag, ASCII: s})
		}
	}
	exif := &IFD{}
	ascii(exif, 0x9003, c.DateTimeOriginal)
	if c.PixelX != 0 {
		exif.Entries = append(exif.Entries, Entry{Tag: 0xA002, Longs: []uint32{c.PixelX}},
			Entry{Tag: 0xA003, Shorts: []uint16{uint16(c.PixelY)}})
	}
	if c.MakerNote != nil {
		exif.Entries = append(exif.Entries, Entry{Tag: 0x927C, Undefined: c.MakerNote})
	}
	gps := &IFD{Entries: []Entry{
		{Tag: 0x0000, Bytes: []byte{2, 3, 0, 0}},
		{Tag: 0x0001, ASCII: "N"},
		{Tag: 0x0002, Rationals: c.GPSLatitude[:]},
	}}
	ifd0 := &IFD{}
	ascii(ifd0, 0x010F, c.Make)
	ascii(ifd0, 0x0110, c.Model)
	ifd0.Entries = append(ifd0.Entries, Entry{Tag: 0x0112, Shorts: []uint16{c.Orientation}},
		Entry{Tag: 0x8769, Sub: exif}, Entry{Tag: 0x8825, Sub: gps})
	if c.Thumbnail != nil {
		ifd0.Next = &IFD{Entries: []Entry{
			{Tag: 0x0103, Shorts: []uint16{6}},
			{Tag: 0x0201, Blob: c.Thumbnail},
			{Tag: 0x0202, Longs: []uint32{uint32(len(c.Thumbnail))}},
		}}
	}
	return TIFF(c.BigEndian, ifd0)
}

// EXIFField is one field as ReadEXIF reports it: its type, count and value bytes (in the file's byte order).
type EXIFField struct {
	Type  uint16
	Count uint32
	Value []byte
}

// EXIFInfo is what ReadEXIF finds: the fields of IFD0, the Exif IFD and the GPS IFD, keyed by tag, and IFD0's
// next-IFD offset (0: no IFD1).
type EXIFInfo struct {
	BigEndian       bool
	IFD0, Exif, GPS map[uint16]EXIFField
	NextIFD         uint32
}

// Uint returns the first value of an integer field (BYTE, SHORT or LONG), and false when it is absent or not one.
func (i EXIFInfo) Uint(ifd map[uint16]EXIFField, tag uint16) (uint32, bool) {
	f, ok := ifd[tag]
	if !ok || f.Count < 1 {
		return 0, false
	}
	var bo binary.ByteOrder = binary.LittleEndian
	if i.BigEndian {
		bo = binary.BigEndian
	}
	switch f.Type {
	case 1:
		return uint32(f.Value[0]), true
	case 3:
		return uint32(bo.Uint16(f.Value)), true
	case 4:
		return bo.Uint32(f.Value), true
	}
	return 0, false
}

// String returns an ASCII field without its terminating NUL.
func (i EXIFInfo) String(ifd map[uint16]EXIFField, tag uint16) string {
	return string(bytes.TrimRight(ifd[tag].Value, "\x00"))
}

// ReadEXIF parses a TIFF structure independently of the code under test. It is strict: any offset outside the
// structure is an error.
func ReadEXIF(t []byte) (EXIFInfo, error) {
	var info EXIFInfo
	if len(t) < 8 {
		return info, fmt.Errorf("EXIF of %d bytes", len(t))
	}
	var bo binary.ByteOrder
	switch string(t[:4]) {
	case "II*\x00":
		bo = binary.LittleEndian
	case "MM\x00*":
		bo, info.BigEndian = binary.BigEndian, true
	default:
		return info, fmt.Errorf("EXIF header %q", t[:4])
	}
	sizes := map[uint16]int{1: 1, 2: 1, 3: 2, 4: 4, 5: 8, 7: 1, 9: 4, 10: 8}
	read := func(off uint32) (map[uint16]EXIFField, uint32, error) {
		if int(off)+2 > len(t) {
			return nil, 0, fmt.Errorf("IFD at %d outside %d bytes", off, len(t))
		}
		n := int(bo.Uint16(t[off:]))
		if int(off)+2+12*n+4 > len(t) {
			return nil, 0, fmt.Errorf("IFD at %d with %d entries outside %d bytes", off, n, len(t))
		}
		m := map[uint16]EXIFField{}
		for k := 0; k < n; k++ {
			e := t[int(off)+2+12*k:]
			f := EXIFField{Type: bo.Uint16(e[2:]), Count: bo.Uint32(e[4:])}
			size := sizes[f.Type] * int(f.Count)
			f.Value = e[8:12]
			if size > 4 {
				p := int(bo.Uint32(e[8:]))
				if p+size > len(t) {
					return nil, 0, fmt.Errorf("tag %#x: value at %d+%d outside %d bytes", bo.Uint16(e), p, size, len(t))
				}
				f.Value = t[p : p+size]
			}
			m[bo.Uint16(e)] = f
		}
		return m, bo.Uint32(t[int(off)+2+12*n:]), nil
	}
	var err error
	if info.IFD0, info.NextIFD, err = read(bo.Uint32(t[4:])); err != nil {
		return info, err
	}
	for tag, dst := range map[uint16]*map[uint16]EXIFField{0x8769: &info.Exif, 0x8825: &info.GPS} {
		if p, ok := info.Uint(info.IFD0, tag); ok {
			if *dst, _, err = read(p); err != nil {
				return info, err
			}
		}
	}
	return info, nil
}

// EXIFOf returns the EXIF payload of a JPEG (first APP1 "Exif" segment, without its header), PNG (eXIf chunk)
// or WebP (EXIF chunk) file as it is stored, nil when there is none.
func EXIFOf(file []byte) []byte {
	var exif []byte
	MetadataBlocks(file, func(kind string, body []byte) bool {
		switch kind {
		case "APP1":
			if rest, ok := bytes.CutPrefix(body, []byte("Exif\x00\x00")); ok {
				exif = rest
				return false
			}
		case "eXIf", "EXIF":
			exif = body
			return false
		}
		return true
	})
	return exif
}

// MetadataBlocks calls yield with each block of a JPEG (each marker segment before the scan: kind "APP1",
// "APP2", ... for APPn, else the marker in hex, the payload after the length), PNG (each chunk: its type and
// data) or WebP (each RIFF chunk: its FourCC and data) file, in order, until yield returns false or the
// structure ends or breaks off.
func MetadataBlocks(file []byte, yield func(kind string, body []byte) bool) {
	switch {
	case bytes.HasPrefix(file, []byte{0xFF, 0xD8}):
		for i := 2; i+4 <= len(file) && file[i] == 0xFF && file[i+1] != 0xDA; {
			n := int(binary.BigEndian.Uint16(file[i+2:]))
			if n < 2 || i+2+n > len(file) {
				return
			}
			kind := fmt.Sprintf("%02X", file[i+1])
			if file[i+1] >= 0xE0 && file[i+1] <= 0xEF {
				kind = fmt.Sprintf("APP%d", file[i+1]-0xE0)
			}
			if !yield(kind, file[i+4:i+2+n]) {
				return
			}
			i += 2 + n
		}
	case bytes.HasPrefix(file, []byte("\x89PNG\r\n\x1a\n")):
		for i := 8; i+12 <= len(file); {
			n := int(binary.BigEndian.Uint32(file[i:]))
			if n < 0 || i+12+n > len(file) {
				return
			}
			if !yield(string(file[i+4:i+8]), file[i+8:i+8+n]) {
				return
			}
			i += 12 + n
		}
	case len(file) >= 12 && string(file[:4]) == "RIFF" && string(file[8:12]) == "WEBP":
		for i := 12; i+8 <= len(file); {
			n := int(binary.LittleEndian.Uint32(file[i+4:]))
			if i+8+n > len(file) {
				return
			}
			if !yield(string(file[i:i+4]), file[i+8:i+8+n]) {
				return
			}
			i += 8 + n + n&1
		}
	}
}
