package imageio

import (
	"fmt"
	"image"
	"image/color"
)

// Netpbm: P5 (gray) and P6 (RGB) binary, P2 and P3 their ASCII forms, with any maxval up to 65535. Samples with
// maxval above 255 become 16-bit images; others are scaled to 8 bits. The bitmap (P1, P4) and PAM (P7) variants
// are not supported.

type pnmHeader struct {
	magic    byte // '2', '3', '5' or '6'
	w, h     int
	maxval   int
	channels int
	dataOff  int // first byte after the header
}

func parsePNMHeader(data []byte) (pnmHeader, error) {
	var h pnmHeader
	if len(data) < 2 || data[0] != 'P' {
		return h, fmt.Errorf("not a Netpbm file: %w", ErrUnsupportedFormat)
	}
	h.magic = data[1]
	switch h.magic {
	case '2', '5':
		h.channels = 1
	case '3', '6':
		h.channels = 3
	default:
		return h, fmt.Errorf("Netpbm variant P%c (bitmap or PAM) is not supported: %w", h.magic, ErrUnsupportedFormat)
	}
	i := 2
	var vals [3]int
	for k := range vals {
		v, next, err := pnmInt(data, i)
		if err != nil {
			return h, err
		}
		vals[k], i = v, next
	}
	h.w, h.h, h.maxval = vals[0], vals[1], vals[2]
	if h.maxval < 1 || h.maxval > 65535 {
		return h, fmt.Errorf("Netpbm maxval %d out of range: %w", h.maxval, ErrCorrupt)
	}
	if h.w < 1 || h.h < 1 {
		return h, fmt.Errorf("Netpbm size %dx%d: %w", h.w, h.h, ErrCorrupt)
	}
	if i >= len(data) || !isPNMSpace(data[i]) {
		return h, fmt.Errorf("Netpbm header not followed by whitespace: %w", ErrCorrupt)
	}
	h.dataOff = i + 1 // exactly one whitespace byte separates the header from binary samples
	return h, nil
}

func isPNMSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
}

// pnmInt skips whitespace and comments and reads one decimal number starting at data[i]; it returns the number
// and the index just after its last digit.
func pnmInt(data []byte, i int) (int, int, error) {
	for i < len(data) {
		switch {
		case isPNMSpace(data[i]):
			i++
		case data[i] == '#':
			for i < len(data) && data[i] != '\n' && data[i] != '\r' {
				i++
			}
		default:
			goto digits
		}
	}
digits:
	start, v := i, 0
	for i < len(data) && data[i] >= '0' && data[i] <= '9' {
		v = v*10 + int(data[i]-'0')
		if v > 1<<30 {
			return 0, i, fmt.Errorf("Netpbm number too large: %w", ErrCorrupt)
		}
		i++
	}
	if i == start {
		if i >= len(data) {
			return 0, i, fmt.Errorf("Netpbm file truncated: %w", ErrCorrupt)
		}
		return 0, i, fmt.Errorf("Netpbm: unexpected byte %q: %w", data[i], ErrCorrupt)
	}
	return v, i, nil
}

func pnmConfig(data []byte) (image.Config, error) {
	h, err := parsePNMHeader(data)
	if err != nil {
		return image.Config{}, err
	}
	model := color.Model(color.GrayModel)
	switch {
	case h.channels == 1 && h.maxval > 255:
		model = color.Gray16Model
	case h.channels == 3 && h.maxval > 255:
		model = color.RGBA64Model
	case h.channels == 3:
		model = color.RGBAModel
	}
	return image.Config{ColorModel: model, Width: h.w, Height: h.h}, nil
}

func pnmDecode(data []byte) (image.Image, error) {
	h, err := parsePNMHeader(data)
	if err != nil {
		return nil, err
	}
	n := h.w * h.h * h.channels
	ascii := h.magic == '2' || h.magic == '3'
	bytesPer := 1
	if h.maxval > 255 {
		bytesPer = 2
	}
	// Refuse short files before allocating: a binary sample takes bytesPer bytes, an ASCII one at least two
	// (a digit and a separator), except the last.
	need := n * bytesPer
	if ascii {
		need = 2*n - 1
	}
	if len(data)-h.dataOff < need {
		return nil, fmt.Errorf("Netpbm file truncated: %d sample bytes for %d samples: %w", len(data)-h.dataOff, n, ErrCorrupt)
	}
	// sample returns sample k, read in order.
	pos := h.dataOff
	sample := func() (int, error) {
		var v int
		if ascii {
			var err error
			v, pos, err = pnmInt(data, pos)
			if err != nil {
				return 0, err
			}
		} else if bytesPer == 1 {
			v = int(data[pos])
			pos++
		} else {
			v = int(data[pos])<<8 | int(data[pos+1])
			pos += 2
		}
		if v > h.maxval {
			return 0, fmt.Errorf("Netpbm sample %d above maxval %d: %w", v, h.maxval, ErrCorrupt)
		}
		return v, nil
	}
	rect := image.Rect(0, 0, h.w, h.h)
	if h.maxval > 255 {
		// 16-bit output, scaled to the full 0..65535 range with rounding.
		if h.channels == 1 {
			img := image.NewGray16(rect)
			for k := 0; k < h.w*h.h; k++ {
				v, err := sample()
				if err != nil {
					return nil, err
				}
				s := (v*65535 + h.maxval/2) / h.maxval
				img.Pix[2*k], img.Pix[2*k+1] = byte(s>>8), byte(s)
			}
			return img, nil
		}
		img := image.NewNRGBA64(rect)
		for k := 0; k < h.w*h.h; k++ {
			for c := 0; c < 3; c++ {
				v, err := sample()
				if err != nil {
					return nil, err
				}
				s := (v*65535 + h.maxval/2) / h.maxval
				img.Pix[8*k+2*c], img.Pix[8*k+2*c+1] = byte(s>>8), byte(s)
			}
			img.Pix[8*k+6], img.Pix[8*k+7] = 0xFF, 0xFF
		}
		return img, nil
	}
	if h.channels == 1 {
		img := image.NewGray(rect)
		for k := range img.Pix {
			v, err := sample()
			if err != nil {
				return nil, err
			}
			img.Pix[k] = byte((v*255 + h.maxval/2) / h.maxval)
		}
		return img, nil
	}
	img := image.NewNRGBA(rect)
	for k := 0; k < h.w*h.h; k++ {
		for c := 0; c < 3; c++ {
			v, err := sample()
			if err != nil {
				return nil, err
			}
			img.Pix[4*k+c] = byte((v*255 + h.maxval/2) / h.maxval)
		}
		img.Pix[4*k+3] = 0xFF
	}
	return img, nil
}
