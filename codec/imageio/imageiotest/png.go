package imageiotest

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// PNGImageData reads a PNG file's image data without a decoder: z is its IDAT chunks joined (the zlib stream as
// written), rows the stream inflated (the filtered rows: per row a filter-type byte, then the row's bytes).
func PNGImageData(file []byte) (z, rows []byte, err error) {
	if len(file) < 8 {
		return nil, nil, errors.New("imageiotest: not a PNG file")
	}
	for p := file[8:]; len(p) >= 12; {
		n := int(binary.BigEndian.Uint32(p))
		if n < 0 || 12+n > len(p) {
			return nil, nil, fmt.Errorf("imageiotest: a %s chunk of %d bytes runs past the file", p[4:8], n)
		}
		if string(p[4:8]) == "IDAT" {
			z = append(z, p[8:8+n]...)
		}
		p = p[12+n:]
	}
	zr, err := zlib.NewReader(bytes.NewReader(z))
	if err != nil {
		return nil, nil, fmt.Errorf("imageiotest: image data: %w", err)
	}
	if rows, err = io.ReadAll(zr); err != nil {
		return nil, nil, fmt.Errorf("imageiotest: image data: %w", err)
	}
	return z, rows, nil
}
