// Package pixel holds the pixel conversions shared by the codec and its image reader.
package pixel

// UnpremultiplyRow converts one row of 8-bit premultiplied RGBA (src) into non-premultiplied RGBA (dst, same
// length), rounding to nearest. Fully transparent pixels are left zero: their colour is undefined.
func UnpremultiplyRow(dst, src []byte) {
	for i := 0; i+3 < len(dst); i += 4 {
		a := src[i+3]
		switch a {
		case 0xff:
			copy(dst[i:i+4], src[i:i+4])
		case 0:
		default:
			for k := 0; k < 3; k++ {
				dst[i+k] = uint8((uint32(src[i+k])*0xff + uint32(a)/2) / uint32(a))
			}
			dst[i+3] = a
		}
	}
}
