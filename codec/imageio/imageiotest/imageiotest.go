// Package imageiotest builds hostile and header-only image files for the tests and benchmarks of the decode
// limits (codec/imageio, the node's HTTP tests, bench/decodebench), and EXIF (TIFF structures) and XMP packets for
// the tests of the metadata that outputs keep, with readers of its own to check them, and reads the image data of PNG files
// (PNGImageData: the zlib stream and its filtered rows) for the encoders' tests. It only writes and reads bytes: it
// must not import the decoder it is used to test.
package imageiotest

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"hash/crc32"
)

// ScanBomb builds a side×side gray progressive JPEG whose DC scan is followed by scans AC scans that each
// skip every block with a few end-of-band runs: 18 bytes per scan, yet image/jpeg walks all blocks in each
// (2048×2048 with 1000 scans: 26 kB, about 9 s of CPU).
func ScanBomb(side, scans int) []byte {
	var b bytes.Buffer
	seg := func(m byte, p []byte) {
		b.Write([]byte{0xFF, m, byte((len(p) + 2) >> 8), byte(len(p) + 2)})
		b.Write(p)
	}
	b.Write([]byte{0xFF, 0xD8})
	q := bytes.Repeat([]byte{1}, 65)
	q[0] = 0
	seg(0xDB, q)
	seg(0xC2, []byte{8, byte(side >> 8), byte(side), byte(side >> 8), byte(side), 1, 1, 0x11, 0})
	// One-symbol Huffman tables: DC category 0, and AC EOB run 0xE0 (a run of 2^14 plus 14 bits).
	seg(0xC4, append([]byte{0x00, 1}, append(make([]byte, 15), 0x00)...))
	seg(0xC4, append([]byte{0x10, 1}, append(make([]byte, 15), 0xE0)...))
	blocks := (side / 8) * (side / 8)
	seg(0xDA, []byte{1, 1, 0x00, 0, 0, 0})
	b.Write(make([]byte, (blocks+7)/8)) // one zero bit (DC difference 0) per block
	for s := 0; s < scans; s++ {
		seg(0xDA, []byte{1, 1, 0x00, 1, 63, 0})
		bits := 15 * ((blocks + 16383) / 16384)
		d := make([]byte, (bits+7)/8)
		if r := bits % 8; r != 0 {
			d[len(d)-1] = byte(0xFF >> r) // pad the last byte with ones, as JPEG requires
		}
		b.Write(d)
	}
	b.Write([]byte{0xFF, 0xD9})
	return b.Bytes()
}

// PNGHeaderOnly returns a valid PNG container that announces w×h pixels of the given bit depth and color type
// (2: RGB, 6: RGBA) but holds one tiny IDAT: a header check sees the full size, a decoder fails early.
func PNGHeaderOnly(w, h uint32, depth, colorType byte) []byte {
	return pngFile(w, h, depth, colorType, []byte{0x78, 0x9c, 0x03, 0x00, 0x00, 0x00, 0x00, 0x01})
}

// StripedGrayPNG returns a complete w×h 8-bit gray PNG whose rows all hold the same vertical stripes (levels
// 100 to 106): the first row unfiltered, every other one filtered Up, so all zeros. A 40-megapixel file is a
// few hundred kB and costs a fraction of what image/png takes to make it (it tries five filters a row).
func StripedGrayPNG(w, h int) []byte {
	var z bytes.Buffer
	zw, _ := zlib.NewWriterLevel(&z, zlib.BestSpeed) // a valid level: no error
	row := make([]byte, 1+w)
	for x := range w {
		row[1+x] = byte(100 + x%7)
	}
	_, _ = zw.Write(row) // a bytes.Buffer takes every write
	up := make([]byte, 1+w)
	up[0] = 2 // Up: each byte is the one above
	for y := 1; y < h; y++ {
		_, _ = zw.Write(up)
	}
	_ = zw.Close()
	return pngFile(uint32(w), uint32(h), 8, 0, z.Bytes())
}

// pngFile is a PNG of one IHDR (w, h, depth, colour type), one IDAT holding zdata and the IEND.
func pngFile(w, h uint32, depth, colorType byte, zdata []byte) []byte {
	var b bytes.Buffer
	b.WriteString("\x89PNG\r\n\x1a\n")
	chunk := func(typ string, data []byte) {
		_ = binary.Write(&b, binary.BigEndian, uint32(len(data)))
		c := append([]byte(typ), data...)
		b.Write(c)
		_ = binary.Write(&b, binary.BigEndian, crc32.ChecksumIEEE(c))
	}
	ihdr := make([]byte, 13)
	binary.BigEndian.PutUint32(ihdr, w)
	binary.BigEndian.PutUint32(ihdr[4:], h)
	ihdr[8], ihdr[9] = depth, colorType
	chunk("IHDR", ihdr)
	chunk("IDAT", zdata)
	chunk("IEND", nil)
	return b.Bytes()
}
