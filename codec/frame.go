package codec

import (
	"encoding/binary"
	"hash/crc32"
)

// The info word carried by the mark: the 256 id bits, a 4-bit format version, a 12-bit magic word and a CRC-32
// over everything before it. Version and magic are fixed, so together with the CRC they give 48 check bits that a
// random (unmarked) decode passes with probability 2^-48 (docs/codec.md, "False positives").
const (
	idBits       = 256
	frameVersion = 1
	frameMagic   = 0xF19 // 12 bits
	infoBits     = idBits + 4 + 12 + 32
	codedBits    = 3 * infoBits // rate 1/3 tail-biting convolutional code
)

// frameBits returns the info word of id, one bit per byte (0 or 1), MSB first.
func frameBits(id ID) []uint8 {
	var head [34]byte
	copy(head[:32], id[:])
	binary.BigEndian.PutUint16(head[32:], uint16(frameVersion<<12|frameMagic))
	crc := crc32.ChecksumIEEE(head[:])
	var all [38]byte
	copy(all[:], head[:])
	binary.BigEndian.PutUint32(all[34:], crc)
	bits := make([]uint8, infoBits)
	for i := range bits {
		bits[i] = (all[i/8] >> (7 - uint(i%8))) & 1
	}
	return bits
}

// parseFrame checks version, magic and CRC of a decoded info word and returns the id when all pass.
func parseFrame(bits []uint8) (ID, bool) {
	if len(bits) != infoBits {
		return ID{}, false
	}
	var all [38]byte
	for i, b := range bits {
		all[i/8] |= (b & 1) << (7 - uint(i%8))
	}
	if binary.BigEndian.Uint16(all[32:34]) != uint16(frameVersion<<12|frameMagic) {
		return ID{}, false
	}
	if crc32.ChecksumIEEE(all[:34]) != binary.BigEndian.Uint32(all[34:]) {
		return ID{}, false
	}
	var id ID
	copy(id[:], all[:32])
	return id, true
}
